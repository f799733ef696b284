// ReflectionV1: gRPC server reflection, version grpc.reflection.v1, from the protobuf
// descriptors linked into the binary. The gRPC we build against (Debian 12's 1.51) serves
// only grpc.reflection.v1alpha (its reflection plugin, which the daemon also installs);
// current tools (grpcurl, buf curl, Postman) ask for v1 first. Both versions carry the same
// messages, so the answers are the same.
//
//   ReflectionV1 reflection({"sandgate.v1.Sandgate", "grpc.health.v1.Health", ...});
//   builder.RegisterService(&reflection);
//
// Thread safe: each stream has its own reactor; the service list is constant.
#ifndef SANDGATE_SERVER_REFLECTION_V1_H_
#define SANDGATE_SERVER_REFLECTION_V1_H_

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace sandgate::server {

class ReflectionV1 final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  // `services`: the full names list_services answers with (every service the server has).
  explicit ReflectionV1(std::vector<std::string> services) : services_(std::move(services)) {}

  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* ctx) override;

 private:
  const std::vector<std::string> services_;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_REFLECTION_V1_H_
