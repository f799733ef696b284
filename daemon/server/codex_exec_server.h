// CodexExecServer: one connection of Codex's exec-server protocol (experimental, as Codex's
// own), served by a sandgate session, so that `CODEX_EXEC_SERVER_URL=… codex exec "…"` runs
// every command and file operation of Codex in the session (docs/agent-runtimes.md, "Codex").
//
// The protocol is JSON-RPC as the published codex-cli binary (0.169.0) speaks it: messages
// without "jsonrpc", requests {id, method, params}, answers {id, result} or {id, error: {code,
// message}}, notifications {method, params}. Paths are file:// URLs of the sandbox (the
// session's workdir, e.g. file:///work/x); bytes are base64.
//
//   initialize, initialized     the session's environment (shell, cwd = the workdir)
//   process/start               StartProcess (argv, cwd, env, tty = a terminal, pipeStdin)
//   process/read                the output kept here, after a seq (waits up to waitMs)
//   process/write               WriteProcessInput;  process/signal {signal: "interrupt"}: SIGINT
//   process/terminate           SIGKILL when still running
//   → process/output, process/exited, process/closed   pushed as the process runs
//   fs/readFile, fs/writeFile   DownloadFile, UploadFile (whole files, up to max_file_bytes)
//   fs/getMetadata, fs/readDirectory, fs/createDirectory, fs/remove   StatFile, ListFiles,
//                               MakeDirectory, DeleteFile
//   fs/copy                     `cp` in the sandbox
//
// Only the session's workspace is reached by fs/*: a path outside it, with a "..", or not a
// file:// URL is refused (code -32004 for outside, as a missing file: Codex probes for
// /.git and the like). A request carrying Codex's own sandbox policy (`sandbox` not null) is
// refused: the command runs in sandgate's sandbox, and Codex's (read-only, workspace-write)
// would not hold there; run codex with `-s danger-full-access`.
//
//   CodexExecServer server({&api, &sessions, clock}, caller, {session_id, "/work"},
//                          [&](std::string message) { ws->Send(message); });
//   server.Handle(R"({"id":1,"method":"initialize","params":{"clientName":"x"}})");
//
// Handle runs one message at a time (the transport's reader); it blocks on the session's calls.
// Each started process has a pump thread that pushes its output and end through `send`, which
// must therefore be thread safe. The destructor kills the processes this connection started
// that still run and waits for their pumps. Thread safe otherwise.
#ifndef SANDGATE_SERVER_CODEX_EXEC_SERVER_H_
#define SANDGATE_SERVER_CODEX_EXEC_SERVER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "core/api.h"
#include "core/session_manager.h"
#include "core/tenants.h"

namespace sandgate::server {

class CodexExecServer {
 public:
  struct Deps {
    core::Api* api = nullptr;  // not owned; outlive the server
    core::SessionManager* sessions = nullptr;
    Clock* clock = Clock::Real();  // process/read's waits
  };
  struct Options {
    std::string session_id;
    std::string workdir = "/work";       // the workspace as commands see it (Session.workdir)
    uint64_t max_file_bytes = 16 << 20;  // fs/readFile, fs/writeFile
    // Output kept per process for process/read (the oldest goes first); the pushed
    // notifications do not depend on it.
    uint64_t kept_output_bytes = 1 << 20;
    // Processes of one connection running at once; those that ended are forgotten (and
    // process/read no longer finds them) once this many are known.
    size_t max_processes = 1024;
    std::string executor_version = "sandgate";
  };
  using Send = std::function<void(std::string message)>;

  CodexExecServer(Deps deps, core::Caller caller, Options options, Send send);
  ~CodexExecServer();
  CodexExecServer(const CodexExecServer&) = delete;
  CodexExecServer& operator=(const CodexExecServer&) = delete;

  // One message from the client; its answer (if it is a request) goes to `send`.
  void Handle(absl::string_view message);

  // JSON-RPC error codes (Codex's: -32004 is its "not found").
  static constexpr int kParseError = -32700;
  static constexpr int kInvalidRequest = -32600;
  static constexpr int kMethodNotFound = -32601;
  static constexpr int kInvalidParams = -32602;
  static constexpr int kInternalError = -32603;
  static constexpr int kNotFound = -32004;

 private:
  struct Proc;
  using Json = nlohmann::json;
  // A method's answer: its result, or an error (code, message).
  struct Answer {
    Json result;
    int code = 0;
    std::string message;
    std::function<void()> then;  // run once the answer was sent
  };
  static Answer Result(Json result);
  static Answer Error(int code, std::string message);
  static Answer ErrorOf(const absl::Status& status);

  Answer Dispatch(const std::string& method, const Json& params);
  Answer Initialize(const Json& params);
  Answer ProcessStart(const Json& params);
  Answer ProcessRead(const Json& params);
  Answer ProcessWrite(const Json& params);
  Answer ProcessSignal(const Json& params, const std::string& signal);
  Answer FsReadFile(const Json& params);
  Answer FsWriteFile(const Json& params);
  Answer FsCreateDirectory(const Json& params);
  Answer FsGetMetadata(const Json& params);
  Answer FsReadDirectory(const Json& params);
  Answer FsRemove(const Json& params);
  Answer FsCopy(const Json& params);

  // The workspace-relative path of a file:// URL param (`field`), or the error to answer.
  absl::StatusOr<std::string> WorkspacePath(const Json& params, const char* field) const;
  absl::StatusOr<std::shared_ptr<Proc>> FindProc(const Json& params);
  // Pushes a process's output and end (its thread).
  void Pump(std::shared_ptr<Proc> proc);
  void Notify(const char* method, Json params);

  const Deps deps_;
  const core::Caller caller_;
  const Options options_;
  const Send send_;
  absl::Mutex mu_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<Proc>> procs_ ABSL_GUARDED_BY(mu_);  // by Codex's id
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_CODEX_EXEC_SERVER_H_
