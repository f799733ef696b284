// DaemonHarness: runs the real sandgated binary on a temporary Unix socket for a test.
//
// Each harness has its own state directory and socket under a fresh temp dir; the daemon is
// SIGKILLed on destruction if the test did not stop it.
#ifndef SANDGATE_TESTS_INTEGRATION_DAEMON_HARNESS_H_
#define SANDGATE_TESTS_INTEGRATION_DAEMON_HARNESS_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/common/eventually.h"  // Eventually, for the tests on this harness

namespace sandgate::testing {

class DaemonHarness {
 public:
  // `config` is written to a file; listen and state_dir are filled in, and
  // replica.advertise_address when it is "self" (the daemon's own socket).
  explicit DaemonHarness(nlohmann::json config = nlohmann::json::object());
  ~DaemonHarness();

  // Starts the daemon and waits until it answers health checks (fails the test otherwise).
  void Start();
  // Sends `sig` and waits for exit; returns the exit status as from waitpid.
  int Stop(int sig);
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  const std::string& state_dir() const { return state_dir_; }
  std::string address() const { return "unix:" + socket_; }
  std::unique_ptr<v1::Sandgate::Stub> Stub();
  // A context carrying `token` (none when empty).
  static std::unique_ptr<grpc::ClientContext> Context(const std::string& token = "");
  std::string Log() const;  // the daemon's stderr so far
  // With "metrics_listen": "127.0.0.1:0" in the config: the port it chose (from the log), or
  // -1; and the /metrics page (the whole HTTP answer).
  int MetricsPort() const;
  std::string Metrics() const;

 private:
  nlohmann::json config_;
  std::string dir_, state_dir_, socket_, config_path_, log_path_;
  pid_t pid_ = -1;
};

// The sample statements shipped with the repo.
std::string SampleCsv();
v1::RunAnalysisRequest SampleRequest();
// Reads every event of a run (follow) until run.finished, calling `on_event` for each as it
// arrives (heartbeats excluded); fails the test on a stream error.
std::vector<v1::Event> FollowToEnd(v1::Sandgate::Stub& stub, const std::string& run_id,
                                   const std::string& token = "", int64_t after = 0,
                                   const std::function<void(const v1::Event&)>& on_event = nullptr);
std::string Sha256Hex(const std::string& data);
// A run's artifact read whole through DownloadArtifact. Fails the test when a chunk does not
// start where the last ended or is above the 256 KiB transfer size; the caller checks status.
struct DownloadedArtifact {
  grpc::Status status;
  std::string data;
  std::string sha256;  // from the last chunk that carries it
  int chunks = 0;
};
DownloadedArtifact DownloadArtifact(v1::Sandgate::Stub& stub, const std::string& run_id,
                                    const std::string& name, const std::string& token = "");
// How many of `events` are of `type`.
int CountEvents(const std::vector<v1::Event>& events, const std::string& type);
// GET http://127.0.0.1:port/path over a plain socket; the whole answer, headers included.
std::string HttpGet(int port, const std::string& path);
// `bytes` written as they are on a new connection to 127.0.0.1:port; what came back until the
// server closed the connection (`closed` true) or `wait` passed without a byte (false).
std::string HttpRaw(int port, const std::string& bytes, absl::Duration wait, bool* closed);

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_INTEGRATION_DAEMON_HARNESS_H_
