// The gRPC face of the one unary adapter (edge_unary.h), which both gRPC services (Sandgate,
// service.cc; Images, image_service.cc) answer their unary RPCs with: the request checked for
// NULs, the caller authenticated, the call served on its lane's executor and finished with
// its status.
//
//   return GrpcUnary(deps_, ctx, rpcs::kKeepAlive, request, response);
//
// Internal to server/. Thread safe; `deps` and the UnaryRpc outlive the call.
#ifndef SANDGATE_SERVER_GRPC_UNARY_H_
#define SANDGATE_SERVER_GRPC_UNARY_H_

#include <grpcpp/grpcpp.h>

#include "server/edge_unary.h"
#include "server/reactor.h"
#include "server/status.h"
#include "server/utf8_fields.h"

namespace sandgate::server {

// A handler that takes its request by pointer takes its contents: gRPC owns the (non-const)
// message and only destroys it after the call.
template <typename Api, typename Arg, typename Resp>
grpc::ServerUnaryReactor* GrpcUnary(const ServiceDeps& deps, grpc::CallbackServerContext* ctx,
                                    const UnaryRpc<Api, Arg, Resp>& rpc,
                                    const typename UnaryRpc<Api, Arg, Resp>::Req* request,
                                    Resp* response) {
  using Req = typename UnaryRpc<Api, Arg, Resp>::Req;
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status valid = CheckNoNul(*request); !valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
    return reactor;
  }
  const bool queued = SubmitOnLane(
      deps, rpc.policy->lane, caller->tenant,
      [&deps, &rpc, ctx, reactor, request, response, caller = *caller] {
        ServeUnary(deps, rpc, EdgeCall{ctx, ""}, caller, const_cast<Req*>(request), response,
                   [reactor](const absl::Status& st) { reactor->Finish(ToGrpc(st)); });
      });
  if (!queued) reactor->Finish(ToGrpc(QueueFull()));
  return reactor;
}

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_GRPC_UNARY_H_
