// MemoryProvider: a fake sandbox provider whose sessions keep their workspace files in memory
// and run no command (Exec fails). For callers that must not touch the host whatever the
// request says: the REST fuzz target (tests/fuzz/) sends arbitrary paths and commands.
//
// Thread safe.
#ifndef SANDGATE_TESTS_FAKES_MEMORY_SANDBOX_H_
#define SANDGATE_TESTS_FAKES_MEMORY_SANDBOX_H_

#include <memory>
#include <string>

#include "sandbox/sandbox.h"

namespace sandgate::testing {

class MemoryProvider : public sandbox::Provider {
 public:
  std::string name() const override { return "local"; }
  absl::StatusOr<std::unique_ptr<sandbox::Session>> Create(const sandbox::SessionSpec& spec,
                                                           const CancelToken* cancel) override;
  absl::Status Sweep(const JournalEntry&) override { return absl::OkStatus(); }
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_MEMORY_SANDBOX_H_
