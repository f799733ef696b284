// GvisorTunnel against a fake bridge (the other end of a socketpair): each kExec's fds become
// a channel, frames come back into the right fds, and a broken frame ends the tunnel.
#include "sandbox/local/gvisor_tunnel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "sandbox/local/bridge_protocol.h"
#include "sandbox/local/fd_passing.h"
#include "sandbox/local/init_protocol.h"

namespace sandgate::sandbox::local {
namespace {

namespace bp = bridgeproto;

bool Readable(int fd, int ms = 5000) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

void WriteFrame(int fd, uint32_t channel, uint32_t kind, const std::string& payload) {
  bp::FrameHeader h;
  h.channel = channel;
  h.kind = kind;
  h.length = static_cast<uint32_t>(payload.size());
  ASSERT_EQ(write(fd, &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
  if (!payload.empty()) {
    ASSERT_EQ(write(fd, payload.data(), payload.size()), static_cast<ssize_t>(payload.size()));
  }
}

// One frame from the tunnel (header and payload).
std::pair<bp::FrameHeader, std::string> ReadFrame(int fd) {
  bp::FrameHeader h;
  EXPECT_TRUE(Readable(fd));
  EXPECT_EQ(read(fd, &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
  std::string payload(h.length, '\0');
  size_t got = 0;
  while (got < payload.size()) {
    ssize_t n = read(fd, payload.data() + got, payload.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return {h, payload};
}

class GvisorTunnelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    bridge_.reset(sv[0]);
    auto t = GvisorTunnel::Start(UniqueFd(sv[1]));
    ASSERT_TRUE(t.ok()) << t.status();
    tunnel_ = std::move(*t);
    session_ = tunnel_->TakeSessionEnd();
    ASSERT_TRUE(session_.valid());
  }

  // A kExec with its three fds, as BwrapSession::SendExec sends it; keeps the local ends.
  void SendExec(const std::string& message) {
    int cmd[2], out[2], err[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cmd), 0);
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
    const int fds[3] = {cmd[1], out[1], err[1]};
    ASSERT_EQ(fdpass::Send(session_.get(), message.data(), message.size(), fds, 3),
              static_cast<ssize_t>(message.size()));
    for (int fd : fds) close(fd);
    cmd_.reset(cmd[0]);
    out_.reset(out[0]);
    err_.reset(err[0]);
  }

  UniqueFd bridge_, session_, cmd_, out_, err_;
  std::unique_ptr<GvisorTunnel> tunnel_;
};

TEST_F(GvisorTunnelTest, AnExecBecomesAChannelAndItsFramesReachItsFds) {
  // The init's kReady (channel 0) reaches the session as a control message.
  initproto::MessageHeader ready;
  ready.type = initproto::kReady;
  WriteFrame(bridge_.get(), 0, bp::kControl,
             std::string(reinterpret_cast<const char*>(&ready), sizeof(ready)));
  ASSERT_TRUE(Readable(session_.get()));
  initproto::MessageHeader got;
  ASSERT_EQ(recv(session_.get(), &got, sizeof(got), 0), static_cast<ssize_t>(sizeof(got)));
  EXPECT_EQ(got.type, initproto::kReady);

  SendExec("exec message");
  auto [h, payload] = ReadFrame(bridge_.get());
  EXPECT_EQ(h.kind, bp::kControl);
  EXPECT_EQ(h.channel, 1u);
  EXPECT_EQ(payload, "exec message");

  WriteFrame(bridge_.get(), 1, bp::kStdout, "hello");
  WriteFrame(bridge_.get(), 1, bp::kStderr, "oops");
  WriteFrame(bridge_.get(), 1, bp::kStdout, "");  // EOF
  char buf[16] = {};
  ASSERT_TRUE(Readable(out_.get()));
  EXPECT_EQ(read(out_.get(), buf, sizeof(buf)), 5);
  EXPECT_STREQ(buf, "hello");
  ASSERT_TRUE(Readable(out_.get()));
  EXPECT_EQ(read(out_.get(), buf, sizeof(buf)), 0) << "stdout's EOF";
  ASSERT_TRUE(Readable(err_.get()));
  EXPECT_EQ(read(err_.get(), buf, sizeof(buf)), 4);

  initproto::MessageHeader exited;
  exited.type = initproto::kExited;
  exited.value = 3 << 8;
  WriteFrame(bridge_.get(), 1, bp::kCommand,
             std::string(reinterpret_cast<const char*>(&exited), sizeof(exited)));
  ASSERT_TRUE(Readable(cmd_.get()));
  ASSERT_EQ(recv(cmd_.get(), &got, sizeof(got), 0), static_cast<ssize_t>(sizeof(got)));
  EXPECT_EQ(got.type, initproto::kExited);
  EXPECT_EQ(got.value, 3 << 8);

  // The session's kill goes out on the channel; its hang-up too.
  initproto::MessageHeader kill;
  kill.type = initproto::kKill;
  ASSERT_EQ(send(cmd_.get(), &kill, sizeof(kill), 0), static_cast<ssize_t>(sizeof(kill)));
  auto [kh, kp] = ReadFrame(bridge_.get());
  EXPECT_EQ(kh.kind, bp::kCommand);
  EXPECT_EQ(kh.channel, 1u);
  cmd_.reset();
  auto [eh, ep] = ReadFrame(bridge_.get());
  EXPECT_EQ(eh.kind, bp::kCommandEof);
  EXPECT_EQ(eh.channel, 1u);

  // The next exec gets a new channel.
  SendExec("second");
  EXPECT_EQ(ReadFrame(bridge_.get()).first.channel, 2u);
}

TEST_F(GvisorTunnelTest, AnOversizeFrameEndsTheTunnelAndTheSessionSeesEof) {
  SendExec("x");
  ReadFrame(bridge_.get());
  bp::FrameHeader h;
  h.channel = 1;
  h.kind = bp::kStdout;
  h.length = bp::kMaxPayload + 1;
  ASSERT_EQ(write(bridge_.get(), &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
  ASSERT_TRUE(Readable(session_.get()));
  char c;
  EXPECT_EQ(recv(session_.get(), &c, 1, 0), 0) << "the session's control socket ended";
  ASSERT_TRUE(Readable(bridge_.get()));
  EXPECT_EQ(read(bridge_.get(), &c, 1), 0) << "the bridge's connection ended";
}

TEST_F(GvisorTunnelTest, AnUnknownFrameKindEndsTheTunnel) {
  SendExec("x");
  ReadFrame(bridge_.get());
  WriteFrame(bridge_.get(), 1, 99, "?");
  ASSERT_TRUE(Readable(session_.get()));
  char c;
  EXPECT_EQ(recv(session_.get(), &c, 1, 0), 0);
}

TEST_F(GvisorTunnelTest, ClosingTheSessionEndEndsTheBridgesConnection) {
  session_.reset();
  ASSERT_TRUE(Readable(bridge_.get()));
  char c;
  EXPECT_EQ(read(bridge_.get(), &c, 1), 0);
}

}  // namespace
}  // namespace sandgate::sandbox::local
