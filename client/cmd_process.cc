// sandgate session exec with stdin, exec --background, ps, output, input, kill, shell: the
// processes of a kept session you talk to (StartProcess and friends in the API).
//
// Everything goes through four unary calls: input is WriteProcessInput, output is
// ReadProcessOutput from the last offset with a wait (a long poll), so a reader sees output
// as soon as it is produced and never twice, and nothing here is a hand-made stream.
#include "client/cmd_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/render.h"
#include "client/terminal_text.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::cli {
namespace {

constexpr size_t kInputChunkBytes = 64 << 10;
// Each read waits this long for output before asking again.
constexpr int kReadWaitSeconds = 10;

// The calls on one process. Thread safe (each call has its own context).
class ProcessLink {
 public:
  ProcessLink(Client& client, std::string session, std::string process)
      : client_(client), session_(std::move(session)), process_(std::move(process)) {}

  const std::string& process() const { return process_; }

  grpc::Status Send(v1::WriteProcessInputRequest req, v1::WriteProcessInputResponse* resp) {
    req.set_session_id(session_);
    req.set_process_id(process_);
    grpc::ClientContext ctx;
    client_.Prepare(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return client_.stub().WriteProcessInput(&ctx, req, resp);
  }
  // All of `data`, sent again from where the process stopped taking it.
  grpc::Status SendAll(absl::string_view data) {
    while (!data.empty()) {
      v1::WriteProcessInputRequest req;
      req.set_data(std::string(data));
      v1::WriteProcessInputResponse resp;
      grpc::Status st = Send(std::move(req), &resp);
      if (!st.ok()) return st;
      data.remove_prefix(std::min<size_t>(resp.written_bytes(), data.size()));
    }
    return grpc::Status::OK;
  }
  grpc::Status Signal(const std::string& signal) {
    v1::WriteProcessInputRequest req;
    req.set_signal(signal);
    v1::WriteProcessInputResponse resp;
    return Send(std::move(req), &resp);
  }
  grpc::Status Read(uint64_t offset, int wait_seconds, v1::ProcessOutput* out,
                    grpc::ClientContext* ctx) {
    v1::ReadProcessOutputRequest req;
    req.set_session_id(session_);
    req.set_process_id(process_);
    req.set_offset(offset);
    req.mutable_wait()->set_seconds(wait_seconds);
    client_.Prepare(ctx);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(wait_seconds + 60));
    return client_.stub().ReadProcessOutput(ctx, req, out);
  }

 private:
  Client& client_;
  const std::string session_;
  const std::string process_;
};

// Copies the process's output to stdout and stderr as it comes, from `offset`, until it
// ended; returns its exit status (ExecStatus), or kExitDetached when interrupted (after
// `on_interrupt`), or a failure's exit code.
int Follow(Client& client, ProcessLink& link, uint64_t offset, bool say_how,
           const std::function<void()>& on_interrupt) {
  uint64_t dropped = 0;
  for (;;) {
    grpc::ClientContext ctx;
    v1::ProcessOutput out;
    grpc::Status st;
    {
      Watching watching(&client.interrupt(), &ctx);
      st = link.Read(offset, kReadWaitSeconds, &out, &ctx);
    }
    if (client.interrupt().fired()) {
      if (on_interrupt) on_interrupt();
      std::fprintf(stderr, "\r\nsandgate %s: interrupted\r\n", CommandName().c_str());
      return kExitDetached;
    }
    if (!st.ok()) return Fail(st);
    dropped += out.dropped_bytes();
    for (const auto& c : out.chunks()) {
      // The process's own bytes, unescaped: what it prints is what the user asked to see.
      FILE* f = c.stream() == v1::CommandOutput::STREAM_STDERR ? stderr : stdout;
      std::fwrite(c.data().data(), 1, c.data().size(), f);
      std::fflush(f);
    }
    offset = out.next_offset();
    const v1::Process& p = out.process();
    if (p.state() == v1::Process::STATE_RUNNING || out.chunks_size() > 0) continue;
    if (dropped > 0) {
      std::fprintf(stderr,
                   "sandgate %s: %llu bytes of the output were dropped (its buffer is bounded)\n",
                   CommandName().c_str(), static_cast<unsigned long long>(dropped));
    }
    if (p.state() == v1::Process::STATE_FAILED) {
      std::fprintf(stderr, "sandgate %s: %s\n", CommandName().c_str(),
                   TerminalSafe(p.error()).c_str());
      return kExitRunFailed;
    }
    if (std::string how = HowItEnded(p.finished()); say_how && !how.empty()) {
      std::fprintf(stderr, "sandgate %s: %s\n", CommandName().c_str(), how.c_str());
    }
    return ExecStatus(p.finished());
  }
}

// Sends this process's stdin to the remote one until EOF, then closes its stdin. On its
// own thread, detached: a read of a terminal cannot be called off.
void PumpStdin(ProcessLink* link, std::atomic<bool>* failed) {
  std::vector<char> buf(kInputChunkBytes);
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (!link->SendAll(absl::string_view(buf.data(), static_cast<size_t>(n))).ok()) {
      failed->store(true);
      return;  // the process ended or stopped reading: nothing more to give it
    }
  }
  v1::WriteProcessInputRequest close;
  close.set_close_stdin(true);
  v1::WriteProcessInputResponse resp;
  (void)link->Send(std::move(close), &resp);
}

int StartProcess(Client& client, const v1::StartProcessRequest& req, v1::Process* p) {
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  grpc::Status st = client.stub().StartProcess(&ctx, req, p);
  return st.ok() ? 0 : Fail(st);
}

// The process request of `session exec ID [--] COMMAND...`: argv, or one word as `sh -c`.
int ParseProcessRequest(const Args& args, v1::StartProcessRequest* req) {
  const std::vector<std::string>& p = args.positional;
  if (p.size() < 2) return Usage("needs a session id and a command: ID [--] COMMAND [ARG]...");
  req->set_session_id(p[0]);
  if (p.size() == 2) {
    req->set_command(p[1]);
  } else {
    for (size_t i = 1; i < p.size(); ++i) req->add_argv(p[i]);
  }
  int64_t timeout;
  if (int rc = ParseSeconds(args, "--timeout", &timeout)) return rc;
  if (timeout > 0) req->mutable_timeout()->set_seconds(timeout);
  return ParseEnv(args, req->mutable_env());
}

void PrintProcess(const v1::Process& p, bool json) {
  if (json) {
    std::printf("%s\n", ToJson(p).c_str());
    return;
  }
  std::string state = p.state() == v1::Process::STATE_RUNNING  ? "running"
                      : p.state() == v1::Process::STATE_EXITED ? "exited"
                                                               : "failed";
  std::string status = p.state() == v1::Process::STATE_EXITED
                           ? absl::StrCat(ExecStatus(p.finished()))
                           : (p.state() == v1::Process::STATE_FAILED ? "-" : "");
  std::printf("%-6s %-8s %-4s %9s  %s%s\n", TerminalSafe(p.id()).c_str(), state.c_str(),
              status.c_str(), HumanBytes(p.output_bytes()).c_str(),
              TerminalSafe(ShellWords(p.argv())).c_str(), p.pty() ? "  (pty)" : "");
}

// The local terminal's size, or 24x80.
v1::TerminalSize LocalSize() {
  v1::TerminalSize size;
  struct winsize ws = {};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
    size.set_rows(ws.ws_row);
    size.set_cols(ws.ws_col);
  } else {
    size.set_rows(24);
    size.set_cols(80);
  }
  return size;
}

// The local terminal in raw mode while this lives (keys go through as bytes: Ctrl-C too).
class RawTerminal {
 public:
  RawTerminal() {
    if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    struct termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  struct termios saved_ = {};
  bool active_ = false;
};

// SIGWINCH, through a pipe the shell's input thread polls (the handler may run on any
// thread: gRPC's do not block it).
int g_winch_pipe[2] = {-1, -1};
void OnWinch(int) {
  const char c = 'w';
  (void)!write(g_winch_pipe[1], &c, 1);
}

// Keys (and size changes) to the shell until the local input ends.
void PumpTerminal(ProcessLink* link) {
  std::vector<char> buf(kInputChunkBytes);
  for (;;) {
    struct pollfd p[2] = {{STDIN_FILENO, POLLIN, 0}, {g_winch_pipe[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) {
      char drain[64];
      (void)!read(g_winch_pipe[0], drain, sizeof(drain));
      v1::WriteProcessInputRequest resize;
      *resize.mutable_resize() = LocalSize();
      v1::WriteProcessInputResponse resp;
      if (!link->Send(std::move(resize), &resp).ok()) return;
    }
    if (p[0].revents == 0) continue;
    ssize_t n = read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (!link->SendAll(absl::string_view(buf.data(), static_cast<size_t>(n))).ok()) return;
  }
  v1::WriteProcessInputRequest close;
  close.set_close_stdin(true);
  v1::WriteProcessInputResponse resp;
  (void)link->Send(std::move(close), &resp);
}

}  // namespace

std::string HowItEnded(const v1::CommandFinished& f) {
  if (f.timed_out()) return "the command timed out (killed)";
  if (f.oom_killed()) return "the command was killed: out of memory (the session's memory limit)";
  if (f.cancelled()) return "the command was cancelled";
  if (f.signal() == SIGSYS) {
    return absl::StrCat("the command was killed by signal ", SIGSYS,
                        " (SIGSYS: a system call the sandbox's seccomp filter forbids)");
  }
  if (f.signal() != 0)
    return absl::StrCat("the command was killed by signal ", f.signal(), " (",
                        strsignal(f.signal()), ")");
  return "";
}

int ExecStatus(const v1::CommandFinished& f) {
  if (f.timed_out()) return 124;  // as timeout(1)
  if (f.signal() != 0) return 128 + f.signal();
  if (f.oom_killed()) return 128 + SIGKILL;
  return f.exit_code();
}

bool StdinIsData() {
  struct stat st;
  if (fstat(STDIN_FILENO, &st) != 0) return false;
  return S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) || S_ISSOCK(st.st_mode);
}

int SessionExecProcess(Client& client, const Args& args) {
  v1::StartProcessRequest req;
  if (int rc = ParseProcessRequest(args, &req)) return rc;
  const bool background = args.Has("--background");
  const bool with_stdin = background ? args.Has("--stdin") : true;
  req.set_stdin(with_stdin);
  // In the foreground it is a command, as Exec runs it: the session's command_timeout holds.
  req.set_command_timeout(!background);
  if (args.Has("--tty")) *req.mutable_pty() = LocalSize();
  v1::Process p;
  if (int rc = StartProcess(client, req, &p)) return rc;
  if (background) {
    if (args.Has("--json")) {
      PrintProcess(p, true);
    } else {
      std::printf("%s\n", TerminalSafe(p.id()).c_str());
    }
    return 0;
  }
  auto link = std::make_unique<ProcessLink>(client, req.session_id(), p.id());
  static std::atomic<bool> input_failed{false};
  std::thread(PumpStdin, link.get(), &input_failed).detach();
  int rc = Follow(client, *link, 0, true, [&link] { (void)link->Signal("SIGKILL"); });
  link.release();  // the input thread may still hold it; it lives until the process exits
  return rc;
}

int SessionPs(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("needs exactly one session id");
  v1::ListProcessesRequest req;
  req.set_session_id(args.positional[0]);
  v1::ListProcessesResponse resp;
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  grpc::Status st = client.stub().ListProcesses(&ctx, req, &resp);
  if (!st.ok()) return Fail(st);
  const bool json = args.Has("--json");
  if (!json) std::printf("%-6s %-8s %-4s %9s  %s\n", "ID", "STATE", "EXIT", "OUTPUT", "COMMAND");
  for (const auto& p : resp.processes()) PrintProcess(p, json);
  return 0;
}

int SessionKill(Client& client, const Args& args) {
  if (args.positional.size() != 2) return Usage("needs ID PROCESS");
  ProcessLink link(client, args.positional[0], args.positional[1]);
  v1::WriteProcessInputRequest req;
  req.set_signal(args.Get("--signal", "SIGTERM"));
  v1::WriteProcessInputResponse resp;
  grpc::Status st = link.Send(std::move(req), &resp);
  return st.ok() ? 0 : Fail(st);
}

int SessionOutput(Client& client, const Args& args) {
  if (args.positional.size() != 2) return Usage("needs ID PROCESS");
  ProcessLink link(client, args.positional[0], args.positional[1]);
  uint64_t offset = 0;
  if (std::string from = args.Get("--offset"); !from.empty() && !absl::SimpleAtoi(from, &offset)) {
    return Usage("--offset: expected a byte offset (0 or more)");
  }
  if (args.Has("--follow")) return Follow(client, link, offset, true, nullptr);
  grpc::ClientContext ctx;
  v1::ProcessOutput out;
  grpc::Status st = link.Read(offset, 0, &out, &ctx);
  if (!st.ok()) return Fail(st);
  if (out.dropped_bytes() > 0) {
    std::fprintf(stderr, "sandgate %s: the first %llu bytes asked for were dropped\n",
                 CommandName().c_str(), static_cast<unsigned long long>(out.dropped_bytes()));
  }
  for (const auto& c : out.chunks()) {
    FILE* f = c.stream() == v1::CommandOutput::STREAM_STDERR ? stderr : stdout;
    std::fwrite(c.data().data(), 1, c.data().size(), f);
  }
  std::fflush(stdout);
  std::fprintf(stderr, "sandgate %s: next offset %llu\n", CommandName().c_str(),
               static_cast<unsigned long long>(out.next_offset()));
  return 0;
}

int SessionInput(Client& client, const Args& args) {
  if (args.positional.size() != 2) return Usage("needs ID PROCESS");
  ProcessLink link(client, args.positional[0], args.positional[1]);
  std::vector<char> buf(kInputChunkBytes);
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    grpc::Status st = link.SendAll(absl::string_view(buf.data(), static_cast<size_t>(n)));
    if (!st.ok()) return Fail(st);
  }
  if (!args.Has("--eof")) return 0;
  v1::WriteProcessInputRequest close;
  close.set_close_stdin(true);
  v1::WriteProcessInputResponse resp;
  grpc::Status st = link.Send(std::move(close), &resp);
  return st.ok() ? 0 : Fail(st);
}

int SessionShell(Client& client, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.empty()) return Usage("needs a session id: ID [--] [COMMAND [ARG]...]");
  if (!isatty(STDIN_FILENO)) return Usage("needs a terminal on stdin (use `session exec` instead)");
  v1::StartProcessRequest req;
  req.set_session_id(p[0]);
  if (p.size() == 1) {
    req.set_command("command -v bash >/dev/null 2>&1 && exec bash -i; exec sh -i");
  } else {
    for (size_t i = 1; i < p.size(); ++i) req.add_argv(p[i]);
  }
  const char* term = getenv("TERM");
  (*req.mutable_env())["TERM"] = term != nullptr && *term != '\0' ? term : "xterm-256color";
  if (int rc = ParseEnv(args, req.mutable_env())) return rc;
  *req.mutable_pty() = LocalSize();
  v1::Process proc;
  if (int rc = StartProcess(client, req, &proc)) return rc;
  if (pipe2(g_winch_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return Fail(absl::InternalError("pipe"));
  struct sigaction sa = {};
  sa.sa_handler = OnWinch;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGWINCH, &sa, nullptr);
  auto link = std::make_unique<ProcessLink>(client, p[0], proc.id());
  int rc;
  {
    RawTerminal raw;
    std::thread(PumpTerminal, link.get()).detach();
    rc = Follow(client, *link, 0, false, [&link] { (void)link->Signal("SIGHUP"); });
  }
  link.release();  // the input thread may still hold it; it lives until the process exits
  return rc;
}

}  // namespace sandgate::cli
