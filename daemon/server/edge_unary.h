// The one unary adapter of the edge, which both faces call: the gRPC service (service.cc)
// with the call's context, the REST routes (rest_routes.cc) with the caller's Authorization
// header. Given the RPC's entry (unary_rpcs.h: its policy, rpc_policy.h, and its core::Api
// or core::ImageApi function) and an authenticated caller, on the executor of the policy's lane it
//
//   1. applies the policy's auth rule (Authorize);
//   2. forwards a call on another replica's session or run to that owner (server/forwarding.h)
//      and relays its answer, which the owner has audited;
//   3. else calls the core::Api function, asks the owner once more when the answer says the
//      run moved (UnaryRpc::again), escapes the response's strings to UTF-8, and audits it;
//
// and hands the status to `done` (the response filled in when OK).
//
//   ServeUnary(deps, kKeepAlive, EdgeCall{ctx, ""}, caller, &request, &response,
//              [reactor](const absl::Status& st) { reactor->Finish(ToGrpc(st)); });
//
// Internal to server/. Thread safe; `deps` and the UnaryRpc outlive the call.
#ifndef SANDGATE_SERVER_EDGE_UNARY_H_
#define SANDGATE_SERVER_EDGE_UNARY_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "absl/status/statusor.h"
#include "core/api.h"
#include "server/forwarding.h"
#include "server/rpc_policy.h"
#include "server/service.h"
#include "server/utf8_fields.h"

namespace sandgate::server {

template <typename T>
struct Identity {
  using type = T;
};

// One unary RPC: its policy and its function, a member of core::Api or core::ImageApi (the
// Images service), whose request is `Arg` (by const reference, or by pointer for a handler
// that takes the request's contents).
template <typename Api, typename Arg, typename Resp>
struct UnaryRpc {
  using Req = std::remove_cv_t<std::remove_pointer_t<std::remove_reference_t<Arg>>>;
  const RpcPolicy* policy;
  absl::Status (Api::*handler)(const core::Caller&, Arg, Resp*);
  // Audited (policy->audit): what the call acted on, read after the handler ran.
  std::string (*target)(const Req&, const Resp&) = nullptr;
  // When set and true of a local answer, the owner is looked up once more and the call sent
  // on when its target moved to another replica meanwhile (a waiting run claimed elsewhere as
  // it was cancelled: core/run_manager.h Cancel); the owner's answer replaces the local one.
  bool (*again)(const Resp&) = nullptr;
};

template <typename Api, typename Arg, typename Resp>
constexpr UnaryRpc<Api, Arg, Resp> MakeRpc(
    std::string_view name, absl::Status (Api::*handler)(const core::Caller&, Arg, Resp*),
    typename Identity<std::string (*)(const typename UnaryRpc<Api, Arg, Resp>::Req&,
                                      const Resp&)>::type target = nullptr,
    typename Identity<bool (*)(const Resp&)>::type again = nullptr) {
  return {&Policy(name), handler, target, again};
}

// The object whose member an RPC's handler is.
inline core::Api* HandlerObject(const ServiceDeps& deps, core::Api*) { return deps.api; }
inline core::ImageApi* HandlerObject(const ServiceDeps& deps, core::ImageApi*) {
  return deps.images;
}

// Runs `task` on the executor of `lane` (Exec's in `tenant`'s queue for kWaits); false when
// its queue is full (QueueFull()).
bool SubmitOnLane(const ServiceDeps& deps, Lane lane, const std::string& tenant,
                  std::function<void()> task);

// Sends the unary call `method` ("KeepAlive") to `route`'s replica: `done` gets the owner's
// status (Forwarder::Explain) with `response` parsed from its answer. `request` is copied.
void RelayUnary(const ServiceDeps& deps, const Route& route, std::string_view method,
                const EdgeCall& from, const google::protobuf::Message& request,
                google::protobuf::Message* response, std::function<void(absl::Status)> done);

// Writes the call to the audit log when its policy says so.
void AuditCall(const ServiceDeps& deps, const RpcPolicy& policy, const core::Caller& caller,
               const std::string& target, const absl::Status& status);

template <typename Api, typename Arg, typename Resp>
void ServeUnary(const ServiceDeps& deps, const UnaryRpc<Api, Arg, Resp>& rpc, const EdgeCall& from,
                const core::Caller& caller, typename UnaryRpc<Api, Arg, Resp>::Req* request,
                Resp* response, std::function<void(absl::Status)> done) {
  const RpcPolicy& policy = *rpc.policy;
  Api* const api = HandlerObject(deps, static_cast<Api*>(nullptr));
  // True when the owner is another replica (it answers, and audits) or cannot be found.
  auto forwarded = [&] {
    absl::StatusOr<std::optional<Route>> route =
        OwnerRoute(deps, policy.owner, from, caller, *request);
    if (!route.ok()) {
      done(route.status());
      return true;
    }
    if (!route->has_value()) return false;
    RelayUnary(deps, **route, policy.name, from, *request, response, std::move(done));
    return true;
  };
  absl::Status st = Authorize(policy, caller);
  if (st.ok()) {
    if (forwarded()) return;
    if constexpr (std::is_pointer_v<Arg>) {
      st = (api->*rpc.handler)(caller, request, response);
    } else {
      st = (api->*rpc.handler)(caller, *request, response);
    }
    if (st.ok() && rpc.again != nullptr && rpc.again(*response) && forwarded()) return;
  }
  if (st.ok()) EscapeStringFields(response);
  if (!policy.audit.empty()) {
    AuditCall(deps, policy, caller, rpc.target != nullptr ? rpc.target(*request, *response) : "",
              st);
  }
  done(st);
}

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_EDGE_UNARY_H_
