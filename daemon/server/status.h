// The one place absl::Status becomes grpc::Status (the codes are the same numbers).
#ifndef SANDGATE_SERVER_STATUS_H_
#define SANDGATE_SERVER_STATUS_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace sandgate::server {

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_STATUS_H_
