#include "server/replica_streams.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "core/ports.h"
#include "server/reactor.h"

namespace sandgate::server {
namespace {

constexpr size_t kChunk = 64 << 10;

using PortCall = BlockingBidi<v1::ConnectPortRequest, v1::ConnectPortResponse>;

// Sends all of `data` to `fd` (blocking); false when the other end is gone.
bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno != EINTR) {
      return false;
    }
  }
  return true;
}

// Sends all of `data` to the non-blocking `fd`, waiting while it is full; false when it is
// gone or any of `stops` (eventfds) is readable.
bool SendAllPolled(int fd, absl::string_view data, std::initializer_list<int> stops) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    struct pollfd p[4] = {{fd, POLLOUT, 0}};
    nfds_t count = 1;
    for (int s : stops) p[count++] = {s, POLLIN, 0};
    if (poll(p, count, -1) < 0 && errno != EINTR) return false;
    for (nfds_t i = 1; i < count; ++i) {
      if (p[i].revents != 0) return false;
    }
  }
  return true;
}

// The owner's relay of one ConnectPort stream, on the stream's own thread.
grpc::Status ServePort(const ServiceDeps& deps, grpc::CallbackServerContext* ctx, PortCall& call) {
  v1::ConnectPortRequest first;
  if (!call.Read(&first)) {
    return ToGrpc(errors::Cancelled("the stream ended before it named a session's port"));
  }
  core::PortManager* ports = deps.api->ports();
  if (ports == nullptr) {
    return ToGrpc(absl::UnimplementedError("exposed ports are not served by this daemon"));
  }
  if (first.port() == 0 || first.port() > 65535) {
    return ToGrpc(errors::InvalidArgument(
        absl::StrCat("port: expected a number from 1 to 65535, got ", first.port())));
  }
  const uint16_t port = static_cast<uint16_t>(first.port());
  // The caller's own credentials, checked here as for a call made to this replica directly.
  absl::StatusOr<core::Caller> caller =
      first.grant().empty() ? Authenticate(*deps.tenants, ctx)
                            : ports->CheckGrant(first.session_id(), port, first.grant());
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<std::unique_ptr<core::PortManager::Connection>> conn =
      ports->Open(*caller, first.session_id(), port);
  if (!conn.ok()) return ToGrpc(conn.status());
  if (!call.Write(v1::ConnectPortResponse())) {
    return ToGrpc(errors::Cancelled("the caller left"));
  }
  const int fd = (*conn)->fd();
  const int cancel_fd = (*conn)->cancel().fd();
  CancelToken stop;
  // The caller's bytes to the sandbox; its half-close is passed on.
  std::thread in([&] {
    v1::ConnectPortRequest m;
    while (call.Read(&m, &stop)) {
      if (!SendAllPolled(fd, m.data(), {stop.fd(), cancel_fd, call.cancelled().fd()})) return;
    }
    if (!stop.cancelled()) shutdown(fd, SHUT_WR);
  });
  grpc::Status status = grpc::Status::OK;
  std::string buf(kChunk, '\0');
  v1::ConnectPortResponse out;
  for (;;) {
    struct pollfd p[3] = {
        {fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}, {call.cancelled().fd(), POLLIN, 0}};
    if (poll(p, 3, -1) < 0 && errno != EINTR) {
      status = ToGrpc(errors::FromErrno(errno, "poll"));
      break;
    }
    if (p[2].revents != 0) {
      status = ToGrpc(errors::Cancelled("the caller left"));
      break;
    }
    if (p[1].revents != 0) {
      status = ToGrpc(errors::FailedPrecondition((*conn)->cancel().reason()));
      break;
    }
    if (p[0].revents == 0) continue;
    ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      out.set_data(buf.data(), static_cast<size_t>(n));
      if (!call.Write(out)) break;
      continue;
    }
    if (n == 0) break;  // the sandbox's end closed: all of it was sent
    if (errno != EAGAIN && errno != EINTR) {
      status = ToGrpc(errors::Unavailable(
          absl::StrCat("port ", port, " of session ", first.session_id(), ": ", strerror(errno))));
      break;
    }
  }
  stop.Cancel("the connection ended");
  in.join();
  return status;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::StatusOr<std::unique_ptr<RemotePort>> RemotePort::Open(
    const Route& route, std::unique_ptr<grpc::ClientContext> context,
    const v1::ConnectPortRequest& first) {
  std::unique_ptr<RemotePort> p(new RemotePort(route, std::move(context)));
  std::shared_ptr<v1::Sandgate::Stub> stub = route.stub;
  absl::StatusOr<
      std::unique_ptr<grpc::ClientReaderWriter<v1::ConnectPortRequest, v1::ConnectPortResponse>>>
      stream = OpenReplicaStream<v1::ConnectPortRequest, v1::ConnectPortResponse>(
          route, p->context_.get(),
          [&stub](grpc::ClientContext* c) { return stub->ConnectPort(c); }, first);
  if (!stream.ok()) return stream.status();
  p->stream_ = *std::move(stream);
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    p->context_->TryCancel();
    return errors::FromErrno(errno, "socketpair");
  }
  p->mine_.reset(pair[0]);
  p->theirs_.reset(pair[1]);
  fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) | O_NONBLOCK);
  RemotePort* raw = p.get();
  p->up_ = std::thread([raw] { raw->Up(); });
  p->down_ = std::thread([raw] { raw->Down(); });
  return p;
}

RemotePort::~RemotePort() {
  // The user's end first: both threads then see theirs end (a read of 0, a failed send).
  theirs_.reset();
  if (context_ != nullptr) context_->TryCancel();
  if (mine_.valid()) shutdown(mine_.get(), SHUT_RDWR);
  if (up_.joinable()) up_.join();
  if (down_.joinable()) down_.join();
}

void RemotePort::Up() {
  std::string buf(kChunk, '\0');
  v1::ConnectPortRequest m;
  for (;;) {
    ssize_t n = recv(mine_.get(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    m.set_data(buf.data(), static_cast<size_t>(n));
    if (!stream_->Write(m)) return;
  }
  stream_->WritesDone();
}

void RemotePort::Down() {
  v1::ConnectPortResponse m;
  while (stream_->Read(&m)) {
    if (!SendAll(mine_.get(), m.data())) {
      context_->TryCancel();
      break;
    }
  }
  // A stream that broke is cancelled, not ended: the user must not take it for the end of
  // the sandbox's answer.
  grpc::Status status = stream_->Finish();
  if (status.ok()) {
    shutdown(mine_.get(), SHUT_WR);
    return;
  }
  const grpc::Status explained = Forwarder::Explain(route_, status);
  broken_.Cancel(explained.error_message());
  log::Info("ports.remote_ended",
            {{"replica", route_.peer.replica}, {"why", explained.error_message()}});
}

grpc::ServerBidiReactor<v1::ConnectPortRequest, v1::ConnectPortResponse>* ServeConnectPort(
    const ServiceDeps& deps, grpc::CallbackServerContext* ctx) {
  return new PortCall([&deps, ctx](PortCall& call) { return ServePort(deps, ctx, call); });
}

grpc::ServerBidiReactor<v1::ConnectPortRequest, v1::ConnectPortResponse>*
SandgateService::ConnectPort(grpc::CallbackServerContext* ctx) {
  return ServeConnectPort(deps_, ctx);
}

}  // namespace sandgate::server
