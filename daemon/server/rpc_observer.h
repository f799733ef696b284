// RpcObserver: a server interceptor that sees every RPC's final status. It counts each RPC in
// sandgate_rpcs_total by method and code, and it gives a request that did not parse the
// status it deserves.
//
// Why the second: when a unary or server-streaming request does not parse (a proto3 string
// field that is not valid UTF-8, or bytes that are not the message), gRPC's callback handlers
// never call ours; they finish the call with UNIMPLEMENTED and an empty message
// (grpcpp/impl/codegen/server_callback_handlers.h, "if deserialization or reactor creator
// failed"), which tells the caller nothing true. An interceptor cannot reject a call, but it
// sees that the received message is missing (POST_RECV_MESSAGE with no message) and may
// change the status about to be sent (PRE_SEND_STATUS): that one status becomes
// INVALID_ARGUMENT saying the request is not valid.
//
//   builder.experimental().SetInterceptorCreators(RpcObserver::Factories(metrics));
//
// Thread safe: one interceptor per call, used by gRPC one hook at a time; the factory only
// holds the metrics pointer, which must outlive the server.
#ifndef SANDGATE_SERVER_RPC_OBSERVER_H_
#define SANDGATE_SERVER_RPC_OBSERVER_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>
#include <vector>

#include "core/metrics.h"

namespace sandgate::server {

class RpcObserver final : public grpc::experimental::Interceptor {
 public:
  RpcObserver(grpc::experimental::ServerRpcInfo* info, core::Metrics* metrics);
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override;

  static std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
  Factories(core::Metrics* metrics);

 private:
  grpc::experimental::ServerRpcInfo* const info_;
  core::Metrics* const metrics_;
  // The method's full name when it is one the daemon's protos declare, else "unknown" (a
  // label value a client cannot grow without bound).
  const std::string method_;
  bool request_missing_ = false;
  bool first_message_ = true;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_RPC_OBSERVER_H_
