// FakeOpenAiServer: starts tests/fakes/openai/fake_openai.py on a free loopback port for one
// test and talks to its admin API (/_fake/*). Header-only; used by the provider, agent,
// integration and load tests.
//
//   FakeOpenAiServer fake("test-key");
//   ASSERT_TRUE(fake.Start());
//   fake.Post("/_fake/scenario", {{"turns", …}});
//   nlohmann::json state = fake.State();   // containers, files, requests, …
//
// Not thread safe for Start/Stop; Post/Get may be called from any thread. No call waits
// unbounded on the server: a fake that stalls fails the test that needs it, with a line on
// stderr saying so, instead of sitting out the ctest timeout.
#ifndef SANDGATE_TESTS_FAKES_OPENAI_FAKE_OPENAI_SERVER_H_
#define SANDGATE_TESTS_FAKES_OPENAI_FAKE_OPENAI_SERVER_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "upstream/curl_http_client.h"

#ifndef SANDGATE_SOURCE_DIR
#error "SANDGATE_SOURCE_DIR must be defined to the source tree"
#endif

namespace sandgate::testing {

// Debian's python3, which has all the fake needs (the standard library).
inline constexpr char kDebianPython[] = "/usr/bin/python3";

class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(std::string api_key) : api_key_(std::move(api_key)) {}
  ~FakeOpenAiServer() { Stop(); }

  // Starts the server and waits (up to kReadyWithin) for its "listening on" line. False on
  // failure. Its request log (stderr) goes to `log_path` when given, else to this process's
  // stderr. The server gets SIGTERM when the thread that called Start ends, so a test that
  // exits without Stop (std::exit, a crash) leaves no server behind.
  bool Start(const std::string& log_path = "") {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return false;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      dup2(out[1], 1);
      if (!log_path.empty()) {
        int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log >= 0) dup2(log, 2);
      }
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      const std::string script =
          std::string(SANDGATE_SOURCE_DIR) + "/tests/fakes/openai/fake_openai.py";
      // Debian's python3 (deploy/setup.sh installs it) by path, as ctest runs the Python
      // tests (SANDGATE_DEBIAN_PYTHON): a pyenv shim earlier on PATH costs a few hundred ms
      // a start on a quiet machine and seconds on a loaded one, in every test with a fake.
      const char* python = access(kDebianPython, X_OK) == 0 ? kDebianPython : "python3";
      execlp(python, "python3", script.c_str(), "--port", "0", "--api-key", api_key_.c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    std::string line;
    const bool ready = ReadLine(out[0], absl::Now() + kReadyWithin, &line);
    close(out[0]);
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (!ready || !absl::ConsumePrefix(&l, "listening on ")) {
      std::fprintf(stderr, "fake-openai did not say it was listening within %s (said: %s)\n",
                   absl::FormatDuration(kReadyWithin).c_str(), line.c_str());
      Stop();
      return false;
    }
    root_ = std::string(l);
    return true;
  }

  // SIGTERM, then, for a server still there after stop_grace (stalled, or stopped), SIGKILL
  // to its process group; reaped either way.
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    if (!ExitsWithin(pid_, stop_grace_)) {
      std::fprintf(stderr, "fake-openai (pid %d) had not exited %s after SIGTERM; killed\n",
                   static_cast<int>(pid_), absl::FormatDuration(stop_grace_).c_str());
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
    }
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  void set_stop_grace(absl::Duration grace) { stop_grace_ = grace; }
  // How long one admin request (/_fake/*, State, Scenario, …) may take (default 30 s).
  void set_call_timeout(absl::Duration timeout) { call_timeout_ = timeout; }
  pid_t pid() const { return pid_; }

  const std::string& api_key() const { return api_key_; }
  std::string root() const { return root_; }              // http://127.0.0.1:PORT
  std::string base_url() const { return root_ + "/v1"; }  // what clients use

  nlohmann::json Post(const std::string& path, const nlohmann::json& body) {
    return Call("POST", path, body.dump());
  }
  nlohmann::json Get(const std::string& path) { return Call("GET", path, ""); }
  nlohmann::json Delete(const std::string& path) { return Call("DELETE", path, ""); }
  nlohmann::json State() { return Get("/_fake/state"); }
  void Scenario(const nlohmann::json& turns) { Post("/_fake/scenario", {{"turns", turns}}); }
  void Fault(const nlohmann::json& fault) { Post("/_fake/faults", fault); }
  void AdvanceClock(int seconds) { Post("/_fake/clock", {{"advance_seconds", seconds}}); }
  // The Agents API's control surface (README.md, "Agents API").
  void AgentsFault(const nlohmann::json& fault) { Post("/_fake/agents/faults", fault); }
  void LeaveNetworkOpen(bool open) { Post("/_fake/agents/network", {{"leave_open", open}}); }
  // How GET …/events streams behave: {"replay", "hold_next", "cut_after_type", "cut_times"}.
  void AgentsStream(const nlohmann::json& settings) { Post("/_fake/agents/stream", settings); }
  void ExpireEnvironment(const std::string& env_id) {
    Post("/_fake/agents/environments/" + env_id + "/expire", nlohmann::json::object());
  }
  // An Agents API call as a client makes it (bearer key, `OpenAI-Beta: agents=v1`); the status
  // and the raw body (a streaming create's whole SSE body once it ends).
  upstream::HttpResponse AgentsCall(const std::string& method, const std::string& path,
                                    const nlohmann::json& body = nullptr) {
    upstream::HttpRequest req;
    req.method = method;
    req.url = base_url() + path;
    req.headers.Add("Authorization", "Bearer " + api_key_);
    req.headers.Add("OpenAI-Beta", "agents=v1");
    if (!body.is_null()) {
      req.headers.Add("Content-Type", "application/json");
      req.body = body.dump();
    }
    req.total_timeout = kAgentsCallWithin;
    absl::StatusOr<upstream::HttpResponse> resp = curl_.Send(req, nullptr);
    if (!resp.ok()) return upstream::HttpResponse{0, {}, resp.status().ToString()};
    return *std::move(resp);
  }

 private:
  // Well inside the ctest timeouts of the tests that use the fake (180 s).
  static constexpr absl::Duration kReadyWithin = absl::Seconds(60);
  // An Agents API call may play a whole agent session (a streaming create) before it answers.
  static constexpr absl::Duration kAgentsCallWithin = absl::Seconds(150);

  // Reads up to the first newline from `fd` until `deadline`; false on EOF or at the deadline.
  static bool ReadLine(int fd, absl::Time deadline, std::string* line) {
    for (;;) {
      struct pollfd p = {fd, POLLIN, 0};
      const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (ms <= 0 || poll(&p, 1, static_cast<int>(ms)) <= 0) return false;
      char c;
      if (read(fd, &c, 1) != 1) return false;
      if (c == '\n') return true;
      *line += c;
    }
  }
  // Whether `pid` (a child) exits within `d`; true when that cannot be watched (no pidfd):
  // then Stop waits as it always did.
  static bool ExitsWithin(pid_t pid, absl::Duration d) {
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return true;
    struct pollfd p = {fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(d)));
    close(fd);
    return ready > 0;
  }

  nlohmann::json Call(const std::string& method, const std::string& path, const std::string& body) {
    upstream::HttpRequest req;
    req.method = method;
    req.url = root_ + path;
    req.total_timeout = call_timeout_;
    if (!body.empty()) {
      req.headers.Add("Content-Type", "application/json");
      req.body = body;
    }
    absl::StatusOr<upstream::HttpResponse> resp = curl_.Send(req, nullptr);
    if (!resp.ok()) return nlohmann::json{{"transport_error", resp.status().ToString()}};
    nlohmann::json j = nlohmann::json::parse(resp->body, nullptr, false);
    if (j.is_discarded()) return nlohmann::json{{"status", resp->status}, {"body", resp->body}};
    return j;
  }

  const std::string api_key_;
  upstream::CurlHttpClient curl_;
  pid_t pid_ = -1;
  std::string root_;
  absl::Duration stop_grace_ = absl::Seconds(10);
  absl::Duration call_timeout_ = absl::Seconds(30);
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_OPENAI_FAKE_OPENAI_SERVER_H_
