// RemotePort and BlockingBidi (server/replica_streams.h) against an in-process gRPC server
// whose ConnectPort is a scripted owner: the bytes both ways through the socket pair, the
// caller's half-close passed on, the owner's refusal at open as its status, a stream that
// breaks mid-way cancelling the connection instead of ending it, and a connection dropped
// while the owner still writes.
#include "server/replica_streams.h"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace sandgate::server {
namespace {

using PortCall = BlockingBidi<v1::ConnectPortRequest, v1::ConnectPortResponse>;
using Owner = std::function<grpc::Status(PortCall&)>;

class ScriptedOwner final : public v1::Sandgate::CallbackService {
 public:
  explicit ScriptedOwner(Owner owner) : owner_(std::move(owner)) {}
  grpc::ServerBidiReactor<v1::ConnectPortRequest, v1::ConnectPortResponse>* ConnectPort(
      grpc::CallbackServerContext*) override {
    return new PortCall(owner_);
  }

 private:
  const Owner owner_;
};

// Reads what `fd` gives until its end or `n` bytes; waits up to 10 s for each read.
std::string ReadFd(int fd, size_t n) {
  std::string out;
  char buf[4096];
  while (out.size() < n) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    ssize_t r = read(fd, buf, std::min(sizeof(buf), n - out.size()));
    if (r < 0 && errno == EAGAIN) continue;
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

class ReplicaStreamsTest : public ::testing::Test {
 protected:
  void Serve(Owner owner) {
    service_ = std::make_unique<ScriptedOwner>(std::move(owner));
    grpc::ServerBuilder b;
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    route_.peer = {"replica-a", "inproc", absl::Now() + absl::Seconds(10)};
    route_.channel = server_->InProcessChannel({});
    route_.stub = v1::Sandgate::NewStub(route_.channel);
  }
  absl::StatusOr<std::unique_ptr<RemotePort>> Open() {
    v1::ConnectPortRequest first;
    first.set_session_id("s1");
    first.set_port(8000);
    return RemotePort::Open(route_, std::make_unique<grpc::ClientContext>(), first);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  std::unique_ptr<ScriptedOwner> service_;
  std::unique_ptr<grpc::Server> server_;
  Route route_;
};

TEST_F(ReplicaStreamsTest, BytesGoBothWaysAndTheCallersEndIsPassedOn) {
  Serve([](PortCall& call) {
    v1::ConnectPortRequest m;
    if (!call.Read(&m) || m.session_id() != "s1" || m.port() != 8000) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "first message");
    }
    call.Write(v1::ConnectPortResponse());  // open
    std::string got;
    while (call.Read(&m)) got += m.data();  // until the caller half-closes
    v1::ConnectPortResponse out;
    out.set_data("owner got: " + got);
    call.Write(out);
    return grpc::Status::OK;
  });
  absl::StatusOr<std::unique_ptr<RemotePort>> port = Open();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string big(200000, 'x');
  ASSERT_EQ(send((*port)->fd(), "hello ", 6, MSG_NOSIGNAL), 6);
  std::string rest = big;
  while (!rest.empty()) {
    struct pollfd p = {(*port)->fd(), POLLOUT, 0};
    poll(&p, 1, 10000);
    ssize_t n = send((*port)->fd(), rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n > 0) rest.erase(0, static_cast<size_t>(n));
  }
  shutdown((*port)->fd(), SHUT_WR);
  const std::string want = "owner got: hello " + big;
  EXPECT_EQ(ReadFd((*port)->fd(), want.size() + 1), want);  // then its end
  EXPECT_FALSE((*port)->cancel().cancelled());
}

TEST_F(ReplicaStreamsTest, TheOwnersRefusalIsTheOpensError) {
  Serve([](PortCall& call) {
    v1::ConnectPortRequest m;
    call.Read(&m);
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "session s1 not found");
  });
  absl::StatusOr<std::unique_ptr<RemotePort>> port = Open();
  EXPECT_EQ(port.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(port.status().message(), "session s1 not found");
}

TEST_F(ReplicaStreamsTest, AStreamThatBreaksCancelsTheConnectionInsteadOfEndingIt) {
  Serve([](PortCall& call) {
    v1::ConnectPortRequest m;
    call.Read(&m);
    call.Write(v1::ConnectPortResponse());
    v1::ConnectPortResponse partial;
    partial.set_data("partial");
    call.Write(partial);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "the session ended");
  });
  absl::StatusOr<std::unique_ptr<RemotePort>> port = Open();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(ReadFd((*port)->fd(), 7), "partial");
  EXPECT_TRUE((*port)->cancel().WaitFor(absl::Seconds(10)));
  EXPECT_EQ((*port)->cancel().reason(), "the session ended");
  // Not ended as if the answer were whole: nothing more, and no end, is read.
  struct pollfd p = {(*port)->fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 200), 0);
}

TEST_F(ReplicaStreamsTest, DroppingTheConnectionWhileTheOwnerWritesEndsBothSides) {
  absl::Notification owner_done;
  Serve([&](PortCall& call) {
    v1::ConnectPortRequest m;
    call.Read(&m);
    call.Write(v1::ConnectPortResponse());
    v1::ConnectPortResponse out;
    out.set_data(std::string(64 << 10, 'y'));
    // Writes until the caller goes (nobody reads the socket pair: it fills, then the stream).
    while (call.Write(out)) {
    }
    // The last touch of the test's locals: once notified, the test may return and they go.
    owner_done.Notify();
    return grpc::Status(grpc::StatusCode::CANCELLED, "");
  });
  absl::StatusOr<std::unique_ptr<RemotePort>> port = Open();
  ASSERT_TRUE(port.ok()) << port.status();
  struct pollfd p = {(*port)->fd(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);  // the owner is writing
  port->reset();                     // joins its threads: returns only if they ended
  EXPECT_TRUE(owner_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

}  // namespace
}  // namespace sandgate::server
