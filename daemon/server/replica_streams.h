// Replica streams: the REST connections that cannot be forwarded as one gRPC call (a
// connection to an exposed port, a Codex exec-server WebSocket) are carried between replicas
// on two bidirectional streams, ConnectPort and CodexExec (docs/replicas.md, "Forwarding").
//
// The replica that took the connection opens the stream on the Forwarder's channel to the
// owner (mutual TLS when the listener has TLS, as every forwarded call), with the caller's own
// credentials: its token as `authorization` metadata, or a signed URL's grant in the first
// message, which the owner checks (it holds the exposure and the key that signed it). Nothing
// the client sent is trusted on the way: the owner authenticates the stream exactly as a call
// made to it directly. The owner answers one empty message once the connection is open, or
// ends the call with why not; then bytes (a port) or messages (Codex) go both ways.
//
//   // The replica that took the connection (blocks until the owner opened it):
//   SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<RemotePort> up,
//                             RemotePort::Open(route, std::move(client_context), first));
//   write(up->fd(), ...);                     // bytes to the sandbox's port, on the owner
//
//   // The owner (server/service.cc): each stream's work runs on a thread of its own.
//   return new BlockingBidi<In, Out>([](BlockingBidi<In, Out>& call) { ... return status; });
#ifndef SANDGATE_SERVER_REPLICA_STREAMS_H_
#define SANDGATE_SERVER_REPLICA_STREAMS_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "common/unique_fd.h"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "server/forwarding.h"
#include "server/service.h"

namespace sandgate::server {

// A gRPC status as an absl::Status (codes are the same).
absl::Status FromGrpcStatus(const grpc::Status& status);

// A bidirectional stream served with blocking calls: `body` runs on a thread of its own,
// reads and writes with Read and Write, and returns the call's status (its last act: the
// reactor deletes itself once gRPC is done with the call). Read and Write may be used from two
// threads at once (one each); Write from several (one at a time). The body must return
// promptly once cancelled() fires (the caller went away, the server shuts down).
//
// Thread safe as said. Owned by gRPC (deleted in OnDone).
template <typename In, typename Out>
class BlockingBidi final : public grpc::ServerBidiReactor<In, Out> {
 public:
  using Body = std::function<grpc::Status(BlockingBidi&)>;
  // How often a read that may be stopped looks at its stop token.
  static constexpr absl::Duration kTick = absl::Milliseconds(100);

  explicit BlockingBidi(Body body) {
    // Operations started before gRPC binds the reactor wait for it (ServerBidiReactor's
    // backlog).
    std::thread([this, body = std::move(body)] {
      grpc::Status status = body(*this);
      this->Finish(status);
    }).detach();
  }

  // The caller's next message; false when its stream ended (half-closed, cancelled) or `stop`
  // fired first (the read stays outstanding, and Read answers false from then on).
  bool Read(In* msg, const CancelToken* stop = nullptr) {
    {
      absl::MutexLock lock(&mu_);
      if (read_ != ReadState::kIdle) return false;
      read_ = ReadState::kPending;
    }
    this->StartRead(&in_);
    absl::MutexLock lock(&mu_);
    const absl::Condition settled(this, &BlockingBidi::ReadSettled);
    while (!ReadSettled()) {
      if (stop == nullptr) {
        mu_.Await(settled);
      } else if (stop->cancelled()) {
        return false;
      } else {
        mu_.AwaitWithTimeout(settled, kTick);
      }
    }
    if (read_ == ReadState::kEnded) return false;
    read_ = ReadState::kIdle;
    *msg = std::move(in_);
    return true;
  }
  // Writes `msg` and waits until it went; false once the call is broken.
  bool Write(const Out& msg) {
    absl::MutexLock one(&write_mu_);
    {
      absl::MutexLock lock(&mu_);
      if (write_broken_) return false;
      writing_ = true;
    }
    this->StartWrite(&msg);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* writing) { return !*writing; }, &writing_));
    return !write_broken_;
  }
  // Fires when the call is cancelled.
  const CancelToken& cancelled() const { return cancelled_; }

  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    read_ = ok ? ReadState::kGot : ReadState::kEnded;
  }
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) write_broken_ = true;
  }
  void OnCancel() override { cancelled_.Cancel("the caller cancelled the stream"); }
  void OnDone() override { delete this; }

 private:
  enum class ReadState { kIdle, kPending, kGot, kEnded };
  bool ReadSettled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return read_ == ReadState::kGot || read_ == ReadState::kEnded;
  }

  CancelToken cancelled_;
  absl::Mutex write_mu_;  // one write at a time
  absl::Mutex mu_;
  ReadState read_ ABSL_GUARDED_BY(mu_) = ReadState::kIdle;
  In in_;  // written by gRPC while a read is pending
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_broken_ ABSL_GUARDED_BY(mu_) = false;
};

// Opens a stream on the owner (`open(context)`, e.g. stub->CodexExec), writes `first` and
// waits for the owner's empty answer: the stream, or the owner's refusal (its status, as
// Forwarder::Explain words an owner that cannot be reached). Blocks.
template <typename Request, typename Response, typename OpenFn>
absl::StatusOr<std::unique_ptr<grpc::ClientReaderWriter<Request, Response>>> OpenReplicaStream(
    const Route& route, grpc::ClientContext* context, OpenFn open, const Request& first) {
  std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> stream = open(context);
  Response opened;
  if (stream->Write(first) && stream->Read(&opened)) return stream;
  return FromGrpcStatus(Forwarder::Explain(route, stream->Finish()));
}

// The bytes of a connection to a sandbox's port, wherever the sandbox is: fd() is a stream
// socket. Destroying it closes the connection. Not thread safe (one user); cancel() may fire
// from any thread.
class PortConnection {
 public:
  virtual ~PortConnection() = default;
  virtual int fd() const = 0;
  // Fires (with the reason) when the connection broke on the way: the session ended, the port
  // was unexposed, the replica that holds it went away.
  virtual const CancelToken& cancel() const = 0;
};

// A connection to an exposed port of a session another replica holds, through its
// ConnectPort stream: fd() is one end of a socket pair whose other end two threads relay to
// the stream and back. When the owner ends the stream, fd() reads its end; when the stream
// breaks (the owner gone, the session ended there), cancel() fires instead.
class RemotePort final : public PortConnection {
 public:
  // `context` carries the forwarding marker and the caller's authorization (or `first` its
  // grant). Blocks until the owner opened the connection or refused it (its error).
  static absl::StatusOr<std::unique_ptr<RemotePort>> Open(
      const Route& route, std::unique_ptr<grpc::ClientContext> context,
      const v1::ConnectPortRequest& first);
  ~RemotePort() override;

  int fd() const override { return theirs_.get(); }
  const CancelToken& cancel() const override { return broken_; }

 private:
  RemotePort(Route route, std::unique_ptr<grpc::ClientContext> context)
      : route_(std::move(route)), context_(std::move(context)) {}
  void Up();    // the socket pair to the owner
  void Down();  // the owner to the socket pair

  const Route route_;
  const std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ConnectPortRequest, v1::ConnectPortResponse>>
      stream_;
  UniqueFd mine_, theirs_;
  CancelToken broken_;
  std::thread up_, down_;
};

// The owner's side of ConnectPort: authenticates the caller (its token, or the first
// message's grant), opens the exposed port (core::PortManager::Open) and relays bytes both
// ways until the sandbox's end closes, the connection is cancelled or the caller leaves.
grpc::ServerBidiReactor<v1::ConnectPortRequest, v1::ConnectPortResponse>* ServeConnectPort(
    const ServiceDeps& deps, grpc::CallbackServerContext* ctx);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_REPLICA_STREAMS_H_
