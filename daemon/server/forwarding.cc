#include "server/forwarding.h"

#include <google/protobuf/descriptor.h>

#include "absl/strings/str_cat.h"
#include "common/address.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/grpc_server.h"

namespace sandgate::server {
namespace {

std::string Meta(const grpc::CallbackServerContext* ctx, const char* key) {
  if (ctx == nullptr) return "";
  const auto& md = ctx->client_metadata();
  auto it = md.find(key);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

}  // namespace

std::unique_ptr<Forwarder> Forwarder::FromConfig(core::OwnerLookup* owners,
                                                 const core::Config& config) {
  ForwarderOptions o;
  o.owners = owners;
  o.tls = config.tls;
  // Replicas share the config: a TCP listener without TLS could only start with one of these.
  o.allow_plaintext_tcp = config.allow_plaintext_tokens || config.allow_unauthenticated_tcp;
  o.verify_marker = config.tls.enabled() && !config.tls.client_ca_file.empty();
  return std::make_unique<Forwarder>(std::move(o));
}

absl::StatusOr<std::optional<Route>> Forwarder::For(const grpc::CallbackServerContext* ctx,
                                                    const core::Caller& caller, Owner owner,
                                                    const std::string& id) {
  if (owner == Owner::kAny || id.empty()) return std::nullopt;
  const std::string what = absl::StrCat(owner == Owner::kRun ? "run " : "session ", id);
  absl::StatusOr<std::optional<core::Peer>> found = owner == Owner::kRun
                                                        ? options_.owners->OfRun(caller, id)
                                                        : options_.owners->OfSession(caller, id);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return std::nullopt;
  const core::Peer& peer = **found;
  if (std::string by = ForwardedBy(ctx); !by.empty()) {
    // Never twice: two replicas that disagree about an owner must not bounce a call.
    return errors::FailedPrecondition(absl::StrCat(
        "replica ", by, " forwarded this call to replica ", options_.owners->self(), ", but ", what,
        " is owned by replica ", peer.replica, "; not forwarding it again: retry"));
  }
  SANDGATE_ASSIGN_OR_RETURN(Route route, RouteTo(peer));
  return route;
}

absl::StatusOr<Route> Forwarder::RouteTo(const core::Peer& peer) {
  absl::MutexLock lock(&mu_);
  auto it = routes_.find(peer.address);
  if (it != routes_.end()) {
    Route route = it->second;
    route.peer = peer;
    return route;
  }
  const std::string to = absl::StrCat("forwarding to replica ", peer.replica, " at ", peer.address);
  absl::StatusOr<Address> address = ParseAddress(peer.address);
  if (!address.ok()) {
    return errors::Unavailable(absl::StrCat(to, ": ", address.status().message()));
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (address->unix_socket) {
    creds = grpc::InsecureChannelCredentials();
  } else if (options_.tls.enabled()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls =
        PeerChannelCredentials(options_.tls);
    if (!tls.ok()) return errors::Unavailable(absl::StrCat(to, ": ", tls.status().message()));
    creds = *tls;
  } else if (options_.allow_plaintext_tcp) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    return errors::Unavailable(absl::StrCat(
        to,
        ": TCP between replicas needs TLS (tls.cert_file, tls.key_file, tls.client_ca_file) "
        "unless the config allows plaintext TCP"));
  }
  grpc::ChannelArguments args;
  // The owner's listener enforces the sizes; the relay passes on whatever it accepts.
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address->GrpcTarget(), creds, args);
  Route route{peer, channel, std::shared_ptr<v1::Sandgate::Stub>(v1::Sandgate::NewStub(channel)),
              std::make_shared<grpc::GenericStub>(channel)};
  routes_.emplace(peer.address, route);
  log::Info("replica.peer_channel", {{"replica", peer.replica}, {"address", peer.address}});
  return route;
}

std::string Forwarder::ForwardedBy(const grpc::CallbackServerContext* ctx) const {
  std::string by = Meta(ctx, kForwardedBy);
  if (by.empty()) return "";
  if (options_.verify_marker) {
    std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
    if (auth == nullptr || !auth->IsPeerAuthenticated()) return "";
  }
  return by;
}

std::unique_ptr<grpc::ClientContext> Forwarder::ContextFor(const EdgeCall& from) const {
  // Deadline and cancellation: a caller that goes away cancels the forwarded call too.
  std::unique_ptr<grpc::ClientContext> out =
      from.grpc == nullptr ? std::make_unique<grpc::ClientContext>()
                           : grpc::ClientContext::FromCallbackServerContext(*from.grpc);
  const std::string authorization =
      from.grpc == nullptr ? from.authorization : Meta(from.grpc, "authorization");
  if (!authorization.empty()) out->AddMetadata("authorization", authorization);
  out->AddMetadata(kForwardedBy, options_.owners->self());
  return out;
}

grpc::Status Forwarder::Explain(const Route& route, const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return status;
  // The owner's own UNAVAILABLE (it is draining, say) comes on a connected channel.
  if (route.channel->GetState(false) == GRPC_CHANNEL_READY) return status;
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("replica ", route.peer.replica, " at ", route.peer.address,
                   ", which owns what this call acts on, cannot be reached (",
                   status.error_message(), "); if it has stopped, its lease ends at ",
                   absl::FormatTime(route.peer.lease_ends),
                   " (later, if it renewed after this call began) and another replica then "
                   "fails its runs and ends its sessions"));
}

absl::StatusOr<std::optional<Route>> OwnerRoute(const ServiceDeps& deps, Owner owner,
                                                const EdgeCall& from, const core::Caller& caller,
                                                const google::protobuf::Message& request) {
  if (deps.forwarder == nullptr || owner == Owner::kAny) return std::nullopt;
  // The table's unit test holds every kSession (kRun) request to a session_id (run_id) field.
  const google::protobuf::FieldDescriptor* field =
      request.GetDescriptor()->FindFieldByName(owner == Owner::kRun ? "run_id" : "session_id");
  if (field == nullptr) return std::nullopt;
  return deps.forwarder->For(from.grpc, caller, owner,
                             request.GetReflection()->GetString(request, field));
}

void UploadRelay::Begin(grpc::GenericStub* stub, const grpc::ByteBuffer* first) {
  stub->PrepareBidiStreamingCall(ctx_.get(), "/sandgate.v1.Sandgate/UploadFile",
                                 grpc::StubOptions(), this);
  // Held until the caller's stream ended, so OnDone never comes while a write is wanted.
  AddHold();
  StartRead(&response_);
  StartWrite(first);
  StartCall();
}

void UploadRelay::End(bool cut) {
  if (cut) {
    ctx_->TryCancel();
  } else {
    StartWritesDone();
  }
  RemoveHold();
}

void UploadRelay::OnWriteDone(bool ok) {
  if (ok) {
    next_();
    return;
  }
  // The owner ended the call (its status says why): the caller's stream is not read again.
  RemoveHold();
}

}  // namespace sandgate::server
