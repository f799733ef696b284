#include "server/edge_unary.h"

#include <google/protobuf/descriptor.h>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "server/reactor.h"
#include "server/status.h"

namespace sandgate::server {

bool SubmitOnLane(const ServiceDeps& deps, Lane lane, const std::string& tenant,
                  std::function<void()> task) {
  return lane == Lane::kWaits ? deps.exec->Submit(tenant, std::move(task))
                              : deps.io->Submit(std::move(task));
}

void RelayUnary(const ServiceDeps& deps, const Route& route, std::string_view method,
                const EdgeCall& from, const google::protobuf::Message& request,
                google::protobuf::Message* response, std::function<void(absl::Status)> done) {
  std::shared_ptr<grpc::ClientContext> ctx = deps.forwarder->ContextFor(from);
  std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  auto req = std::make_shared<grpc::ByteBuffer>(&slice, 1);
  auto resp = std::make_shared<grpc::ByteBuffer>();
  route.generic->UnaryCall(
      ctx.get(), "/sandgate.v1.Sandgate/" + std::string(method), grpc::StubOptions(), req.get(),
      resp.get(), [ctx, req, resp, route, response, done = std::move(done)](grpc::Status st) {
        if (!st.ok()) return done(FromGrpc(Forwarder::Explain(route, st)));
        std::string data;
        std::vector<grpc::Slice> slices;
        if (resp->Dump(&slices).ok()) {
          for (const grpc::Slice& s : slices) {
            data.append(reinterpret_cast<const char*>(s.begin()), s.size());
          }
        }
        if (!response->ParseFromString(data)) {
          return done(errors::Internal(absl::StrCat(
              "replica ", route.peer.replica, " answered with a message that does not parse")));
        }
        done(absl::OkStatus());
      });
}

void AuditCall(const ServiceDeps& deps, const RpcPolicy& policy, const core::Caller& caller,
               const std::string& target, const absl::Status& status) {
  if (deps.audit == nullptr || policy.audit.empty()) return;
  deps.audit->Record(caller.tenant, std::string(policy.audit), target, status);
}

}  // namespace sandgate::server
