#include "server/codex_exec_server.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "core/file_transfer.h"
#include "core/sandbox_spec.h"
#include "server/codex_exec_params.h"

namespace sandgate::server {

// One process a client started: its sandgate id, and what the pump pushed (kept for
// process/read).
struct CodexExecServer::Proc {
  struct Chunk {
    uint64_t seq;
    std::string stream;
    std::string data;
  };
  std::string id;  // Codex's
  std::string sandgate_id;
  bool tty = false;
  std::thread pump;
  // Under the server's mu_:
  std::deque<Chunk> chunks;
  uint64_t kept_bytes = 0;
  uint64_t next_seq = 1;
  bool exited = false;
  bool closed = false;
  int exit_code = 0;
  std::string failure;
};

namespace {

using Json = nlohmann::json;
using codex_params::BoolField;
using codex_params::Field;
using codex_params::StringField;

std::string StreamName(v1::CommandOutput::Stream stream, bool tty) {
  if (tty) return "pty";
  return stream == v1::CommandOutput::STREAM_STDERR ? "stderr" : "stdout";
}

// A shell's exit code for how a process ended (128 + the signal, as bash says).
int ExitCodeOf(const v1::Process& p) {
  const v1::CommandFinished& f = p.finished();
  if (f.signal() > 0) return 128 + f.signal();
  return f.exit_code();
}

}  // namespace

CodexExecServer::CodexExecServer(Deps deps, core::Caller caller, Options options, Send send)
    : deps_(deps),
      caller_(std::move(caller)),
      options_(std::move(options)),
      send_(std::move(send)) {}

CodexExecServer::~CodexExecServer() {
  std::vector<std::shared_ptr<Proc>> procs;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, p] : procs_) procs.push_back(p);
  }
  // The client is gone: what it left running is killed (as Codex's own exec-server does),
  // which also ends each pump's wait.
  for (auto& p : procs) {
    v1::WriteProcessInputRequest kill;
    kill.set_session_id(options_.session_id);
    kill.set_process_id(p->sandgate_id);
    kill.set_signal("SIGKILL");
    v1::WriteProcessInputResponse ignored;
    (void)deps_.api->WriteProcessInput(caller_, kill, &ignored);
  }
  for (auto& p : procs) {
    if (p->pump.joinable()) p->pump.join();
  }
}

CodexExecServer::Answer CodexExecServer::Error(int code, std::string message) {
  Answer a;
  a.code = code;
  a.message = std::move(message);
  return a;
}

CodexExecServer::Answer CodexExecServer::Result(Json result) {
  Answer a;
  a.result = std::move(result);
  return a;
}

CodexExecServer::Answer CodexExecServer::ErrorOf(const absl::Status& status) {
  int code = kInternalError;
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      code = kNotFound;
      break;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      code = kInvalidRequest;
      break;
    default:
      break;
  }
  return Error(code, EscapeInvalidUtf8(status.message()));
}

void CodexExecServer::Handle(absl::string_view message) {
  Json request = Json::parse(message.begin(), message.end(), nullptr, /*allow_exceptions=*/false);
  Json answer;
  Answer a;
  if (request.is_discarded()) {
    a = Error(kParseError, "the message is not valid JSON");
    request = Json::object();
  } else if (!request.is_object()) {
    a = Error(kInvalidRequest, "a message must be a JSON object (batches are not taken)");
    request = Json::object();
  } else if (!request.contains("method")) {
    return;  // an answer to a request of ours: we send none
  } else if (!request["method"].is_string()) {
    a = Error(kInvalidRequest, "method must be a string");
  } else {
    const std::string method = request["method"].get<std::string>();
    const Json params = request.value("params", Json::object());
    const bool notification = !request.contains("id");
    if (notification) {
      if (method == "initialized") {
        absl::MutexLock lock(&mu_);
        initialized_ = true;
      }
      return;  // no answer, whatever it was
    }
    a = Dispatch(method, params);
  }
  if (!request.contains("id")) {
    answer["id"] = nullptr;
  } else if (request["id"].is_number_integer() || request["id"].is_string()) {
    answer["id"] = request["id"];
  } else {
    answer["id"] = nullptr;
    if (a.code == 0) a = Error(kInvalidRequest, "id must be a number or a string");
  }
  if (a.code != 0) {
    answer["error"] = {{"code", a.code}, {"message", a.message}};
  } else {
    answer["result"] = std::move(a.result);
  }
  send_(answer.dump(-1, ' ', false, Json::error_handler_t::replace));
  if (a.then) a.then();
}

CodexExecServer::Answer CodexExecServer::Dispatch(const std::string& method, const Json& params) {
  if (method == "initialize") return Initialize(params);
  {
    absl::MutexLock lock(&mu_);
    if (!initialized_) {
      return Error(kInvalidRequest, absl::StrCat(EscapeInvalidUtf8(method), ": initialize first"));
    }
  }
  if (params.contains("sandbox") && !params["sandbox"].is_null()) {
    return Error(kInvalidRequest,
                 "sandgate runs every command in its own sandbox and does not apply Codex's "
                 "sandbox policy: run codex with -s danger-full-access (sandgate's isolation, "
                 "network policy and limits hold)");
  }
  if (method == "process/start") return ProcessStart(params);
  if (method == "process/read") return ProcessRead(params);
  if (method == "process/write") return ProcessWrite(params);
  if (method == "process/signal") {
    absl::StatusOr<std::string> signal = StringField(params, "signal");
    if (!signal.ok()) return ErrorOf(signal.status());
    if (*signal != "interrupt") {
      return Error(kInvalidParams, "params.signal: only \"interrupt\" is known");
    }
    Answer a = ProcessSignal(params, "SIGINT");
    if (a.code == 0) a.result = Json::object();
    return a;
  }
  if (method == "process/terminate") return ProcessSignal(params, "SIGKILL");
  if (method == "fs/readFile") return FsReadFile(params);
  if (method == "fs/writeFile") return FsWriteFile(params);
  if (method == "fs/createDirectory") return FsCreateDirectory(params);
  if (method == "fs/getMetadata") return FsGetMetadata(params);
  if (method == "fs/readDirectory") return FsReadDirectory(params);
  if (method == "fs/remove") return FsRemove(params);
  if (method == "fs/copy") return FsCopy(params);
  // Codex watches for its missing files (.git, skills) only when the executor says it can
  // (capabilities.fsWatchMissing, false here); an older client may still ask.
  if (method == "fs/watchMissing") return Result({{"watching", false}});
  return Error(kMethodNotFound,
               absl::StrCat("unknown method '", EscapeInvalidUtf8(method),
                            "' (sandgate serves initialize, process/*, and fs/readFile, "
                            "writeFile, createDirectory, getMetadata, readDirectory, remove, "
                            "copy)"));
}

CodexExecServer::Answer CodexExecServer::Initialize(const Json& params) {
  if (!params.is_object()) return Error(kInvalidParams, "params must be an object");
  {
    absl::MutexLock lock(&mu_);
    initialized_ = true;
  }
  const std::string root = absl::StrCat("file://", options_.workdir);
  // Every capability flag the binary sent is false: the features behind them (a network
  // proxy, credential masking, file watches, streamed files, shell snapshots) are Codex's
  // executor's, not sandgate's.
  Json capabilities = Json::object();
  for (const char* flag :
       {"networkProxyLaunch", "networkProxyReviewDomains", "credentialMasking",
        "credentialMaskingCustomProviders", "capabilityDiscoverySandbox", "fsWatchMissing",
        "capabilityDiscoveryV2", "environmentConfigRead", "httpHeaderEnvVars",
        "sandboxedFileStreaming", "fileWriteStreaming", "shellSnapshotV2", "windowsMxc",
        "linuxRootWritePreservesDevices", "linuxApprovedRootWritePreservesRestrictions"}) {
    capabilities[flag] = false;
  }
  Answer a;
  a.result = {{"sessionId", options_.session_id},
              {"environmentInfo",
               {{"shell", {{"name", "bash"}, {"path", "/bin/bash"}}},
                {"executorVersion", options_.executor_version},
                {"providerId", absl::StrCat("sandgate:", options_.session_id)},
                {"cwd", root},
                {"userHomeDir", root},
                {"platformOs", "linux"},
                {"prependPathDirs", Json::array()},
                {"temporaryDirectories", Json::array()},
                {"tempDir", "file:///tmp"},
                {"capabilities", capabilities}}}};
  return a;
}

CodexExecServer::Answer CodexExecServer::ProcessStart(const Json& params) {
  absl::StatusOr<std::string> id = StringField(params, "processId");
  if (!id.ok()) return ErrorOf(id.status());
  if (id->empty() || id->size() > 256 || !IsValidUtf8(*id)) {
    return Error(kInvalidParams, "params.processId must be 1 to 256 bytes of UTF-8");
  }
  v1::StartProcessRequest start;
  start.set_session_id(options_.session_id);
  const Json* argv = Field(params, "argv");
  if (argv == nullptr || !argv->is_array() || argv->empty()) {
    return Error(kInvalidParams, "params.argv must be a non-empty array of strings");
  }
  for (const Json& arg : *argv) {
    if (!arg.is_string()) return Error(kInvalidParams, "params.argv must hold only strings");
    start.add_argv(arg.get<std::string>());
  }
  if (Field(params, "cwd") != nullptr) {
    absl::StatusOr<std::string> cwd = WorkspacePath(params, "cwd");
    if (!cwd.ok()) return ErrorOf(cwd.status());
    start.set_cwd(*cwd);
  }
  if (const Json* env = Field(params, "env")) {
    if (!env->is_object()) return Error(kInvalidParams, "params.env must be an object");
    for (const auto& [name, value] : env->items()) {
      if (!value.is_string()) {
        return Error(kInvalidParams,
                     absl::StrCat("params.env.", EscapeInvalidUtf8(name), " must be a string"));
      }
      (*start.mutable_env())[name] = value.get<std::string>();
    }
  }
  const bool tty = BoolField(params, "tty", false);
  if (tty) {
    start.mutable_pty()->set_rows(24);
    start.mutable_pty()->set_cols(80);
  }
  start.set_stdin(BoolField(params, "pipeStdin", false));
  auto proc = std::make_shared<Proc>();
  proc->id = *id;
  proc->tty = tty;
  std::vector<std::shared_ptr<Proc>> forgotten;
  absl::Cleanup join_forgotten = [&forgotten] {
    for (auto& p : forgotten) {
      if (p->pump.joinable()) p->pump.join();  // it has pushed its end
    }
  };
  {
    absl::MutexLock lock(&mu_);
    if (procs_.count(*id) > 0) {
      return Error(kInvalidRequest,
                   absl::StrCat("process '", EscapeInvalidUtf8(*id), "' already exists"));
    }
    // At the limit, the processes that ended are forgotten (Codex starts one per command).
    for (auto it = procs_.begin(); procs_.size() >= options_.max_processes && it != procs_.end();) {
      if (it->second->closed) {
        forgotten.push_back(std::move(it->second));
        it = procs_.erase(it);
      } else {
        ++it;
      }
    }
    if (procs_.size() >= options_.max_processes) {
      return Error(kInvalidRequest,
                   absl::StrCat("this connection has ", procs_.size(),
                                " processes running (at most ", options_.max_processes, ")"));
    }
    procs_[*id] = proc;  // held against a second start of the same id
  }
  v1::Process started;
  absl::Status st = deps_.api->StartProcess(caller_, start, &started);
  if (!st.ok()) {
    absl::MutexLock lock(&mu_);
    procs_.erase(*id);
    return ErrorOf(st);
  }
  proc->sandgate_id = started.id();
  Answer a;
  a.result = {{"processId", *id}, {"sandboxType", "none"}};
  // The answer first, then what the process says: the pump starts once Handle sent it.
  a.then = [this, proc] {
    absl::MutexLock lock(&mu_);
    if (!stopping_) proc->pump = std::thread([this, proc] { Pump(proc); });
  };
  return a;
}

void CodexExecServer::Notify(const char* method, Json params) {
  Json message = {{"method", method}, {"params", std::move(params)}};
  send_(message.dump(-1, ' ', false, Json::error_handler_t::replace));
}

void CodexExecServer::Pump(std::shared_ptr<Proc> proc) {
  uint64_t offset = 0;
  for (;;) {
    v1::ReadProcessOutputRequest read;
    read.set_session_id(options_.session_id);
    read.set_process_id(proc->sandgate_id);
    read.set_offset(offset);
    read.set_max_bytes(static_cast<uint32_t>(core::ProcessManager::kMaxReadBytes));
    *read.mutable_wait() = core::ToProto(absl::Seconds(30));
    v1::ProcessOutput out;
    absl::Status st = deps_.api->ReadProcessOutput(caller_, read, &out);
    std::vector<Json> notes;
    bool ended = !st.ok();
    {
      absl::MutexLock lock(&mu_);
      if (!st.ok()) {
        proc->failure = EscapeInvalidUtf8(st.message());
        proc->exit_code = -1;
      }
      for (const v1::CommandOutput& c : out.chunks()) {
        Proc::Chunk chunk{proc->next_seq++, StreamName(c.stream(), proc->tty), c.data()};
        notes.push_back({{"processId", proc->id},
                         {"seq", chunk.seq},
                         {"stream", chunk.stream},
                         {"chunk", absl::Base64Escape(chunk.data)}});
        proc->kept_bytes += chunk.data.size();
        proc->chunks.push_back(std::move(chunk));
        while (proc->kept_bytes > options_.kept_output_bytes && !proc->chunks.empty()) {
          proc->kept_bytes -= proc->chunks.front().data.size();
          proc->chunks.pop_front();
        }
      }
      if (st.ok()) {
        offset = out.next_offset();
        const v1::Process& p = out.process();
        ended = p.state() != v1::Process::STATE_RUNNING && out.chunks_size() == 0 &&
                offset >= p.output_bytes();
        if (ended) {
          proc->exit_code = p.state() == v1::Process::STATE_FAILED ? -1 : ExitCodeOf(p);
          if (p.state() == v1::Process::STATE_FAILED) proc->failure = p.error();
        }
      }
    }
    for (Json& n : notes) Notify("process/output", std::move(n));
    if (!ended) continue;
    int exit_code;
    uint64_t exited_seq, closed_seq;
    {
      absl::MutexLock lock(&mu_);
      exit_code = proc->exit_code;
      exited_seq = proc->next_seq++;
      closed_seq = proc->next_seq++;
      proc->exited = true;
    }
    Notify("process/exited", {{"processId", proc->id},
                              {"seq", exited_seq},
                              {"exitCode", exit_code},
                              {"sandboxDenied", false}});
    {
      absl::MutexLock lock(&mu_);
      proc->closed = true;
    }
    Notify("process/closed", {{"processId", proc->id}, {"seq", closed_seq}});
    return;
  }
}

absl::StatusOr<std::shared_ptr<CodexExecServer::Proc>> CodexExecServer::FindProc(
    const Json& params) {
  SANDGATE_ASSIGN_OR_RETURN(std::string id, StringField(params, "processId"));
  absl::MutexLock lock(&mu_);
  auto it = procs_.find(id);
  if (it == procs_.end() || it->second->sandgate_id.empty()) {
    return errors::NotFound("process (of this connection)", EscapeInvalidUtf8(id));
  }
  return it->second;
}

CodexExecServer::Answer CodexExecServer::ProcessRead(const Json& params) {
  absl::StatusOr<std::shared_ptr<Proc>> proc = FindProc(params);
  if (!proc.ok()) return ErrorOf(proc.status());
  uint64_t after = 0, max_bytes = 1 << 20, wait_ms = 0;
  for (auto [name, out] : {std::pair<const char*, uint64_t*>{"afterSeq", &after},
                           {"maxBytes", &max_bytes},
                           {"waitMs", &wait_ms}}) {
    const Json* v = Field(params, name);
    if (v == nullptr) continue;
    if (!v->is_number_unsigned()) {
      return Error(kInvalidParams,
                   absl::StrCat("params.", name, " must be a non-negative integer"));
    }
    *out = v->get<uint64_t>();
  }
  const absl::Duration wait = absl::Milliseconds(std::min<uint64_t>(wait_ms, 30000));
  Proc& p = **proc;
  absl::MutexLock lock(&mu_);
  auto news = [&p, after]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return p.closed || (!p.chunks.empty() && p.chunks.back().seq > after);
  };
  deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&news), deps_.clock->Now() + wait);
  Json chunks = Json::array();
  uint64_t taken = 0;
  uint64_t next = after + 1;
  for (const Proc::Chunk& c : p.chunks) {
    if (c.seq <= after) continue;
    if (taken > 0 && taken + c.data.size() > max_bytes) break;
    chunks.push_back({{"seq", c.seq}, {"stream", c.stream}, {"chunk", absl::Base64Escape(c.data)}});
    taken += c.data.size();
    next = c.seq + 1;
  }
  Answer a;
  a.result = {{"chunks", std::move(chunks)},
              {"nextSeq", std::max(next, after + 1)},
              {"exited", p.exited},
              {"exitCode", p.exited ? Json(p.exit_code) : Json(nullptr)},
              {"closed", p.closed},
              {"failure", p.failure.empty() ? Json(nullptr) : Json(p.failure)},
              {"sandboxDenied", false}};
  return a;
}

CodexExecServer::Answer CodexExecServer::ProcessWrite(const Json& params) {
  absl::StatusOr<std::string> chunk = StringField(params, "chunk");
  if (!chunk.ok()) return ErrorOf(chunk.status());
  std::string data;
  if (!absl::Base64Unescape(*chunk, &data)) {
    return Error(kInvalidParams, "params.chunk must be base64");
  }
  absl::StatusOr<std::shared_ptr<Proc>> proc = FindProc(params);
  if (!proc.ok()) return Result({{"status", "unknownProcess"}});
  v1::WriteProcessInputRequest write;
  write.set_session_id(options_.session_id);
  write.set_process_id((*proc)->sandgate_id);
  write.set_data(std::move(data));
  v1::WriteProcessInputResponse written;
  absl::Status st = deps_.api->WriteProcessInput(caller_, write, &written);
  if (st.code() == absl::StatusCode::kFailedPrecondition)
    return Result({{"status", "stdinClosed"}});
  if (!st.ok()) return ErrorOf(st);
  return Result({{"status", "accepted"}});
}

CodexExecServer::Answer CodexExecServer::ProcessSignal(const Json& params,
                                                       const std::string& signal) {
  absl::StatusOr<std::shared_ptr<Proc>> proc = FindProc(params);
  if (!proc.ok()) return ErrorOf(proc.status());
  v1::WriteProcessInputRequest write;
  write.set_session_id(options_.session_id);
  write.set_process_id((*proc)->sandgate_id);
  write.set_signal(signal);
  v1::WriteProcessInputResponse written;
  absl::Status st = deps_.api->WriteProcessInput(caller_, write, &written);
  // An ended process takes no signal: terminate answers that it was not running. A signal
  // taken went to a running process (which may be gone by now: it is not asked again).
  if (st.code() == absl::StatusCode::kFailedPrecondition) return Result({{"running", false}});
  if (!st.ok()) return ErrorOf(st);
  return Result({{"running", true}});
}

}  // namespace sandgate::server
