// Forwarding: a call on a run or kept session that another replica owns is sent on to that
// replica, so any replica serves any call (docs/replicas.md, "Forwarding").
//
// The edge asks a Forwarder where a call is served (core::OwnerLookup); when the answer is a
// live peer it opens the same call there, with the caller's own `authorization` metadata (the
// owner authenticates the caller exactly as if called directly: replicas share the config),
// the caller's deadline, and cancellation propagated, and relays the answer back unchanged:
// a unary response and status as they are, a stream message by message. Which calls go to an
// owner, and by which field of their request, is the policy table's owner rule (rpc_policy.h),
// read by OwnerRoute for every call of either face:
//
//   SANDGATE_ASSIGN_OR_RETURN(
//       std::optional<Route> route,
//       OwnerRoute(deps, Policy("KeepAlive").owner, EdgeCall{ctx, ""}, caller, request));
//   if (route) { ... RelayUnary(deps, *route, "KeepAlive", ...) ... }
//
// A forwarded call carries kForwardedBy (the forwarding replica's id), and the owner never
// forwards it again: if its own lookup names yet another replica (the store changed meanwhile)
// it answers FAILED_PRECONDITION naming both. The marker grants nothing: the token is checked
// either way. When the listener verifies client certificates (tls.client_ca_file), it is
// honoured only from a peer that presented one the cluster CA signed; from anyone else it is
// ignored and the call is forwarded as any other.
//
// Channels are made once per peer address and kept (gRPC reconnects them): mutual TLS from
// the daemon's own `tls` section (PeerChannelCredentials) when TLS is on; plaintext only to a
// Unix socket, or over TCP when the config allows plaintext TCP.
//
// Thread safe. The OwnerLookup outlives the Forwarder.
#ifndef SANDGATE_SERVER_FORWARDING_H_
#define SANDGATE_SERVER_FORWARDING_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/config.h"
#include "core/owner.h"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "server/reactor.h"
#include "server/rpc_policy.h"
#include "server/status.h"

namespace sandgate::server {

// The metadata key of a forwarded call; its value is the forwarding replica's id.
inline constexpr char kForwardedBy[] = "sandgate-forwarded-by";

// A live peer and the stubs that reach it (shared by every call to it).
struct Route {
  core::Peer peer;
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<v1::Sandgate::Stub> stub;
  std::shared_ptr<grpc::GenericStub> generic;  // raw messages (UploadFile)
};

// Where a call came from.
struct EdgeCall {
  // The gRPC call being served (its metadata, deadline, cancellation and forwarding marker
  // pass to a forwarded call), or null for a call that came over REST.
  grpc::CallbackServerContext* grpc = nullptr;
  // REST: the caller's Authorization header, sent on to an owner as gRPC metadata so that it
  // authenticates the caller as if called directly.
  std::string authorization;
};

struct ForwarderOptions {
  core::OwnerLookup* owners = nullptr;  // not owned
  core::TlsConfig tls;                  // enabled(): mutual TLS to peers
  bool allow_plaintext_tcp = false;     // TCP peers without TLS
  // The listener verifies client certificates: the marker is honoured only from a verified
  // peer.
  bool verify_marker = false;
};

class Forwarder {
 public:
  explicit Forwarder(ForwarderOptions options) : options_(std::move(options)) {}
  // Built from the daemon's config.
  static std::unique_ptr<Forwarder> FromConfig(core::OwnerLookup* owners,
                                               const core::Config& config);

  // Where a call of `caller` on the session or run (`owner`) `id` is served: nullopt here
  // (also for kAny or an empty id), else the route to its owner. The lookup's UNAVAILABLE
  // when the owner is gone; FAILED_PRECONDITION for a call forwarded here that this replica
  // would forward again; an error naming the peer and its address when no channel can be
  // made to it. Blocks (the store): call off the reactions. `ctx` is the gRPC call being
  // served, or null for a call that came another way (REST): no marker to honour.
  absl::StatusOr<std::optional<Route>> For(const grpc::CallbackServerContext* ctx,
                                           const core::Caller& caller, Owner owner,
                                           const std::string& id);

  // The context of the call forwarded from `from`: the caller's deadline and cancellation
  // (gRPC's propagation from `from.grpc`), its authorization (the gRPC call's metadata, or
  // `from.authorization` for a call that came another way), and the marker. Without a gRPC
  // call the caller cancels the forwarded call itself.
  std::unique_ptr<grpc::ClientContext> ContextFor(const EdgeCall& from) const;

  // The forwarded call's status as the caller gets it: the owner's unchanged, except when the
  // owner could not be reached at all (UNAVAILABLE on a channel that is not connected), which
  // is said in words naming the replica and when its lease ends.
  static grpc::Status Explain(const Route& route, const grpc::Status& status);

 private:
  absl::StatusOr<Route> RouteTo(const core::Peer& peer);
  // The replica that forwarded `ctx`'s call here, "" when it was not (or the marker is not
  // to be trusted).
  std::string ForwardedBy(const grpc::CallbackServerContext* ctx) const;

  const ForwarderOptions options_;
  absl::Mutex mu_;
  std::map<std::string, Route> routes_ ABSL_GUARDED_BY(mu_);  // by address
};

// Where a call on what `request` names (its session_id or run_id, by `owner`) is served:
// nullopt here (also with no forwarder, kAny, or an empty id), else the route to its owner.
// Blocks (the store): on an executor.
absl::StatusOr<std::optional<Route>> OwnerRoute(const ServiceDeps& deps, Owner owner,
                                                const EdgeCall& from, const core::Caller& caller,
                                                const google::protobuf::Message& request);

// A CancelRun answered here that did not end the run: a waiting run claimed from the shared
// queue by another replica as it was cancelled (core/run_manager.h Cancel), whose owner is to
// be asked again.
inline bool RunMayHaveMoved(const v1::Run& r) {
  return r.status() == v1::RUN_STATUS_QUEUED || r.status() == v1::RUN_STATUS_RUNNING;
}

// Relays a server-streaming call from the owner to the caller, one message at a time: the
// next message is read from the owner only once the previous one has been written to the
// caller, so flow control holds end to end and nothing is buffered beyond one message.
//
// The caller's reactor owns the relay, makes it when the route is known, and hands it each of
// its own write completions (WriteDone) and its cancellation (Cancel). `write` starts a write
// of a message to the caller; `finish` ends the caller's call with the owner's status and is
// the relay's last act (the reactor may be deleted in it, and the relay with it).
//
// Thread safe in the way gRPC reactors are: one reaction at a time per direction.
template <typename Resp>
class StreamRelay final : public grpc::ClientReadReactor<Resp> {
 public:
  using Start = std::function<void(grpc::ClientContext*, grpc::ClientReadReactor<Resp>*)>;
  StreamRelay(std::unique_ptr<grpc::ClientContext> ctx, std::function<void(const Resp*)> write,
              std::function<void(const grpc::Status&)> finish)
      : ctx_(std::move(ctx)), write_(std::move(write)), finish_(std::move(finish)) {}

  // `start` opens the call (stub->async()->Exec(ctx, &request, reactor)).
  void Begin(const Start& start) {
    start(ctx_.get(), this);
    // Held until the reading ends, so that OnDone never comes while a message is being
    // written to the caller.
    this->AddHold();
    this->StartRead(&msg_);
    this->StartCall();
  }
  // The caller's write of the last message read ended.
  void WriteDone(bool ok) {
    if (ok) {
      this->StartRead(&msg_);
      return;
    }
    ctx_->TryCancel();
    this->RemoveHold();
  }
  void Cancel() { ctx_->TryCancel(); }

  void OnReadDone(bool ok) override {
    if (ok) {
      write_(&msg_);
    } else {
      this->RemoveHold();
    }
  }
  void OnDone(const grpc::Status& status) override { finish_(status); }

 private:
  const std::unique_ptr<grpc::ClientContext> ctx_;
  const std::function<void(const Resp*)> write_;
  const std::function<void(const grpc::Status&)> finish_;
  Resp msg_;
};

// The forwarding half of a server-streaming reactor (Exec, DownloadFile): once the route is
// known (on an executor), the reactor either serves the call itself or hands it to a
// StreamRelay, and then passes its write completions and cancellation here first. Where the
// call is served is its policy's owner rule (rpc_policy.h), as for every other call.
// `host` owns this and outlives it, as `deps` and `policy` do; a relay holds a reference to
// `host` until it finished.
//
// The lookup reads the caller's server context (its metadata, its peer's certificate), which
// gRPC frees once the host's call is done: so while the route is not known, this, not the
// host, ends a cancelled call (Cancel answers true), after the lookup and before anything
// else reads the context.
template <typename Resp>
class RelayedWriter {
 public:
  RelayedWriter(const ServiceDeps& deps, const RpcPolicy& policy, grpc::CallbackServerContext* ctx,
                PullWriter<Resp>* host)
      : deps_(deps), policy_(policy), ctx_(ctx), host_(host), decided_(deps.forwarder == nullptr) {}

  // For `caller`'s call with `request`: false to serve it here; true when it was sent to the
  // owner the policy names (`start(async_stub, client_context, reactor)` opens the call
  // there) or finished with why it cannot be (also CANCELLED, when the caller went away
  // during the lookup). Called once, before the host finishes. Blocks (the lookup): call on
  // an executor.
  template <typename StartFn>
  bool ToOwner(const core::Caller& caller, const google::protobuf::Message& request,
               StartFn start) {
    if (deps_.forwarder == nullptr) return false;
    absl::StatusOr<std::optional<Route>> route =
        OwnerRoute(deps_, policy_.owner, EdgeCall{ctx_, ""}, caller, request);
    std::unique_ptr<StreamRelay<Resp>> relay;
    PullWriter<Resp>* host = host_;
    if (route.ok() && route->has_value()) {
      relay = std::make_unique<StreamRelay<Resp>>(
          deps_.forwarder->ContextFor({ctx_, ""}),
          [host](const Resp* msg) { host->StartWrite(msg); },
          [host, route = **route](const grpc::Status& status) {
            host->FinishOnce(Forwarder::Explain(route, status));
            host->Release();
          });
    }
    StreamRelay<Resp>* r = relay.get();
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      decided_ = true;
      cancelled = cancelled_;
      if (!cancelled) relay_ = std::move(relay);
    }
    if (!route.ok() || cancelled) {
      host_->FinishOnce(!route.ok()
                            ? ToGrpc(route.status())
                            : grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
      return true;
    }
    if (r == nullptr) return false;  // served here
    host_->Acquire();
    std::shared_ptr<v1::Sandgate::Stub> stub = (*route)->stub;
    r->Begin([&](grpc::ClientContext* c, grpc::ClientReadReactor<Resp>* reactor) {
      start(stub->async(), c, reactor);
    });
    return true;
  }
  // The host's write ended; true when it was a relayed message (the relay goes on).
  bool WriteDone(bool ok) {
    StreamRelay<Resp>* r = relay();
    if (r == nullptr) return false;
    r->WriteDone(ok);
    return true;
  }
  // The caller cancelled; true when this ends the call: it is relayed (the owner's status
  // ends it) or its route is still being looked up (ToOwner ends it). False: the host
  // serves it and ends it.
  bool Cancel() {
    StreamRelay<Resp>* r;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (decided_ && relay_ == nullptr) return false;
      r = relay_.get();
    }
    if (r != nullptr) r->Cancel();
    return true;
  }

 private:
  StreamRelay<Resp>* relay() {
    absl::MutexLock lock(&mu_);
    return relay_.get();
  }

  const ServiceDeps& deps_;
  const RpcPolicy& policy_;
  grpc::CallbackServerContext* const ctx_;  // gRPC's, valid until the host's OnDone
  PullWriter<Resp>* const host_;
  absl::Mutex mu_;
  bool decided_ ABSL_GUARDED_BY(mu_);  // the route is known: relayed, or served here
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<StreamRelay<Resp>> relay_ ABSL_GUARDED_BY(mu_);
};

// Relays an upload (a client stream; raw messages, as the owner's own UploadFile parses them)
// from the caller to the owner, one message at a time: the caller's next message is read only
// once the previous one was written to the owner (`next`). The caller's reactor owns the
// relay and calls End when the caller's stream ended; `finish` ends the caller's call with
// the owner's status and response, and is the relay's last act.
class UploadRelay final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  UploadRelay(std::unique_ptr<grpc::ClientContext> ctx, std::function<void()> next,
              std::function<void(const grpc::Status&, const grpc::ByteBuffer&)> finish)
      : ctx_(std::move(ctx)), next_(std::move(next)), finish_(std::move(finish)) {}

  // Opens the call and writes the first message (which named the session).
  void Begin(grpc::GenericStub* stub, const grpc::ByteBuffer* first);
  // Writes the caller's next message (after `next`).
  void Write(const grpc::ByteBuffer* msg) { StartWrite(msg); }
  // The caller's stream ended: all sent (half-close), or `cut` (cancelled, broken).
  void End(bool cut);
  void Cancel() { ctx_->TryCancel(); }

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool) override {}
  void OnDone(const grpc::Status& status) override { finish_(status, response_); }

 private:
  const std::unique_ptr<grpc::ClientContext> ctx_;
  const std::function<void()> next_;
  const std::function<void(const grpc::Status&, const grpc::ByteBuffer&)> finish_;
  grpc::ByteBuffer response_;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_FORWARDING_H_
