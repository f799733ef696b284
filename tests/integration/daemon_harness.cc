#include "tests/integration/daemon_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/time/clock.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace sandgate::testing {

namespace {

// grpc.health.v1.Health/Check through the generic stub (Debian ships no generated health
// stubs): an empty request asks about the whole server; the answer {status: SERVING} is the
// two bytes 08 01.
bool Healthy(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  grpc::ByteBuffer request, response;
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  grpc::Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = s;
                   done = true;
                   cv.notify_one();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!status.ok()) return false;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  return bytes == std::string("\x08\x01", 2);
}

}  // namespace

DaemonHarness::DaemonHarness(nlohmann::json config) : config_(std::move(config)) {
  char tmpl[] = "/tmp/sg-it-XXXXXX";
  dir_ = mkdtemp(tmpl);
  state_dir_ = dir_ + "/state";
  socket_ = dir_ + "/sandgated.sock";
  config_path_ = dir_ + "/config.json";
  log_path_ = dir_ + "/daemon.log";
  config_["listen"] = "unix:" + socket_;
  config_["state_dir"] = state_dir_;
  // A replica other replicas forward calls to advertises its own socket.
  if (config_.contains("replica") && config_["replica"].value("advertise_address", "") == "self") {
    config_["replica"]["advertise_address"] = address();
  }
  std::ofstream(config_path_) << config_.dump(2);
}

DaemonHarness::~DaemonHarness() {
  // A drain, so kept sessions are closed and nothing is left on the machine; SIGKILL only if
  // the daemon does not exit in time (then its sandboxes die with it but their cgroup
  // directories stay until a daemon on this state directory sweeps them).
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    if (Eventually(
            "sandgated to exit after SIGTERM",
            [this] { return waitpid(pid_, nullptr, WNOHANG) == pid_; }, absl::Seconds(6))) {
      pid_ = -1;
    } else {
      Stop(SIGKILL);
    }
  }
  if (!::testing::Test::HasFailure()) std::system(("rm -rf " + dir_).c_str());
}

void DaemonHarness::Start() {
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    dup2(fd, 2);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    dup2(null, 1);
    execl(SANDGATED_PATH, "sandgated", "--config", config_path_.c_str(), "--log-level", "debug",
          nullptr);
    _exit(127);
  }
  ASSERT_GT(pid_, 0);
  auto channel = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
  bool exited = false;
  const ::testing::AssertionResult healthy = Eventually(
      "sandgated to answer its health check or exit",
      [&] {
        exited = waitpid(pid_, nullptr, WNOHANG) == pid_;
        return exited || Healthy(channel);
      },
      absl::Seconds(15));
  if (exited) {
    pid_ = -1;
    FAIL() << "sandgated exited during start:\n" << Log();
  }
  if (!healthy) FAIL() << "sandgated did not become healthy:\n" << Log();
}

int DaemonHarness::Stop(int sig) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

std::unique_ptr<v1::Sandgate::Stub> DaemonHarness::Stub() {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(80 << 20);
  args.SetMaxReceiveMessageSize(80 << 20);
  return v1::Sandgate::NewStub(
      grpc::CreateCustomChannel(address(), grpc::InsecureChannelCredentials(), args));
}

std::unique_ptr<grpc::ClientContext> DaemonHarness::Context(const std::string& token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return ctx;
}

std::string DaemonHarness::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// GET http://127.0.0.1:port/path over a plain socket.
std::string HttpGet(int port, const std::string& path) {
  // Connection: close: the server closes the connection after its answer only when asked (an
  // HTTP/1.1 connection is otherwise kept open until its idle timeout, a minute).
  bool closed = false;
  return HttpRaw(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 absl::Seconds(120), &closed);
}

std::string HttpRaw(int port, const std::string& bytes, absl::Duration wait, bool* closed) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  *closed = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    struct timeval tv = absl::ToTimeval(wait);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)!write(fd, bytes.data(), bytes.size());
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    *closed = n == 0;
  }
  close(fd);
  return out;
}

int DaemonHarness::MetricsPort() const {
  std::string log = Log();
  size_t at = log.find("\"event\":\"daemon.metrics\"");
  if (at == std::string::npos) return -1;
  size_t addr = log.rfind("127.0.0.1:", at);
  return addr == std::string::npos ? -1 : std::atoi(log.c_str() + addr + 10);
}

std::string DaemonHarness::Metrics() const { return HttpGet(MetricsPort(), "/metrics"); }

std::string SampleCsv() {
  std::ifstream in(std::string(SANDGATE_SOURCE_DIR) +
                   "/tests/data/northstar_cloud_financial_statements.csv");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

v1::RunAnalysisRequest SampleRequest() {
  v1::RunAnalysisRequest req;
  req.set_playbook("financial-analyst");
  auto* in = req.add_inputs();
  in->set_name("northstar_cloud_financial_statements.csv");
  in->set_content(SampleCsv());
  return req;
}

std::vector<v1::Event> FollowToEnd(v1::Sandgate::Stub& stub, const std::string& run_id,
                                   const std::string& token, int64_t after,
                                   const std::function<void(const v1::Event&)>& on_event) {
  auto ctx = DaemonHarness::Context(token);
  v1::StreamEventsRequest req;
  req.set_run_id(run_id);
  req.set_after_seq(after);
  req.set_follow(true);
  auto reader = stub.StreamEvents(ctx.get(), req);
  std::vector<v1::Event> events;
  v1::Event e;
  while (reader->Read(&e)) {
    if (e.seq() == 0) continue;
    events.push_back(e);
    if (on_event) on_event(e);
  }
  grpc::Status st = reader->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
  return events;
}

std::string Sha256Hex(const std::string& data) { return Sha256::Hex(data); }

DownloadedArtifact DownloadArtifact(v1::Sandgate::Stub& stub, const std::string& run_id,
                                    const std::string& name, const std::string& token) {
  auto ctx = DaemonHarness::Context(token);
  v1::DownloadArtifactRequest req;
  req.set_run_id(run_id);
  req.set_name(name);
  auto reader = stub.DownloadArtifact(ctx.get(), req);
  DownloadedArtifact out;
  v1::ArtifactChunk chunk;
  while (reader->Read(&chunk)) {
    EXPECT_EQ(chunk.offset(), out.data.size()) << name;
    EXPECT_LE(chunk.data().size(), 256u << 10) << "a chunk above the transfer size";
    out.data += chunk.data();
    if (!chunk.sha256().empty()) out.sha256 = chunk.sha256();
    ++out.chunks;
  }
  out.status = reader->Finish();
  return out;
}

int CountEvents(const std::vector<v1::Event>& events, const std::string& type) {
  int n = 0;
  for (const v1::Event& e : events) n += e.type() == type ? 1 : 0;
  return n;
}

}  // namespace sandgate::testing
