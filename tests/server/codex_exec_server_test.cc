// CodexExecServer (Codex's exec-server protocol) on real managers over the host fake
// provider, without a transport: the messages go in as text and come back through `send`.
// The exchange follows what the published codex-cli 0.169.0 says (docs/agent-runtimes.md);
// the hostile cases are the protocol's own (JSON, methods, paths, process ids, tenants).
#include "server/codex_exec_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/processes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::server {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

// What a connection sent, in order; waits for a message that matches.
class Outbox {
 public:
  void Add(std::string message) {
    absl::MutexLock lock(&mu_);
    messages_.push_back(Json::parse(message));
  }
  // The first message (from `from` on) for which `match` holds; fails after 20 s.
  Json WaitFor(const std::function<bool(const Json&)>& match, size_t* at = nullptr) {
    absl::MutexLock lock(&mu_);
    size_t i = 0;
    auto found = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (i = 0; i < messages_.size(); ++i) {
        if (match(messages_[i])) return true;
      }
      return false;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&found), absl::Seconds(20))) {
      ADD_FAILURE() << "no such message in " << Json(messages_).dump();
      return Json::object();
    }
    if (at != nullptr) *at = i;
    return messages_[i];
  }
  Json Answer(int id) {
    return WaitFor([id](const Json& m) { return m.contains("id") && m["id"] == id; });
  }
  std::vector<Json> All() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Json> messages_ ABSL_GUARDED_BY(mu_);
};

class CodexExecServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-codex-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = *store::SqliteStore::Open(dir_ + "/s.db");
    config_.processes.max_running_per_session = 8;
    core::SessionManagerDeps deps;
    deps.config = &config_;
    deps.store = store_.get();
    deps.clock = &clock_;
    deps.providers = {{"local", &provider_}};
    sessions_ = std::make_unique<core::SessionManager>(deps);
    processes_ = std::make_unique<core::ProcessManager>(
        core::ProcessManager::Deps{&config_, sessions_.get(), &clock_});
    core::ApiDeps api;
    api.sessions = sessions_.get();
    api.processes = processes_.get();
    api_ = std::make_unique<core::Api>(std::move(api));
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(600);
    absl::StatusOr<v1::Session> s = sessions_->Create(caller_, req, nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = *s;
    workdir_ = session_.workdir();
    server_ = Connect(caller_, &out_);
  }
  void TearDown() override {
    server_.reset();
    other_.reset();
    api_.reset();
    processes_.reset();
    sessions_.reset();
    store_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }

  std::unique_ptr<CodexExecServer> Connect(const core::Caller& caller, Outbox* out,
                                           uint64_t max_file_bytes = 1 << 20,
                                           size_t max_processes = 1024) {
    CodexExecServer::Options options;
    options.max_processes = max_processes;
    options.session_id = session_.id();
    options.workdir = workdir_;
    options.max_file_bytes = max_file_bytes;
    return std::make_unique<CodexExecServer>(
        CodexExecServer::Deps{api_.get(), sessions_.get(), &clock_}, caller, options,
        [out](std::string m) { out->Add(std::move(m)); });
  }
  // A request on `server` (default: the test's); its answer.
  Json Call(const std::string& method, Json params, CodexExecServer* server = nullptr,
            Outbox* out = nullptr) {
    const int id = next_id_++;
    (server ? server : server_.get())
        ->Handle(Json{{"id", id}, {"method", method}, {"params", std::move(params)}}.dump());
    return (out ? out : &out_)->Answer(id);
  }
  void Initialize(CodexExecServer* server = nullptr, Outbox* out = nullptr) {
    Json a = Call("initialize", {{"clientName", "codex-environment"}, {"resumeSessionId", nullptr}},
                  server, out);
    ASSERT_TRUE(a.contains("result")) << a.dump();
    (server ? server : server_.get())->Handle(R"({"method":"initialized","params":{}})");
  }
  std::string Url(const std::string& relative) const {
    return absl::StrCat("file://", workdir_, relative.empty() ? "" : "/", relative);
  }
  static int ErrorCode(const Json& answer) {
    return answer.contains("error") ? answer["error"]["code"].get<int>() : 0;
  }
  static std::string ErrorMessage(const Json& answer) {
    return answer.contains("error") ? answer["error"]["message"].get<std::string>() : "";
  }
  // The process's pushed output (decoded) and exit code, once it is closed.
  std::string OutputOf(const std::string& process_id, Outbox* out, int* exit_code,
                       const std::string& stream = "") {
    out->WaitFor([&](const Json& m) {
      return m.value("method", "") == "process/closed" && m["params"]["processId"] == process_id;
    });
    std::string text;
    for (const Json& m : out->All()) {
      if (!m.contains("method") || m["params"].value("processId", "") != process_id) continue;
      if (m["method"] == "process/output" && (stream.empty() || m["params"]["stream"] == stream)) {
        std::string chunk;
        absl::Base64Unescape(m["params"]["chunk"].get<std::string>(), &chunk);
        text += chunk;
      }
      if (m["method"] == "process/exited") *exit_code = m["params"]["exitCode"].get<int>();
    }
    return text;
  }
  Json Start(const std::string& id, std::vector<std::string> argv, Json extra = Json::object()) {
    Json params = {{"processId", id},       {"argv", argv},      {"cwd", Url("")},
                   {"env", Json::object()}, {"tty", false},      {"pipeStdin", false},
                   {"arg0", nullptr},       {"sandbox", nullptr}};
    params.update(extra);
    return Call("process/start", params);
  }

  std::string dir_;
  core::Config config_;
  testing::FakeClock clock_;
  testing::HostProvider provider_;
  core::Caller caller_{"team-a", false};
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<core::SessionManager> sessions_;
  std::unique_ptr<core::ProcessManager> processes_;
  std::unique_ptr<core::Api> api_;
  v1::Session session_;
  std::string workdir_;
  Outbox out_, other_out_;
  std::unique_ptr<CodexExecServer> server_, other_;
  int next_id_ = 1;
};

TEST_F(CodexExecServerTest, InitializeAnswersTheSessionsEnvironmentAndComesFirst) {
  Json early = Call("process/start", {{"processId", "x"}, {"argv", {"true"}}});
  EXPECT_EQ(ErrorCode(early), CodexExecServer::kInvalidRequest);
  EXPECT_THAT(ErrorMessage(early), HasSubstr("initialize first"));
  Json a = Call("initialize", {{"clientName", "codex-environment"}, {"resumeSessionId", nullptr}});
  ASSERT_TRUE(a.contains("result")) << a.dump();
  EXPECT_EQ(a["id"], next_id_ - 1);
  EXPECT_EQ(a["result"]["sessionId"], session_.id());
  const Json& env = a["result"]["environmentInfo"];
  EXPECT_EQ(env["cwd"], Url(""));
  EXPECT_EQ(env["shell"]["path"], "/bin/bash");
  EXPECT_EQ(env["platformOs"], "linux");
  for (const auto& [flag, value] : env["capabilities"].items()) EXPECT_EQ(value, false) << flag;
}

TEST_F(CodexExecServerTest, ACommandsOutputExitAndCloseArePushedInOrderAfterItsStart) {
  Initialize();
  Json started = Start("48903-a", {"/bin/sh", "-c", "echo out; echo err >&2; pwd; exit 3"});
  ASSERT_TRUE(started.contains("result")) << started.dump();
  EXPECT_EQ(started["result"]["processId"], "48903-a");
  EXPECT_EQ(started["result"]["sandboxType"], "none");
  int exit_code = -100;
  EXPECT_EQ(OutputOf("48903-a", &out_, &exit_code, "stdout"), "out\n" + workdir_ + "\n");
  EXPECT_EQ(OutputOf("48903-a", &out_, &exit_code, "stderr"), "err\n");
  EXPECT_EQ(exit_code, 3);
  // The answer came before every notification, and the seqs count up from 1 without a gap,
  // the exit and the close last.
  std::vector<Json> all = out_.All();
  size_t answer_at = 0;
  out_.WaitFor(
      [&](const Json& m) { return m.contains("result") && m["result"].contains("sandboxType"); },
      &answer_at);
  uint64_t seq = 0;
  std::string last;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!all[i].contains("method")) continue;
    EXPECT_GT(i, answer_at);
    EXPECT_EQ(all[i]["params"]["seq"].get<uint64_t>(), ++seq);
    last = all[i]["method"];
  }
  EXPECT_EQ(last, "process/closed");
  // Kept for process/read: everything after seq 1, then nothing after the end.
  Json read = Call("process/read", {{"processId", "48903-a"}, {"afterSeq", 1}, {"waitMs", 0}});
  ASSERT_TRUE(read.contains("result")) << read.dump();
  EXPECT_TRUE(read["result"]["exited"].get<bool>());
  EXPECT_TRUE(read["result"]["closed"].get<bool>());
  EXPECT_EQ(read["result"]["exitCode"], 3);
  for (const Json& c : read["result"]["chunks"]) EXPECT_GT(c["seq"].get<uint64_t>(), 1u);
}

TEST_F(CodexExecServerTest, StdinWritesReachTheProcessAndTerminateKillsIt) {
  Initialize();
  ASSERT_TRUE(Start("cat", {"cat"}, {{"pipeStdin", true}}).contains("result"));
  Json w = Call("process/write",
                {{"processId", "cat"}, {"chunk", absl::Base64Escape("hello\n")}, {"writeId", "1"}});
  EXPECT_EQ(w["result"]["status"], "accepted") << w.dump();
  out_.WaitFor([](const Json& m) { return m.value("method", "") == "process/output"; });
  Json t = Call("process/terminate", {{"processId", "cat"}});
  EXPECT_EQ(t["result"]["running"], true) << t.dump();
  int exit_code = 0;
  EXPECT_EQ(OutputOf("cat", &out_, &exit_code), "hello\n");
  EXPECT_EQ(exit_code, 128 + 9);
  // Ended: a second terminate says it was not running; a write finds stdin closed.
  EXPECT_EQ(Call("process/terminate", {{"processId", "cat"}})["result"]["running"], false);
  EXPECT_EQ(Call("process/write",
                 {{"processId", "cat"}, {"chunk", "eA=="}, {"writeId", "2"}})["result"]["status"],
            "stdinClosed");
  // (A terminal, tty: the host fake has none; tests/clients/codex on a real sandbox.)
}

TEST_F(CodexExecServerTest, InterruptIsTheOnlySignal) {
  Initialize();
  ASSERT_TRUE(Start("s", {"sleep", "100"}).contains("result"));
  Json bad = Call("process/signal", {{"processId", "s"}, {"signal", "kill"}});
  EXPECT_EQ(ErrorCode(bad), CodexExecServer::kInvalidParams);
  Json ok = Call("process/signal", {{"processId", "s"}, {"signal", "interrupt"}});
  EXPECT_EQ(ok["result"], Json::object()) << ok.dump();
  int exit_code = 0;
  OutputOf("s", &out_, &exit_code);
  EXPECT_EQ(exit_code, 128 + 2);
}

TEST_F(CodexExecServerTest, TheFilesOfTheWorkspaceRoundTrip) {
  Initialize();
  EXPECT_EQ(Call("fs/createDirectory", {{"path", Url("src/deep")}, {"recursive", true}})["result"],
            Json::object());
  EXPECT_EQ(Call("fs/writeFile", {{"path", Url("src/a.txt")},
                                  {"dataBase64", absl::Base64Escape("alpha\n")}})["result"],
            Json::object());
  Json read = Call("fs/readFile", {{"path", Url("src/a.txt")}});
  EXPECT_EQ(read["result"]["dataBase64"], absl::Base64Escape("alpha\n")) << read.dump();
  Json meta = Call("fs/getMetadata", {{"path", Url("src/a.txt")}});
  EXPECT_EQ(meta["result"]["isFile"], true) << meta.dump();
  EXPECT_EQ(meta["result"]["size"], 6);
  EXPECT_EQ(Call("fs/getMetadata", {{"path", Url("src")}})["result"]["isDirectory"], true);
  // Only the directory's own entries, not those further down.
  Json dir = Call("fs/readDirectory", {{"path", Url("src")}});
  std::vector<std::string> names;
  for (const Json& e : dir["result"]["entries"]) names.push_back(e["fileName"]);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("a.txt", "deep")) << dir.dump();
  EXPECT_EQ(Call("fs/copy", {{"sourcePath", Url("src")},
                             {"destinationPath", Url("copy")},
                             {"recursive", true}})["result"],
            Json::object());
  EXPECT_EQ(Call("fs/readFile", {{"path", Url("copy/a.txt")}})["result"]["dataBase64"],
            absl::Base64Escape("alpha\n"));
  EXPECT_EQ(Call("fs/remove", {{"path", Url("src")}, {"recursive", true}})["result"],
            Json::object());
  Json gone = Call("fs/getMetadata", {{"path", Url("src/a.txt")}});
  EXPECT_EQ(ErrorCode(gone), CodexExecServer::kNotFound) << gone.dump();
  // force (the default): removing what is not there is fine; without, it is an error.
  EXPECT_EQ(Call("fs/remove", {{"path", Url("src")}})["result"], Json::object());
  EXPECT_EQ(ErrorCode(Call("fs/remove", {{"path", Url("src")}, {"force", false}})),
            CodexExecServer::kNotFound);
  // What Codex wrote is what commands see.
  ASSERT_TRUE(Start("cat", {"cat", "copy/a.txt"}).contains("result"));
  int exit_code = -1;
  EXPECT_EQ(OutputOf("cat", &out_, &exit_code), "alpha\n");
}

TEST_F(CodexExecServerTest, PathsOutsideTheWorkspaceAreRefused) {
  Initialize();
  std::ofstream(dir_ + "/secret") << "host secret";
  struct Case {
    std::string url;
    int code;
    const char* says;
  };
  const std::vector<Case> cases = {
      {Url("../secret"), CodexExecServer::kInvalidRequest, "'..'"},
      {Url("x/../../secret"), CodexExecServer::kInvalidRequest, "'..'"},
      {Url("%2e%2e/secret"), CodexExecServer::kInvalidRequest, "'..'"},
      {"file://" + dir_ + "/secret", CodexExecServer::kNotFound, "outside the session's workspace"},
      {"file:///etc/passwd", CodexExecServer::kNotFound, "outside the session's workspace"},
      {dir_ + "/secret", CodexExecServer::kInvalidRequest, "not a file:/// URL"},
      {"http://example.com/x", CodexExecServer::kInvalidRequest, "not a file:/// URL"},
      {Url("a%00b"), CodexExecServer::kInvalidRequest, "NUL"},
      {Url("a%zz"), CodexExecServer::kInvalidRequest, "%-escape"},
      {Url("a%ff"), CodexExecServer::kInvalidRequest, "not UTF-8"},
  };
  for (const Case& c : cases) {
    for (const char* method : {"fs/readFile", "fs/getMetadata", "fs/remove"}) {
      Json a = Call(method, {{"path", c.url}});
      EXPECT_EQ(ErrorCode(a), c.code) << method << " " << c.url << ": " << a.dump();
      EXPECT_THAT(ErrorMessage(a), HasSubstr(c.says)) << method << " " << c.url;
    }
  }
  // (A symlink out of the workspace is the file calls' own check, on a real sandbox:
  // tests/clients/codex.)
  // Nor do a process's cwd or a copy leave it.
  EXPECT_EQ(ErrorCode(Start("p", {"true"}, {{"cwd", "file:///etc"}})), CodexExecServer::kNotFound);
  EXPECT_EQ(ErrorCode(Call("fs/copy", {{"sourcePath", "file://" + dir_ + "/secret"},
                                       {"destinationPath", Url("stolen")},
                                       {"recursive", false}})),
            CodexExecServer::kNotFound);
  std::ifstream secret(dir_ + "/secret");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(secret), {}), "host secret");
}

TEST_F(CodexExecServerTest, BadMessagesGetJsonRpcErrors) {
  Initialize();
  auto errors_with = [this](int code) {
    int n = 0;
    for (const Json& m : out_.All()) {
      if (m.contains("error") && m["error"]["code"] == code) {
        EXPECT_TRUE(m["id"].is_null()) << m.dump();
        ++n;
      }
    }
    return n;
  };
  server_->Handle("{not json");
  // Invalid UTF-8 in a string is not JSON either.
  server_->Handle("{\"id\":90,\"method\":\"fs/readFile\",\"params\":{\"path\":\"\xff\"}}");
  EXPECT_EQ(errors_with(CodexExecServer::kParseError), 2);
  server_->Handle("[1,2]");
  EXPECT_EQ(errors_with(CodexExecServer::kInvalidRequest), 1);
  server_->Handle(R"({"id":91,"method":7})");
  EXPECT_EQ(ErrorCode(out_.Answer(91)), CodexExecServer::kInvalidRequest);
  server_->Handle(R"({"id":{"x":1},"method":"fs/readFile"})");
  Json unknown = Call("process/spawnAll", Json::object());
  EXPECT_EQ(ErrorCode(unknown), CodexExecServer::kMethodNotFound);
  EXPECT_THAT(ErrorMessage(unknown), HasSubstr("process/spawnAll"));
  EXPECT_EQ(ErrorCode(Call("process/start", {{"processId", "p"}, {"argv", "ls"}})),
            CodexExecServer::kInvalidParams);
  EXPECT_EQ(ErrorCode(Call("process/start", {{"processId", "p"}, {"argv", {"ls", 3}}})),
            CodexExecServer::kInvalidParams);
  EXPECT_EQ(ErrorCode(Call("process/start", {{"processId", ""}, {"argv", {"ls"}}})),
            CodexExecServer::kInvalidParams);
  EXPECT_EQ(
      ErrorCode(Call("process/start", {{"processId", "p"}, {"argv", {"ls"}}, {"env", {{"A", 1}}}})),
      CodexExecServer::kInvalidParams);
  EXPECT_EQ(ErrorCode(Call("fs/writeFile", {{"path", Url("x")}, {"dataBase64", "!!"}})),
            CodexExecServer::kInvalidParams);
  EXPECT_EQ(ErrorCode(Call("process/read", {{"processId", "p"}, {"afterSeq", -1}})),
            CodexExecServer::kNotFound);  // no such process, before its params are read
  // A notification of an unknown method is not answered; every request so far was.
  const size_t before = out_.All().size();
  server_->Handle(R"({"method":"something/else","params":{}})");
  EXPECT_EQ(out_.All().size(), before);
}

TEST_F(CodexExecServerTest, CodexsOwnSandboxPolicyIsRefusedNamingTheWayOut) {
  Initialize();
  Json a = Start("p", {"true"}, {{"sandbox", {{"type", "readOnly"}}}});
  EXPECT_EQ(ErrorCode(a), CodexExecServer::kInvalidRequest);
  EXPECT_THAT(ErrorMessage(a), HasSubstr("danger-full-access"));
  EXPECT_EQ(ErrorCode(Call("fs/readFile", {{"path", Url("x")}, {"sandbox", {{"type", "x"}}}})),
            CodexExecServer::kInvalidRequest);
}

TEST_F(CodexExecServerTest, AFileOverTheLimitIsRefused) {
  Outbox out;
  auto small = Connect(caller_, &out, /*max_file_bytes=*/16);
  Initialize(small.get(), &out);
  Json big = Call("fs/writeFile",
                  {{"path", Url("big")}, {"dataBase64", absl::Base64Escape(std::string(64, 'x'))}},
                  small.get(), &out);
  EXPECT_NE(ErrorCode(big), 0);
  EXPECT_THAT(ErrorMessage(big), HasSubstr("16 bytes"));
  std::ofstream(workdir_ + "/large") << std::string(64, 'y');
  Json read = Call("fs/readFile", {{"path", Url("large")}}, small.get(), &out);
  EXPECT_NE(ErrorCode(read), 0) << read.dump();
}

TEST_F(CodexExecServerTest, AnotherConnectionsProcessesAndAnotherTenantsSessionAreNotReached) {
  Initialize();
  ASSERT_TRUE(Start("mine", {"sleep", "100"}).contains("result"));
  other_ = Connect(caller_, &other_out_);
  Initialize(other_.get(), &other_out_);
  // The same id on another connection names nothing there.
  Json read = Call("process/read", {{"processId", "mine"}}, other_.get(), &other_out_);
  EXPECT_EQ(ErrorCode(read), CodexExecServer::kNotFound);
  EXPECT_EQ(Call("process/terminate", {{"processId", "mine"}}, other_.get(),
                 &other_out_)["error"]["code"],
            CodexExecServer::kNotFound);
  EXPECT_EQ(Call("process/write", {{"processId", "mine"}, {"chunk", "eA=="}, {"writeId", "1"}},
                 other_.get(), &other_out_)["result"]["status"],
            "unknownProcess");
  // Another tenant's connection to this session reaches neither its processes nor its files.
  Outbox stranger_out;
  auto stranger = Connect(core::Caller{"team-b", false}, &stranger_out);
  Initialize(stranger.get(), &stranger_out);
  Json start =
      Call("process/start", {{"processId", "p"}, {"argv", {"touch", "planted"}}, {"cwd", Url("")}},
           stranger.get(), &stranger_out);
  EXPECT_EQ(ErrorCode(start), CodexExecServer::kNotFound) << start.dump();
  std::ofstream(workdir_ + "/private") << "mine";
  EXPECT_EQ(
      ErrorCode(Call("fs/readFile", {{"path", Url("private")}}, stranger.get(), &stranger_out)),
      CodexExecServer::kNotFound);
  EXPECT_NE(access((workdir_ + "/planted").c_str(), F_OK), 0);
}

// Codex starts a process per command: ended ones make room; running ones are the limit.
TEST_F(CodexExecServerTest, EndedProcessesMakeRoomRunningOnesAreTheLimit) {
  server_ = Connect(caller_, &out_, 1 << 20, /*max_processes=*/2);
  Initialize();
  int exit_code = -1;
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(Start(id, {"true"}).contains("result")) << id;
    OutputOf(id, &out_, &exit_code);
  }
  ASSERT_TRUE(Start("s1", {"sleep", "100"}).contains("result"));
  ASSERT_TRUE(Start("s2", {"sleep", "100"}).contains("result"));
  Json full = Start("s3", {"true"});
  EXPECT_EQ(ErrorCode(full), CodexExecServer::kInvalidRequest);
  EXPECT_THAT(ErrorMessage(full), HasSubstr("2 processes running (at most 2)"));
}

TEST_F(CodexExecServerTest, TheConnectionsEndKillsWhatItLeftRunning) {
  Initialize();
  ASSERT_TRUE(Start("long", {"sleep", "1000"}).contains("result"));
  server_.reset();
  v1::ListProcessesRequest list;
  list.set_session_id(session_.id());
  v1::ListProcessesResponse processes;
  ASSERT_TRUE(api_->ListProcesses(caller_, list, &processes).ok());
  ASSERT_EQ(processes.processes_size(), 1);
  EXPECT_NE(processes.processes(0).state(), v1::Process::STATE_RUNNING);
}

}  // namespace
}  // namespace sandgate::server
