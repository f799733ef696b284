// The one place absl::Status and grpc::Status become each other (the codes are the same
// numbers).
#ifndef SANDGATE_SERVER_STATUS_H_
#define SANDGATE_SERVER_STATUS_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "common/utf8.h"

namespace sandgate::server {

// Messages often quote a path or a name that sandbox code chose; they are escaped to valid
// UTF-8 here, the one place every status passes, as clients decode them as text.
inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), EscapeInvalidUtf8(s.message()));
}

// A status from another replica (a forwarded call) as the edge passes it on.
inline absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_STATUS_H_
