// Short names of the API's status values, for people and metric labels: "SUCCEEDED" for
// RUN_STATUS_SUCCEEDED, "ACTIVE" for SESSION_STATUS_ACTIVE. The proto names carry their
// enum's prefix (buf's STANDARD lint, and what proto3 JSON prints); a terminal line and a
// Prometheus label do not need it.
//
//   std::printf("run %s\n", sandgate::v1::RunStatusLabel(run.status()).c_str());  // "run SUCCEEDED"
#ifndef SANDGATE_PROTO_SANDGATE_V1_LABELS_H_
#define SANDGATE_PROTO_SANDGATE_V1_LABELS_H_

#include <string>

#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::v1 {

namespace labels_internal {
inline std::string WithoutPrefix(const std::string& name, const std::string& prefix) {
  return name.compare(0, prefix.size(), prefix) == 0 ? name.substr(prefix.size()) : name;
}
}  // namespace labels_internal

inline std::string RunStatusLabel(RunStatus s) {
  return labels_internal::WithoutPrefix(RunStatus_Name(s), "RUN_STATUS_");
}

inline std::string SessionStatusLabel(SessionStatus s) {
  return labels_internal::WithoutPrefix(SessionStatus_Name(s), "SESSION_STATUS_");
}

}  // namespace sandgate::v1

#endif  // SANDGATE_PROTO_SANDGATE_V1_LABELS_H_
