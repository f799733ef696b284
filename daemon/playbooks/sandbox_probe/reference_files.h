// The sandbox-probe program, embedded at build time from
// daemon/playbooks/sandbox_probe/reference/ (daemon/playbooks/CMakeLists.txt generates it).
#ifndef SANDGATE_PLAYBOOKS_SANDBOX_PROBE_REFERENCE_FILES_H_
#define SANDGATE_PLAYBOOKS_SANDBOX_PROBE_REFERENCE_FILES_H_

#include <cstddef>

namespace sandgate::playbooks::probe {

extern const bool kSandboxProbeEmbedded;
extern const char kSandboxProbeSource[];
extern const size_t kSandboxProbeSize;

}  // namespace sandgate::playbooks::probe

#endif  // SANDGATE_PLAYBOOKS_SANDBOX_PROBE_REFERENCE_FILES_H_
