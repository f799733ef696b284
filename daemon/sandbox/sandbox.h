// The sandbox provider interface: where agent code runs.
//
// A Provider creates Sessions; a Session is one live, isolated workspace with a shell. The
// daemon talks to sessions only through this interface, so core/ does not know whether a
// session is a bubblewrap sandbox on this machine (sandbox/local) or a hosted container
// (sandbox/openai, later).
//
//   absl::StatusOr<std::unique_ptr<Session>> s = provider->Create(spec, cancel);
//   SANDGATE_RETURN_IF_ERROR((*s)->WriteFile("input.csv", csv));
//   auto r = (*s)->Exec({.argv = {"python3", "analyze.py"}, .timeout = absl::Minutes(2)},
//                       [](OutputStream, absl::string_view chunk) { ... }, &cancel);
//   (*s)->Close();
#ifndef SANDGATE_SANDBOX_SANDBOX_H_
#define SANDGATE_SANDBOX_SANDBOX_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "common/journal.h"
#include "common/unique_fd.h"
#include "nlohmann/json.hpp"
#include "sandbox/exec_channel.h"

namespace sandgate::sandbox {

enum class NetworkMode { kDisabled, kRestricted, kEnabled };

// kRestricted and kEnabled: commands reach the outside only through an HTTP proxy that the
// daemon serves inside the session's own network namespace at 127.0.0.1:3128 (CONNECT and
// absolute-URI requests); HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (upper and lower case) and
// NO_PROXY=localhost,127.0.0.1 are set for every command. There is no other route out: no
// DNS, no raw IP. The proxy resolves names itself and refuses loopback, private, link-local,
// CGNAT, ULA, multicast, reserved and unspecified addresses in every mode.
struct NetworkPolicy {
  NetworkMode mode = NetworkMode::kDisabled;
  // kRestricted: exact host names and "*.suffix" patterns ("*.example.com" matches
  // "a.example.com", not "example.com"). Lower-cased, trailing dot dropped; a pattern with
  // spaces, CR/LF or characters outside [a-z0-9.-] is INVALID_ARGUMENT at Create.
  // Ignored for kEnabled (every public destination).
  std::vector<std::string> allowed_domains;
  // Destination ports the proxy connects to (restricted and enabled).
  std::vector<uint16_t> allowed_ports = {443, 80};
  // Per session: proxied connections open at once, and bytes through the proxy in both
  // directions over the session's life. Beyond them requests are refused (403,
  // X-Proxy-Error: connection-limit / byte-limit) and, for bytes, open connections closed.
  uint32_t max_connections = 64;
  uint64_t max_bytes = 1ull << 30;
};

// One decision of a session's network proxy, reported through
// SessionSpec::on_network_decision. A connection yields one kAllowed, kDenied or kFailed
// decision and, if it was allowed, one kClosed with the byte counts.
struct NetworkDecision {
  enum class Verdict {
    kAllowed,  // policy allowed it and the upstream connection is open
    kDenied,   // refused by policy or malformed; `reason` is the X-Proxy-Error sent
    kFailed,   // allowed by policy but the upstream could not be reached (502)
    kClosed,   // an allowed connection ended; bytes_up/bytes_down are final
  };
  std::string session_id;
  uint64_t connection = 0;  // per session, from 1; ties kAllowed to its kClosed
  Verdict verdict = Verdict::kDenied;
  std::string method;  // "CONNECT", "GET", …; "" when the request could not be parsed
  std::string host;    // normalised; "" when unparseable
  uint16_t port = 0;
  std::string ip;  // the checked address connected to (or refused); "" when not resolved
  // kDenied: "blocked-by-allowlist", "blocked-by-ssrf-guard", "bad-request",
  // "connection-limit" or "byte-limit"; kFailed: "upstream-unreachable" or
  // "resolution-failed"; kAllowed: "allowlist" or "enabled"; kClosed: why it ended.
  std::string reason;
  std::string detail;       // human-readable specifics, e.g. "10.0.0.1 is private (RFC 1918)"
  int http_status = 0;      // what the proxy answered (200 for CONNECT, 400, 403, 502); 0 if none
  uint64_t bytes_up = 0;    // kClosed: client to upstream
  uint64_t bytes_down = 0;  // kClosed: upstream to client
};

// How a local sandbox is walled off from the host (docs/isolation-levels.md).
enum class Isolation {
  kNamespaces,  // bubblewrap: namespaces + seccomp on the host's kernel
  kGvisor,      // runsc: the code talks to gVisor's kernel, never to the host's
};
// "namespaces" / "gvisor".
const char* IsolationName(Isolation isolation);
// INVALID_ARGUMENT naming the accepted values for anything else.
absl::StatusOr<Isolation> ParseIsolation(absl::string_view name);

struct SessionSpec {
  // Unique, [a-z0-9-], at most 40 chars; names every host resource ("sandgate-<id>").
  std::string id;
  uint64_t memory_bytes = 1ull << 30;
  uint32_t max_processes = 256;
  uint64_t workspace_bytes = 256ull << 20;
  uint64_t workspace_inodes = 16384;
  NetworkPolicy network;
  // Environment given to every command (merged under ExecRequest::env). Nothing of the
  // daemon's own environment ever reaches a sandbox. With a restricted or enabled network
  // the proxy variables are set over both.
  std::map<std::string, std::string> env;
  // CPU seconds each process of a command may use (RLIMIT_CPU, set by the sandbox's init
  // for every command and inherited by what it starts): SIGXCPU at the limit, SIGKILL one
  // second later. 0 = no limit. ExecResult::cpu_time_exceeded reports it.
  uint32_t cpu_seconds_per_process = 0;
  // The session's CPU share across all its processes, in thousandths of a core (1500 = one
  // and a half cores), enforced by the CPU cgroup controller (v1 cpu.cfs_quota_us, v2
  // cpu.max, 100 ms period): a session above it is throttled, not killed. 0 = no cap.
  uint32_t cpu_millicores = 0;
  // Receives every decision of the network proxy (restricted/enabled only). May be empty.
  // Called on the proxy's single thread, shared by all sessions: it must not block (queue
  // the event, do not write to a database inline) and must not call back into the session.
  std::function<void(const NetworkDecision&)> on_network_decision;
  // Providers without levels (openai) ignore it; the local provider refuses kGvisor when
  // runsc is missing.
  Isolation isolation = Isolation::kNamespaces;
  // The root file system on the host: "" = the host's own (its /usr, top-level links and
  // curated /etc files, read-only), else an image's root directory (core/images.h), whose
  // /usr, links and /etc files are bound read-only instead. Local provider only.
  std::string root_dir;
};

enum class OutputStream { kStdout, kStderr };
// Called as output is produced, from the thread that called Exec.
using OutputCallback = std::function<void(OutputStream, absl::string_view)>;

struct ExecRequest {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // over SessionSpec::env
  std::string cwd;                         // relative to the workspace; "" = workspace root
  // Wall clock. At the timeout the command's process group is killed and so is every process
  // of the session that no other running command owns (background workers the command
  // left, also `setsid`/`nohup` ones).
  absl::Duration timeout = absl::Minutes(5);
  uint64_t output_cap_bytes = 4ull << 20;  // per stream; beyond it output is dropped, not buffered
  // Talks to the command while it runs (exec_channel.h): its stdin is a pipe the channel
  // writes, instead of /dev/null, and the channel signals it. Null: nothing talks to it.
  // Only where Session::talks_to_commands().
  std::shared_ptr<ExecChannel> channel;
  // Runs the command on a new pseudo-terminal of this size (needs `channel`): its stdin,
  // stdout and stderr are the terminal, whose raw bytes arrive as kStdout.
  std::optional<TerminalSize> pty;
};

// The argv that runs `command` (a shell command line) in the sandbox: the one way sandgate
// turns a command line into a command, for setup_commands, the agents' shell calls and Exec.
inline std::vector<std::string> ShellCommand(std::string command) {
  return {"/bin/sh", "-c", std::move(command)};
}

struct ExecResult {
  int exit_code = -1;   // valid when term_signal == 0
  int term_signal = 0;  // the signal that ended the command, if any
  bool timed_out = false;
  bool cancelled = false;
  bool oom_killed = false;
  bool cpu_time_exceeded = false;  // ended by SIGXCPU (SessionSpec::cpu_seconds_per_process)
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  absl::Duration duration;
  bool ok() const { return term_signal == 0 && exit_code == 0 && !timed_out && !cancelled; }
};

enum class FileType { kRegular, kDirectory, kSymlink, kOther };

struct FileEntry {
  // Relative to the workspace, the name's bytes as they are: sandbox code chooses them, so
  // they need not be UTF-8 (the gRPC edge escapes them for a response).
  std::string path;
  FileType type = FileType::kOther;
  uint64_t size = 0;
  // For a directory the listing did not descend into, why ("deeper than 64 levels");
  // empty otherwise.
  std::string not_listed;
};

// A listing always succeeds over what the sandbox put there: what it did not show is marked
// (FileEntry::not_listed, truncated) instead of failing the whole listing.
struct FileListing {
  std::vector<FileEntry> entries;  // sorted by path
  bool truncated = false;          // an entry cap stopped the listing early
};

// What a session uses now, from its cgroups (local provider). A plain value.
struct ResourceUsage {
  uint64_t memory_bytes = 0;
  uint64_t memory_limit_bytes = 0;  // 0: no limit in force
  absl::Duration cpu_time;          // CPU time of all its processes, since it started
  uint64_t processes = 0;           // processes (and threads, as the pids controller counts)
  // What could not be measured on this host, and why ("memory: the session has no memory
  // cgroup"); such a figure is 0.
  std::vector<std::string> unmeasured;
};

// What a session knows of its own end when that is not the daemon's to decide (a hosted
// container expires upstream however it is touched). A plain value.
struct SessionHealth {
  // The sandbox has ended on its own; `reason` says how it was learned.
  bool expired = false;
  // When it will end on its own, whatever the daemon does; InfiniteFuture while the daemon
  // can keep it for as long as it is held. `reason` says why it cannot.
  absl::Time expires_at = absl::InfiniteFuture();
  std::string reason;
};

// A capability of a session whose commands run upstream, inside a model's response, in a
// hosted shell (the `openai` provider's containers): what an agent needs to point the model's
// shell tool at it and to report its expiry. Agents reach it through Session::hosted_shell(),
// never by casting to a provider's class. Thread safe; lives as long as its session.
class HostedShell {
 public:
  virtual ~HostedShell() = default;
  // The upstream container the shell tool is given ({"type":"container_reference",…}).
  virtual const std::string& container_id() const = 0;
  // OK while the container is usable; FAILED_PRECONDITION saying why once it is not.
  virtual absl::Status CheckUsable() const = 0;
  // Whether `status` (from an upstream call) is upstream's way of saying the container expired.
  virtual bool SaysExpired(const absl::Status& status) const = 0;
  // Records that upstream reported the container expired: `said` is what the API answered,
  // `during` what was being done. Returns the FAILED_PRECONDITION every later call gets.
  virtual absl::Status MarkExpired(absl::string_view said, absl::string_view during) = 0;
};

// A capability of a session whose agent loop runs upstream together with its sandbox (the
// `openai-agents` provider: an Agents API session on an openai_hosted environment). Upstream
// makes the environment, with its files and setup commands, and starts the agent in one
// request, so nothing exists upstream until the agent calls Run: files written and setup
// commands added before then go into that request. Agents reach it through
// Session::hosted_agent(), never by casting to a provider's class. Thread safe; lives as long
// as its session.
class HostedAgent {
 public:
  virtual ~HostedAgent() = default;
  // A setup command the environment runs, in order, after its files and before the agent
  // starts; a non-zero exit keeps the agent from starting. FAILED_PRECONDITION once Run began.
  virtual absl::Status AddSetupCommand(std::string command) = 0;
  struct Task {
    std::string model;
    std::string instructions;  // the agent's brief
    std::string input;         // the user message that starts its first turn
  };
  // Called with each upstream event as it arrives (the stream's JSON). nullopt: keep
  // following; a status: the run's outcome, and the end of the stream.
  using OnEvent = std::function<std::optional<absl::Status>(const nlohmann::json& event)>;
  // Creates the upstream session (journaled before) and follows its events until `on_event`
  // returns a status, which Run returns. CANCELLED when `cancel` fired; UNAVAILABLE (or the
  // API's error) when the stream broke for good. Once only.
  virtual absl::Status Run(const Task& task, const OnEvent& on_event,
                           const CancelToken& cancel) = 0;
};

// One live sandbox. Thread safe: Exec may run concurrently with Exec and file calls; Close
// may be called from any thread, also while an Exec is running (which then ends cancelled).
class Session {
 public:
  virtual ~Session() = default;  // Closes the session if Close was not called.
  virtual const std::string& id() const = 0;
  // The workspace as commands see it, e.g. "/work".
  virtual std::string workdir() const = 0;
  // Runs a command to completion. Errors are infrastructure failures (session gone); a
  // command that fails, times out or is cancelled is an OK result describing that.
  virtual absl::StatusOr<ExecResult> Exec(const ExecRequest& request,
                                          const OutputCallback& on_output,
                                          const CancelToken* cancel) = 0;
  // Whether Exec honours ExecRequest::channel and pty (stdin, terminals, signals). Default:
  // no; the caller refuses such requests instead of having them ignored.
  virtual bool talks_to_commands() const { return false; }
  // OK when Exec can run a command on a pseudo-terminal (ExecRequest::pty); otherwise a
  // FAILED_PRECONDITION saying why, for the caller to refuse such a request up front.
  virtual absl::Status TerminalsAvailable() const {
    return talks_to_commands()
               ? absl::OkStatus()
               : absl::FailedPreconditionError("its sandbox cannot run a process on a terminal");
  }
  // Paths are relative to the workspace; "..", absolute paths and symlinks are refused.
  virtual absl::Status WriteFile(absl::string_view path, absl::string_view data,
                                 int mode = 0644) = 0;
  // Regular files only (not links, fifos, devices, hard-linked files); fails with
  // RESOURCE_EXHAUSTED when the file is larger than max_bytes.
  virtual absl::StatusOr<std::string> ReadFile(absl::string_view path, uint64_t max_bytes) = 0;
  // Takes one piece of a file; an error stops the copy and is what ReadFileTo returns.
  using FileSink = std::function<absl::Status(absl::string_view piece)>;
  // As ReadFile, but hands the file to `sink` in bounded pieces, so that the caller never
  // holds it whole (artifacts of tens of MiB); after an error some pieces may already have
  // gone to `sink`. This default reads the file whole, for providers that cannot stream.
  virtual absl::Status ReadFileTo(absl::string_view path, uint64_t max_bytes,
                                  const FileSink& sink) {
    absl::StatusOr<std::string> data = ReadFile(path, max_bytes);
    if (!data.ok()) return data.status();
    return sink(*data);
  }
  // Recursive listing below `dir` ("" = workspace); links are listed, never followed.
  virtual absl::StatusOr<FileListing> ListFiles(absl::string_view dir) = 0;
  // The rest of a file system, with the rules of WriteFile and ReadFile ("..", absolute paths
  // and symlinks in the path are refused; a link itself is never followed). Default:
  // UNIMPLEMENTED, for providers whose files cannot be managed one by one.
  // What `path` is ("" = the workspace).
  virtual absl::StatusOr<FileEntry> StatFile(absl::string_view path) { return Unmanaged("stat"); }
  // A file, a link or an empty directory; with `recursive`, a directory and all it holds.
  virtual absl::Status RemoveFile(absl::string_view path, bool recursive) {
    return Unmanaged("delete");
  }
  // Missing parents of `to` are made; an existing `to` is ALREADY_EXISTS unless `overwrite`.
  virtual absl::Status RenameFile(absl::string_view from, absl::string_view to, bool overwrite) {
    return Unmanaged("rename");
  }
  // With `parents`, missing parents too, and an existing directory is fine.
  virtual absl::Status MakeDirectory(absl::string_view path, bool parents) {
    return Unmanaged("mkdir");
  }
  // What the session uses now (its cgroups'). Cheap (a few small reads), and no use of the
  // session: asking does not keep it from idling. Default: UNIMPLEMENTED, for providers that
  // cannot see their sandbox's usage.
  virtual absl::StatusOr<ResourceUsage> Usage() const {
    return absl::UnimplementedError(
        absl::StrCat("session ", id(), ": its provider does not measure its usage"));
  }
  // A connection to 127.0.0.1:`port` inside the sandbox's own network (its namespace, or
  // gVisor's loopback), never the host's: a stream socket, close-on-exec, whose bytes are the
  // connection's (exposed ports, docs/sessions.md). Waits at most `timeout` for it to be made.
  // FAILED_PRECONDITION saying so when nothing listens there; UNIMPLEMENTED (the default) for
  // a provider whose sandboxes cannot be reached so.
  // Whether ConnectPort reaches the sandbox's ports. Default: no.
  virtual bool reaches_ports() const { return false; }
  virtual absl::StatusOr<UniqueFd> ConnectPort(uint16_t port, absl::Duration timeout) {
    return absl::UnimplementedError(
        absl::StrCat("session ", id(), ": its provider cannot expose ports"));
  }
  // Human-readable notes about promises this session cannot keep on this host, e.g.
  // "memory limit not enforced: no memory cgroup controller available".
  virtual std::vector<std::string> Warnings() const = 0;
  // Whether the sandbox has ended, or will end, on its own. Cheap (no I/O: it reports what the
  // session has already learned), so the daemon may ask it often. Default: it lives until
  // closed.
  virtual SessionHealth Health() const { return SessionHealth(); }
  // Asks to be told, as soon as the provider learns it, that the sandbox ended on its own
  // (Health() then says so): `ended` is called once, from a provider thread, or from this
  // call when the end is already known. It must be quick and must not call into the session.
  // Never called after Close returned; a later call replaces an earlier callback. Default:
  // never called (the end is learned when Health is asked).
  virtual void OnEnded(std::function<void()> /*ended*/) {}
  // The session's hosted shell, when its commands run upstream; null when they run through
  // Exec (the default). Valid as long as the session.
  virtual HostedShell* hosted_shell() { return nullptr; }
  // The session's hosted agent, when the agent loop runs upstream with the sandbox; null
  // otherwise (the default). Valid as long as the session.
  virtual HostedAgent* hosted_agent() { return nullptr; }
  // Files the session itself keeps for the run's record (e.g. the upstream events as they
  // arrived), readable by name through ReadFileTo beside the workspace's; collected with the
  // playbook's artifacts. Default: none.
  virtual std::vector<std::string> OwnArtifacts() const { return {}; }
  // Kills every process, releases every host resource and erases the journal record.
  // Idempotent.
  virtual absl::Status Close() = 0;

 protected:
  absl::Status Unmanaged(absl::string_view what) const {
    return absl::UnimplementedError(
        absl::StrCat("session ", id(), ": its provider cannot ", what, " files"));
  }
};

// Thread safe.
class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string name() const = 0;
  // Whether Session::Exec runs commands. The openai provider's containers run commands only
  // through the Responses API's shell tool (the openai agent), so requests that need Exec
  // there (another agent, setup commands) are refused before anything is made.
  virtual bool runs_commands() const { return true; }
  // Whether a session's setup commands can run although Exec does not (they then go to the
  // session's HostedAgent, which runs them upstream before the agent starts).
  virtual bool runs_setup_commands() const { return runs_commands(); }
  // OK when the provider can make a sandbox as `spec` asks; otherwise INVALID_ARGUMENT naming
  // the request field (sandbox.memory_bytes, sandbox.network.allowed_domains[i], …) and what
  // this provider takes instead. Checked before a run is accepted, so nothing is made for a
  // request that cannot be honoured. Default: everything Create maps.
  virtual absl::Status CheckSpec(const SessionSpec& /*spec*/) const { return absl::OkStatus(); }
  // OK when another run may start in `session_id`, a kept session this provider made;
  // otherwise FAILED_PRECONDITION saying why, checked before the run is accepted. Default: OK.
  virtual absl::Status CheckRunIn(const std::string& /*session_id*/) const {
    return absl::OkStatus();
  }
  // Journals the session before creating anything. `cancel` may abort a slow creation.
  virtual absl::StatusOr<std::unique_ptr<Session>> Create(const SessionSpec& spec,
                                                          const CancelToken* cancel) = 0;
  // Deletes whatever a previous daemon left for one of this provider's journal entries,
  // then erases the entry. OK when nothing was left. UNAVAILABLE when it cannot tell yet
  // (upstream unreachable, or a create that may still land): the entry stays; ask again.
  virtual absl::Status Sweep(const JournalEntry& entry) = 0;
};

}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_SANDBOX_H_
