// sandgate: the command-line client of sandgated. Thin: flags, rendering, file transfer.
//
//   sandgate run examples/northstar_cloud_financial_statements.csv --out results/
//   sandgate events RUN --follow
//
// Address: --addr, else $SANDGATE_ADDR, else unix:/run/sandgate/sandgated.sock, in the
// daemon's own syntax (common/address.h). Token: --token-file, else $SANDGATE_TOKEN (never a
// flag: it would show in `ps`). Everything shown to a person from the daemon or a sandbox
// goes through TerminalSafe (client/terminal_text.h); `session exec` passes the command's
// output through as bytes.
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/args.h"
#include "client/interrupt.h"
#include "client/render.h"
#include "client/summary.h"
#include "client/terminal_text.h"
#include "client/transfer.h"
#include "common/address.h"
#include "google/protobuf/util/time_util.h"
#include "sandgate/v1/labels.h"
#include "sandgate/v1/sandgate.grpc.pb.h"

#ifndef SANDGATE_VERSION
#define SANDGATE_VERSION "unknown"
#endif

namespace sandgate::cli {
namespace {

constexpr char kUsage[] = R"(usage: sandgate [--addr ADDR] [--token-file FILE] COMMAND ...

commands:
  run FILE [--out DIR] [--json] [--playbook NAME] [--agent NAME] [--provider NAME]
           [--model NAME] [--timeout SECONDS] [--idempotency-key KEY] [--cancel-on-exit]
           [--env NAME=VALUE]... [--setup COMMAND]... [--network disabled|restricted|enabled]
           [--allow DOMAIN]... [--memory-mib N] [--session ID]
      start a run, show its progress, download its artifacts and events.jsonl into DIR
      (default ./sandgate-<run id>), print a summary; exit 0 only if the run succeeded.
      --playbook NAME picks the daemon's task (default: its default; a name it does not
      know is answered with the ones it knows).
      Ctrl-C detaches (the run goes on) unless --cancel-on-exit.
  events RUN [--follow] [--after N] [--json]   show a run's events
  runs [--limit N] [--json]                    list your runs, newest first
  get RUN [--json]                             show one run
  cancel RUN [--reason TEXT]                   cancel a run
  download RUN [--out DIR]                     download a run's artifacts and events.jsonl

  session create [--idle S] [--lifetime S] [--command-timeout S] [--env K=V]... [--setup CMD]...
                 [--network MODE] [--memory-mib N] [--idempotency-key K] [--json]   prints the id
  session list [--all] | get ID | keepalive ID | close ID [--reason TEXT]
  session exec ID [--timeout S] [--env K=V]... [--] COMMAND [ARG]...
      one COMMAND word runs as `sh -c COMMAND`; exits with the command's status
  session upload ID LOCAL_FILE [WORKSPACE_PATH] | download ID WORKSPACE_PATH [--out FILE]
  session ls ID [DIR]
  run ... --session ID     runs in that session; its workspace stays for the next run

  admin drain                                  operators: drain and stop the daemon
  admin purge --older-than-hours N             operators: delete old runs and ended sessions

Every command answers --help. --version prints the version.
ADDR: unix:PATH, tcp:HOST:PORT (as sandgated prints it) or HOST:PORT.
environment: SANDGATE_ADDR (default unix:/run/sandgate/sandgated.sock), SANDGATE_TOKEN
exit codes: 0 success, 1 the run did not succeed (or a download did not match its sha256, or
            `run` could not save all of a finished run's files), 2 usage or connection error,
            130 detached
)";

constexpr char kGlobalUsage[] = R"(
global options: --addr ADDR (unix:PATH, tcp:HOST:PORT or HOST:PORT), --token-file FILE
)";

constexpr char kSandboxOptions[] = R"(
sandbox:  --env NAME=VALUE   (repeatable)  set in every command's environment
          --setup COMMAND    (repeatable)  run before anything else, in order
          --network disabled|restricted|enabled   --allow DOMAIN (repeatable, restricted)
          --memory-mib N     memory limit
          --idle S  --lifetime S  --command-timeout S   the session's clocks, in seconds
)";

const std::vector<std::string> kSandboxFlags = {"--env",        "--setup", "--network",  "--allow",
                                                "--memory-mib", "--idle",  "--lifetime", "--command-timeout"};

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const ArgsGrammar& Grammar() {
  static const ArgsGrammar* const grammar = new ArgsGrammar{
      // clang-format off
      {{"--out", true},           {"--json", false},        {"--playbook", true},  {"--agent", true},
       {"--provider", true},      {"--timeout", true},      {"--idempotency-key", true},
       {"--cancel-on-exit", false}, {"--follow", false},    {"--after", true},     {"--limit", true},
       {"--reason", true},        {"--addr", true},         {"--token-file", true}, {"--env", true},
       {"--setup", true},         {"--network", true},      {"--allow", true},     {"--memory-mib", true},
       {"--session", true},       {"--idle", true},         {"--lifetime", true},  {"--all", false},
       {"--command-timeout", true}, {"--older-than-hours", true}, {"--model", true}},
      // clang-format on
      {"--addr", "--token-file"},
      {
          {"run",
           absl::StrCat(
               "usage: sandgate run FILE [--out DIR] [--json] [--playbook NAME] [--agent NAME]\n"
               "                         [--provider NAME] [--model NAME] [--timeout SECONDS]\n"
               "                         [--idempotency-key KEY] [--cancel-on-exit] [--session ID]\n"
               "                         [sandbox options]\n"
               "Starts a run on FILE, shows its progress as it happens, downloads its artifacts and\n"
               "events.jsonl into DIR (default ./sandgate-<run id>), checking each one's sha256, and\n"
               "prints a summary. Exit 0 only if the run succeeded, 1 if not (or if its files could\n"
               "not all be saved). A run that ended is reported as ended, with the events it streamed\n"
               "saved, even when the daemon goes away right after (a drain): the rest is a warning.\n"
               "--model NAME picks the model of a model-driven agent (default: the provider's).\n"
               "--playbook NAME picks the daemon's task (default: its default; a name it does not\n"
               "know is answered with the ones it knows). The summary is the daemon's account of\n"
               "what the run's verification found.\n"
               "--json prints each event as a JSON line on stdout, then the run; progress goes to\n"
               "stderr. --session ID runs in a kept session (no sandbox options then).\n"
               "Ctrl-C detaches (exit 130; the run goes on); with --cancel-on-exit it cancels the run.\n",
               kSandboxOptions, kGlobalUsage),
           With({"--out", "--json", "--playbook", "--agent", "--provider", "--model", "--timeout",
                 "--idempotency-key", "--cancel-on-exit", "--session"},
                kSandboxFlags)},
          {"events",
           absl::StrCat("usage: sandgate events RUN [--follow] [--after N] [--json]\n"
                        "Shows a run's events: from the start, or after event N; --follow keeps going until\n"
                        "the run finishes (and rides out a daemon restart). Ctrl-C stops (exit 130).\n",
                        kGlobalUsage),
           {"--follow", "--after", "--json"}},
          {"runs",
           absl::StrCat(
               "usage: sandgate runs [--limit N] [--json]\nLists your runs, newest first (default 20).\n",
               kGlobalUsage),
           {"--limit", "--json"}},
          {"get",
           absl::StrCat("usage: sandgate get RUN [--json]\nShows one run.\n", kGlobalUsage),
           {"--json"}},
          {"cancel",
           absl::StrCat("usage: sandgate cancel RUN [--reason TEXT]\nCancels a run.\n", kGlobalUsage),
           {"--reason"}},
          {"download",
           absl::StrCat(
               "usage: sandgate download RUN [--out DIR]\n"
               "Downloads a run's artifacts (each checked against its sha256) and events.jsonl into\n"
               "DIR (default ./sandgate-<run id>).\n",
               kGlobalUsage),
           {"--out"}},
          {"session",
           absl::StrCat(
               "usage: sandgate session create|list|get|exec|upload|download|ls|keepalive|close ...\n"
               "Drives a kept sandbox session; `sandgate session SUBCOMMAND --help` for each.\n",
               kGlobalUsage),
           {}},
          {"session create",
           absl::StrCat("usage: sandgate session create [--provider NAME] [--idempotency-key KEY] [--json]\n"
                        "                               [sandbox options]\n"
                        "Creates a kept session and prints its id (or the session as JSON).\n",
                        kSandboxOptions, kGlobalUsage),
           With({"--provider", "--idempotency-key", "--json"}, kSandboxFlags)},
          {"session list",
           absl::StrCat("usage: sandgate session list [--all] [--json]\n"
                        "Lists your live sessions; --all includes closed and expired ones.\n",
                        kGlobalUsage),
           {"--all", "--json"}},
          {"session get",
           absl::StrCat("usage: sandgate session get ID [--json]\nShows one session.\n", kGlobalUsage),
           {"--json"}},
          {"session keepalive",
           absl::StrCat("usage: sandgate session keepalive ID [--json]\n"
                        "Restarts the session's idle clock (never past its lifetime).\n",
                        kGlobalUsage),
           {"--json"}},
          {"session close",
           absl::StrCat("usage: sandgate session close ID [--reason TEXT] [--json]\n"
                        "Closes the session and deletes its sandbox and workspace.\n",
                        kGlobalUsage),
           {"--reason", "--json"}},
          {"session exec",
           absl::StrCat(
               "usage: sandgate session exec ID [--timeout S] [--env K=V]... [--] COMMAND [ARG]...\n"
               "Runs a command in the session; one COMMAND word runs as `sh -c COMMAND`. Its stdout\n"
               "and stderr are passed through unchanged, as they arrive; how it ended (timeout,\n"
               "signal, out of memory) goes to stderr. Exits with the command's status (124 timed\n"
               "out, 128+N killed by signal N). Put -- before a command that has options.\n",
               kGlobalUsage),
           {"--timeout", "--env"}},
          {"session upload",
           absl::StrCat("usage: sandgate session upload ID LOCAL_FILE [WORKSPACE_PATH]\n"
                        "Uploads a file into the workspace (default: under its own name). The daemon checks\n"
                        "its size and sha256 before the file appears.\n",
                        kGlobalUsage),
           {}},
          {"session download",
           absl::StrCat("usage: sandgate session download ID WORKSPACE_PATH [--out FILE]\n"
                        "Downloads a workspace file (default: under its own name here), checked against the\n"
                        "sha256 the daemon sends; nothing is left under FILE when the check fails.\n",
                        kGlobalUsage),
           {"--out"}},
          {"session ls",
           absl::StrCat("usage: sandgate session ls ID [DIR]\nLists the workspace (or DIR in it).\n",
                        kGlobalUsage),
           {}},
          {"admin",
           absl::StrCat("usage: sandgate admin drain | purge --older-than-hours N\n"
                        "Operators only. drain: refuse new runs, cancel the active ones, stop the daemon.\n"
                        "purge: delete runs and ended sessions older than N hours.\n",
                        kGlobalUsage),
           {}},
          {"admin drain",
           absl::StrCat("usage: sandgate admin drain\nDrains and stops the daemon.\n", kGlobalUsage),
           {}},
          {"admin purge",
           absl::StrCat("usage: sandgate admin purge --older-than-hours N\n"
                        "Deletes runs and ended sessions older than N hours (0 or more).\n",
                        kGlobalUsage),
           {"--older-than-hours"}},
      }};
  return *grammar;
}

constexpr int kExitRunFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitDetached = 130;
constexpr int kMaxMessageBytes = 80 << 20;
constexpr size_t kUploadChunkBytes = 1 << 20;

// What the user typed ("get", "session exec"), for every message: set once in main before
// any command runs.
std::string& CommandName() {
  static std::string* const name = new std::string("sandgate");
  return *name;
}

int Usage(const std::string& msg) {
  std::string where = CommandName() == "sandgate" ? "sandgate" : "sandgate " + CommandName();
  std::fprintf(stderr, "%s: %s\n(see %s --help)\n", where.c_str(), TerminalSafe(msg).c_str(), where.c_str());
  return kExitUsage;
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// One line on stderr naming the command the user typed; the exit code. The daemon says "run not found: ID"
// (common/errors.h); a person reads "sandgate get: no run ID".
int Fail(const absl::Status& s) {
  std::string msg(s.message());
  std::vector<std::string> not_found = absl::StrSplit(msg, absl::MaxSplits(" not found: ", 1));
  if (s.code() == absl::StatusCode::kNotFound && not_found.size() == 2) {
    msg = absl::StrCat("no ", not_found[0], " ", not_found[1]);
  } else if (s.code() != absl::StatusCode::kDataLoss) {
    msg = absl::StrCat(absl::StatusCodeToString(s.code()), ": ", msg);
  }
  std::fprintf(stderr, "sandgate %s: %s\n", CommandName().c_str(), TerminalSafe(msg).c_str());
  // A download that does not match its hash is not a usage problem: the files are not good.
  return s.code() == absl::StatusCode::kDataLoss ? kExitRunFailed : kExitUsage;
}
int Fail(const grpc::Status& s) { return Fail(FromGrpc(s)); }

class Client {
 public:
  static std::unique_ptr<Client> Connect(const Address& addr, std::string token, Interrupt* interrupt) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    auto channel = grpc::CreateCustomChannel(addr.GrpcTarget(), grpc::InsecureChannelCredentials(), args);
    return std::unique_ptr<Client>(new Client(v1::Sandgate::NewStub(channel), std::move(token), interrupt));
  }
  void Prepare(grpc::ClientContext* ctx) const {
    if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
  }
  v1::Sandgate::Stub& stub() { return *stub_; }
  Interrupt& interrupt() { return *interrupt_; }

 private:
  Client(std::unique_ptr<v1::Sandgate::Stub> stub, std::string token, Interrupt* interrupt)
      : stub_(std::move(stub)), token_(std::move(token)), interrupt_(interrupt) {}
  std::unique_ptr<v1::Sandgate::Stub> stub_;
  std::string token_;
  Interrupt* const interrupt_;  // lives as long as the process
};

// Stops watching the call on every return path.
class Watching {
 public:
  Watching(Interrupt* interrupt, grpc::ClientContext* ctx) : interrupt_(interrupt) {
    if (interrupt_ != nullptr) interrupt_->Watch(ctx);
  }
  ~Watching() {
    if (interrupt_ != nullptr) interrupt_->Watch(nullptr);
  }
  Watching(const Watching&) = delete;
  Watching& operator=(const Watching&) = delete;

 private:
  Interrupt* const interrupt_;
};

bool MakeDirs(const std::string& dir) {
  std::string partial;
  for (const auto& part : absl::StrSplit(dir, '/')) {
    partial += std::string(part) + "/";
    if (part.empty() || part == ".") continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// Receives one download stream (ArtifactChunk or FileChunk) into `path` through a
// DownloadSink: nothing appears under `path` unless the stream ended cleanly and the bytes
// match the sha256 its last chunk carries (and `expected_sha256`, when known).
template <typename Chunk>
absl::Status ReceiveFile(grpc::ClientContext& ctx, grpc::ClientReaderInterface<Chunk>& reader,
                         const std::string& path, absl::string_view expected_sha256 = "") {
  absl::StatusOr<std::unique_ptr<DownloadSink>> sink = DownloadSink::Create(path);
  absl::Status written = sink.status();
  Chunk chunk;
  while (written.ok() && reader.Read(&chunk))
    written = (*sink)->Add(chunk.data(), chunk.total_size(), chunk.sha256());
  if (!written.ok()) ctx.TryCancel();
  grpc::Status st = reader.Finish();
  if (!written.ok()) return written;
  if (!st.ok()) return FromGrpc(st);
  return (*sink)->Commit(expected_sha256);
}

// Writes `data` to `path` through a temporary name, so that a half-written file never
// stands under the final name.
absl::Status WriteFileAtomically(const std::string& path, const std::string& data) {
  absl::StatusOr<std::unique_ptr<DownloadSink>> sink = DownloadSink::Create(path);
  if (!sink.ok()) return sink.status();
  if (absl::Status st = (*sink)->Add(data, data.size(), Sha256::Hex(data)); !st.ok()) return st;
  return (*sink)->Commit();
}

// Streams a run's events to `on_event` until the stream ends. Returns the final status.
grpc::Status FollowEvents(Client& client, Interrupt* interrupt, const std::string& run_id, int64_t after,
                          bool follow, const std::function<void(const v1::Event&)>& on_event) {
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  Watching watching(interrupt, &ctx);
  v1::StreamEventsRequest req;
  req.set_run_id(run_id);
  req.set_after_seq(after);
  req.set_follow(follow);
  auto reader = client.stub().StreamEvents(&ctx, req);
  v1::Event e;
  while (reader->Read(&e)) on_event(e);
  return reader->Finish();
}

// Follows a run from `after` to its run.finished, reconnecting from the last seq seen when
// the daemon is unavailable or ends the stream (a restarting daemon keeps waiting runs):
// nothing is missed or seen twice. Gives up after about a minute without the daemon. Sets
// *finished when run.finished arrived; otherwise returns why not (OK when interrupted).
grpc::Status FollowToEnd(Client& client, const std::string& run_id, int64_t after, bool* finished,
                         const std::function<void(const v1::Event&)>& on_event) {
  int64_t last = after;
  *finished = false;
  grpc::Status st;
  for (int attempt = 0; !*finished && attempt < 60; ++attempt) {
    st = FollowEvents(client, &client.interrupt(), run_id, last, true, [&](const v1::Event& e) {
      if (e.seq() > 0) last = e.seq();
      if (e.type() == "run.finished") *finished = true;
      on_event(e);
    });
    if (client.interrupt().fired()) return grpc::Status::OK;
    if (!st.ok() && !*finished) {
      // Not interrupted here, so a CANCELLED came from a server shutting down.
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE &&
          st.error_code() != grpc::StatusCode::CANCELLED) {
        return st;
      }
      if (attempt == 0) {
        std::fprintf(stderr, "sandgate: the daemon is unavailable (%s); reconnecting…\n",
                     TerminalSafe(st.error_message()).c_str());
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  return *finished ? grpc::Status::OK : st;
}

// The run's artifacts, each checked against the sha256 of the run's record and of its
// stream, into `dir`.
absl::Status DownloadArtifacts(Client& client, const v1::Run& run, const std::string& dir) {
  for (const v1::Artifact& a : run.artifacts()) {
    if (a.name().empty() || a.name() == "." || a.name() == ".." || absl::StrContains(a.name(), '/')) {
      return absl::DataLossError(
          absl::StrCat("the daemon named an artifact '", a.name(), "'; not a file name"));
    }
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    Watching watching(&client.interrupt(), &ctx);
    v1::DownloadArtifactRequest req;
    req.set_run_id(run.id());
    req.set_name(a.name());
    auto reader = client.stub().DownloadArtifact(&ctx, req);
    if (absl::Status st = ReceiveFile(ctx, *reader, dir + "/" + a.name(), a.sha256()); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// The run's artifacts (DownloadArtifacts) and its events as events.jsonl, into `dir`.
absl::Status Download(Client& client, const v1::Run& run, const std::string& dir) {
  if (absl::Status st = DownloadArtifacts(client, run, dir); !st.ok()) return st;
  std::string jsonl;
  grpc::Status st = FollowEvents(client, &client.interrupt(), run.id(), 0, false,
                                 [&](const v1::Event& e) { absl::StrAppend(&jsonl, ToJson(e), "\n"); });
  if (!st.ok()) return FromGrpc(st);
  return WriteFileAtomically(dir + "/events.jsonl", jsonl);
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::string data;
  absl::Status st = ReadFileChunks(path, 1 << 20, [&](absl::string_view chunk) {
    data.append(chunk.data(), chunk.size());
    return true;
  });
  if (!st.ok()) return st;
  return data;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// --env, --setup, --network, --allow, --memory-mib, --idle, --lifetime, --command-timeout.
int ParseSandbox(const Args& args, v1::SandboxSpec* sandbox) {
  for (const std::string& kv : args.All("--env")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return Usage("--env needs NAME=VALUE, got '" + kv + "'");
    (*sandbox->mutable_env())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& cmd : args.All("--setup")) sandbox->add_setup_commands(cmd);
  if (args.Has("--network")) {
    std::string mode = args.Get("--network");
    v1::NetworkPolicy::Mode m;
    if (mode == "disabled") {
      m = v1::NetworkPolicy::MODE_DISABLED;
    } else if (mode == "restricted") {
      m = v1::NetworkPolicy::MODE_RESTRICTED;
    } else if (mode == "enabled") {
      m = v1::NetworkPolicy::MODE_ENABLED;
    } else {
      return Usage("--network takes disabled, restricted or enabled, got '" + mode + "'");
    }
    sandbox->mutable_network()->set_mode(m);
  }
  for (const std::string& d : args.All("--allow")) sandbox->mutable_network()->add_allowed_domains(d);
  if (args.Has("--memory-mib")) {
    uint64_t mib;
    if (!absl::SimpleAtoi(args.Get("--memory-mib"), &mib) || mib == 0) return Usage("--memory-mib needs a positive number");
    sandbox->set_memory_bytes(mib << 20);
  }
  struct DurationFlag {
    const char* flag;
    google::protobuf::Duration* (v1::SandboxSpec::*field)();
  };
  for (const DurationFlag& d : {DurationFlag{"--idle", &v1::SandboxSpec::mutable_idle_timeout},
                                DurationFlag{"--lifetime", &v1::SandboxSpec::mutable_max_lifetime},
                                DurationFlag{"--command-timeout", &v1::SandboxSpec::mutable_command_timeout}}) {
    if (!args.Has(d.flag)) continue;
    int64_t seconds;
    if (!absl::SimpleAtoi(args.Get(d.flag), &seconds) || seconds <= 0) {
      return Usage(std::string(d.flag) + " needs a positive number of seconds");
    }
    (sandbox->*d.field)()->set_seconds(seconds);
  }
  return 0;
}

int CmdRun(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("run needs exactly one input file");
  const std::string& path = args.positional[0];
  bool json = args.Has("--json");
  v1::RunAnalysisRequest req;
  req.set_playbook(args.Get("--playbook"));
  req.set_agent(args.Get("--agent"));
  req.set_provider(args.Get("--provider"));
  req.set_model(args.Get("--model"));
  req.set_idempotency_key(args.Get("--idempotency-key"));
  if (args.Has("--timeout")) {
    int64_t s;
    if (!absl::SimpleAtoi(args.Get("--timeout"), &s) || s <= 0) return Usage("--timeout needs a positive number of seconds");
    req.mutable_run_timeout()->set_seconds(s);
  }
  if (args.Has("--session")) {
    for (const std::string& flag : kSandboxFlags) {
      if (args.Has(flag))
        return Usage(flag + " does not apply with --session: the run uses that session's sandbox");
    }
    req.set_session_id(args.Get("--session"));
  } else if (int rc = ParseSandbox(args, req.mutable_sandbox())) {
    return rc;
  }
  absl::StatusOr<std::string> content = ReadAll(path);
  if (!content.ok()) return Usage(std::string(content.status().message()));
  auto* in = req.add_inputs();
  in->set_name(BaseName(path));
  in->set_content(*content);

  v1::Run run;
  {
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    grpc::Status st = client.stub().RunAnalysis(&ctx, req, &run);
    if (!st.ok()) return Fail(st);
  }
  FILE* progress = json ? stderr : stdout;
  std::fprintf(progress, "run %s started for %s\n", TerminalSafe(run.id()).c_str(),
               TerminalSafe(in->name()).c_str());
  std::fflush(progress);
  ProgressPrinter printer(progress);
  bool finished = false;
  // What streamed is the whole log (FollowToEnd sees each event once, in order): events.jsonl
  // and the run's end are known from it even if the daemon is gone the moment the run ended,
  // as after a drain.
  std::string jsonl;
  v1::RunFinished ended;
  grpc::Status followed = FollowToEnd(client, run.id(), 0, &finished, [&](const v1::Event& e) {
    if (e.seq() > 0) absl::StrAppend(&jsonl, ToJson(e), "\n");
    if (e.type() == "run.finished") ended = e.run_finished();
    if (json && e.seq() > 0) {
      std::printf("%s\n", ToJson(e).c_str());
      std::fflush(stdout);  // a program reading the pipe sees each event as it happens
    }
    if (!json || e.seq() > 0) printer.Print(e);
  });
  if (!followed.ok()) return Fail(followed);
  if (client.interrupt().fired() && !finished) {
    if (args.Has("--cancel-on-exit")) {
      grpc::ClientContext ctx;
      client.Prepare(&ctx);
      v1::CancelRunRequest creq;
      creq.set_run_id(run.id());
      creq.set_reason("sandgate run interrupted with --cancel-on-exit");
      v1::Run cancelled;
      grpc::Status st = client.stub().CancelRun(&ctx, creq, &cancelled);
      if (!st.ok()) return Fail(st);
      std::fprintf(stderr, "\ncancelled run %s\n", TerminalSafe(run.id()).c_str());
    } else {
      std::fprintf(stderr, "\ndetached; the run goes on. Follow it with: sandgate events %s --follow\n",
                   TerminalSafe(run.id()).c_str());
    }
    return kExitDetached;
  }
  // The run has ended: from here a failing call is a warning, and the exit code follows the
  // run's status (or says that its files are not all there).
  bool saved_all = true;
  auto warn = [&](absl::string_view what, const absl::Status& st) {
    std::fprintf(stderr, "sandgate run: warning: %s: %s\n", std::string(what).c_str(),
                 TerminalSafe(absl::StrCat(absl::StatusCodeToString(st.code()), ": ", st.message())).c_str());
    saved_all = false;
  };
  {
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    v1::GetRunRequest greq;
    greq.set_run_id(run.id());
    v1::Run record;
    grpc::Status st = client.stub().GetRun(&ctx, greq, &record);
    if (st.ok()) {
      run = std::move(record);
    } else {
      warn("the run ended, but its record could not be read, so its artifacts are not downloaded",
           FromGrpc(st));
      run.set_status(ended.status());
      run.set_status_reason(ended.reason());
      *run.mutable_summary() = ended.summary();
      run.clear_artifacts();
    }
  }
  std::string dir = args.Get("--out", "sandgate-" + run.id());
  if (!MakeDirs(dir)) return Usage("cannot create output directory " + dir);
  if (absl::Status st = WriteFileAtomically(dir + "/events.jsonl", jsonl); !st.ok()) {
    warn("events.jsonl", st);
  }
  if (absl::Status st = DownloadArtifacts(client, run, dir); !st.ok()) {
    if (client.interrupt().fired()) return kExitDetached;
    warn("the artifacts", st);
  }
  if (json) {
    std::printf("%s\n", ToJson(run).c_str());
  } else {
    // Whatever the playbook found, as the daemon summarised it: the CLI knows no playbook.
    std::fputs(RenderSummary(run.summary(), dir).c_str(), stdout);
    std::printf("\n%s: %zu artifacts and events.jsonl in %s/\n", StatusName(run.status()).c_str(),
                static_cast<size_t>(run.artifacts_size()), TerminalSafe(dir).c_str());
    if (!run.status_reason().empty()) std::printf("reason: %s\n", TerminalSafe(run.status_reason()).c_str());
  }
  return run.status() == v1::RUN_STATUS_SUCCEEDED && saved_all ? 0 : kExitRunFailed;
}

int CmdEvents(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("events needs a run id");
  int64_t after = 0;
  if (args.Has("--after") && (!absl::SimpleAtoi(args.Get("--after"), &after) || after < 0)) {
    return Usage("--after needs a whole number");
  }
  bool json = args.Has("--json");
  ProgressPrinter printer(stdout);
  auto print = [&](const v1::Event& e) {
    if (e.seq() == 0) return;  // heartbeats
    std::string text = json ? ToJson(e) + "\n" : printer.Render(e);
    if (text.empty()) return;  // nothing to show: no number either
    if (!json) {
      // The seq on the event's first line; its further lines (a command's output, a
      // model's paragraphs) indented under it.
      text = absl::StrCat(absl::StrFormat("%4d ", e.seq()), absl::StrReplaceAll(text, {{"\n", "\n     "}}));
      text.resize(text.size() - 5);
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  bool finished = false;
  // --follow rides out a daemon restart as `run` does.
  grpc::Status st = args.Has("--follow")
                        ? FollowToEnd(client, args.positional[0], after, &finished, print)
                        : FollowEvents(client, &client.interrupt(), args.positional[0], after, false, print);
  if (client.interrupt().fired()) return kExitDetached;
  return st.ok() ? 0 : Fail(st);
}

int CmdRuns(Client& client, const Args& args) {
  uint32_t limit = 20;
  if (args.Has("--limit") && !absl::SimpleAtoi(args.Get("--limit"), &limit)) return Usage("--limit needs a number");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  v1::ListRunsRequest req;
  req.set_page_size(limit);
  v1::ListRunsResponse resp;
  grpc::Status st = client.stub().ListRuns(&ctx, req, &resp);
  if (!st.ok()) return Fail(st);
  if (args.Has("--json")) {
    for (const auto& r : resp.runs()) std::printf("%s\n", ToJson(r).c_str());
    return 0;
  }
  std::printf("%-22s %-10s %-18s %-24s %s\n", "RUN", "STATUS", "PLAYBOOK", "CREATED", "INPUTS");
  for (const auto& r : resp.runs()) {
    std::printf("%-22s %-10s %-18s %-24s %s\n", TerminalSafe(r.id()).c_str(), StatusName(r.status()).c_str(),
                TerminalSafe(r.playbook()).c_str(),
                google::protobuf::util::TimeUtil::ToString(r.created_at()).substr(0, 19).c_str(),
                TerminalSafe(absl::StrJoin(r.input_names(), ",")).c_str());
  }
  return 0;
}

int GetRun(Client& client, const std::string& id, v1::Run* run) {
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  v1::GetRunRequest req;
  req.set_run_id(id);
  grpc::Status st = client.stub().GetRun(&ctx, req, run);
  return st.ok() ? 0 : Fail(st);
}

int CmdGet(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("get needs a run id");
  v1::Run run;
  if (int rc = GetRun(client, args.positional[0], &run)) return rc;
  if (args.Has("--json")) {
    std::printf("%s\n", ToJson(run).c_str());
  } else {
    PrintRun(stdout, run);
  }
  return 0;
}

int CmdCancel(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("cancel needs a run id");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  v1::CancelRunRequest req;
  req.set_run_id(args.positional[0]);
  req.set_reason(args.Get("--reason"));
  v1::Run run;
  grpc::Status st = client.stub().CancelRun(&ctx, req, &run);
  if (!st.ok()) return Fail(st);
  std::printf("run %s: %s\n", TerminalSafe(run.id()).c_str(), StatusName(run.status()).c_str());
  return 0;
}

int CmdDownload(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("download needs a run id");
  v1::Run run;
  if (int rc = GetRun(client, args.positional[0], &run)) return rc;
  std::string dir = args.Get("--out", "sandgate-" + run.id());
  if (!MakeDirs(dir)) return Usage("cannot create output directory " + dir);
  if (absl::Status st = Download(client, run, dir); !st.ok()) return Fail(st);
  std::printf("%d artifacts and events.jsonl in %s/\n", run.artifacts_size(), TerminalSafe(dir).c_str());
  return 0;
}

void PrintSession(const v1::Session& s, bool json) {
  if (json) {
    std::printf("%s\n", ToJson(s).c_str());
    return;
  }
  using google::protobuf::util::TimeUtil;
  std::printf("session    %s\n", TerminalSafe(s.id()).c_str());
  std::printf("status     %s%s\n", v1::SessionStatusLabel(s.status()).c_str(),
              s.status_reason().empty() ? "" : (" (" + TerminalSafe(s.status_reason()) + ")").c_str());
  std::printf("provider   %s  workdir %s  in flight %u\n", TerminalSafe(s.provider()).c_str(),
              TerminalSafe(s.workdir()).c_str(), s.in_flight());
  std::printf("clocks     idle_timeout %s, max_lifetime %s\n", TimeUtil::ToString(s.idle_timeout()).c_str(),
              TimeUtil::ToString(s.max_lifetime()).c_str());
  if (s.has_expires_at()) std::printf("expires    %s unless used\n", TimeUtil::ToString(s.expires_at()).c_str());
  for (const auto& u : s.unenforced()) std::printf("! not enforced: %s\n", TerminalSafe(u).c_str());
}

// How a command of `session exec` ended, for stderr: the exit status alone cannot tell an
// out-of-memory kill from a `kill -9` or a command that exits 137 itself.
std::string HowItEnded(const v1::CommandFinished& f) {
  if (f.timed_out()) return "the command timed out (killed)";
  if (f.oom_killed()) return "the command was killed: out of memory (the session's memory limit)";
  if (f.cancelled()) return "the command was cancelled";
  if (f.signal() != 0)
    return absl::StrCat("the command was killed by signal ", f.signal(), " (", strsignal(f.signal()), ")");
  return "";
}

int ExecStatus(const v1::CommandFinished& f) {
  if (f.timed_out()) return 124;  // as timeout(1)
  if (f.signal() != 0) return 128 + f.signal();
  if (f.oom_killed()) return 128 + SIGKILL;
  return f.exit_code();
}

int SessionExec(Client& client, grpc::ClientContext& ctx, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.size() < 2) return Usage("needs a session id and a command: ID [--] COMMAND [ARG]...");
  v1::ExecRequest req;
  req.set_session_id(p[0]);
  if (p.size() == 2) {
    req.set_command(p[1]);  // one word: a shell command line
  } else {
    for (size_t i = 1; i < p.size(); ++i) req.add_argv(p[i]);
  }
  if (args.Has("--timeout")) {
    int64_t seconds;
    if (!absl::SimpleAtoi(args.Get("--timeout"), &seconds) || seconds <= 0) {
      return Usage("--timeout needs a positive number of seconds");
    }
    req.mutable_timeout()->set_seconds(seconds);
  }
  for (const std::string& kv : args.All("--env")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return Usage("--env needs NAME=VALUE, got '" + kv + "'");
    (*req.mutable_env())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  Watching watching(&client.interrupt(), &ctx);
  auto reader = client.stub().Exec(&ctx, req);
  v1::ExecResponse r;
  int exit_code = 0;
  while (reader->Read(&r)) {
    if (r.has_output()) {
      // The command's own bytes, unescaped: what it prints is what the user asked to see.
      FILE* f = r.output().stream() == v1::CommandOutput::STREAM_STDERR ? stderr : stdout;
      std::fwrite(r.output().data().data(), 1, r.output().data().size(), f);
      std::fflush(f);
    } else if (r.has_expiring()) {
      std::fprintf(stderr, "sandgate: session %s %s at %s; the command is killed then\n",
                   TerminalSafe(r.expiring().session_id()).c_str(),
                   TerminalSafe(r.expiring().reason()).c_str(),
                   google::protobuf::util::TimeUtil::ToString(r.expiring().expires_at()).c_str());
    } else if (r.has_finished()) {
      const auto& fin = r.finished();
      exit_code = ExecStatus(fin);
      if (std::string how = HowItEnded(fin); !how.empty()) {
        std::fprintf(stderr, "sandgate session exec: %s\n", how.c_str());
      }
      if (fin.output_truncated())
        std::fprintf(stderr, "sandgate session exec: output truncated at the cap\n");
    }
  }
  grpc::Status st = reader->Finish();
  if (client.interrupt().fired()) {
    std::fprintf(stderr, "\nsandgate session exec: interrupted\n");
    return kExitDetached;
  }
  if (!st.ok()) return Fail(st);
  return exit_code;  // the command's own exit status
}

int SessionUpload(Client& client, grpc::ClientContext& ctx, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.size() != 2 && p.size() != 3) return Usage("needs ID LOCAL_FILE [WORKSPACE_PATH]");
  const std::string& local = p[1];
  // Size and hash first, so the daemon can refuse a file that did not arrive whole; the
  // file is then read a second time, in chunks (a file changed in between is refused too).
  absl::StatusOr<FileDigest> digest = DigestFile(local);
  if (!digest.ok()) return Usage(std::string(digest.status().message()));
  v1::FileInfo info;
  Watching watching(&client.interrupt(), &ctx);
  auto writer = client.stub().UploadFile(&ctx, &info);
  v1::UploadFileRequest m;
  m.mutable_header()->set_session_id(p[0]);
  m.mutable_header()->set_path(p.size() == 3 ? p[2] : BaseName(local));
  m.mutable_header()->set_size_bytes(digest->size_bytes);
  m.mutable_header()->set_sha256(digest->sha256);
  bool ok = writer->Write(m);
  absl::Status read = ReadFileChunks(local, kUploadChunkBytes, [&](absl::string_view chunk) {
    m.Clear();
    m.set_data(chunk.data(), chunk.size());
    return ok = ok && writer->Write(m);
  });
  // A file that could not be read whole must not be committed: cancel instead of ending.
  if (!read.ok()) ctx.TryCancel();
  if (read.ok() && ok) writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!read.ok()) return Usage(std::string(read.message()));
  if (client.interrupt().fired()) {
    std::fprintf(stderr, "\nsandgate session upload: interrupted; nothing was uploaded\n");
    return kExitDetached;
  }
  if (!st.ok()) return Fail(st);
  std::printf("uploaded %s (%s, sha256 %s)\n", TerminalSafe(info.path()).c_str(),
              HumanBytes(info.size_bytes()).c_str(), TerminalSafe(info.sha256()).c_str());
  return 0;
}

int SessionDownload(Client& client, grpc::ClientContext& ctx, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.size() != 2) return Usage("needs ID WORKSPACE_PATH");
  v1::DownloadFileRequest req;
  req.set_session_id(p[0]);
  req.set_path(p[1]);
  std::string out = args.Get("--out", BaseName(p[1]));
  Watching watching(&client.interrupt(), &ctx);
  auto reader = client.stub().DownloadFile(&ctx, req);
  absl::Status st = ReceiveFile(ctx, *reader, out);
  if (client.interrupt().fired()) {
    std::fprintf(stderr, "\nsandgate session download: interrupted; nothing was saved\n");
    return kExitDetached;
  }
  if (!st.ok()) return Fail(st);
  struct stat sb;
  uint64_t size = stat(out.c_str(), &sb) == 0 ? static_cast<uint64_t>(sb.st_size) : 0;
  std::printf("downloaded %s to %s (%s)\n", TerminalSafe(p[1]).c_str(), TerminalSafe(out).c_str(),
              HumanBytes(size).c_str());
  return 0;
}

int SessionLs(Client& client, grpc::ClientContext& ctx, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.empty() || p.size() > 2) return Usage("needs ID [DIR]");
  v1::ListFilesRequest req;
  req.set_session_id(p[0]);
  if (p.size() > 1) req.set_dir(p[1]);
  v1::ListFilesResponse resp;
  grpc::Status st = client.stub().ListFiles(&ctx, req, &resp);
  if (!st.ok()) return Fail(st);
  for (const auto& f : resp.files()) {
    const char* kind = f.type() == v1::FileInfo::TYPE_DIRECTORY ? "dir "
                       : f.type() == v1::FileInfo::TYPE_SYMLINK ? "link"
                       : f.type() == v1::FileInfo::TYPE_REGULAR ? "file"
                                                                : "other";
    std::printf("%s %10s  %s%s\n", kind, HumanBytes(f.size_bytes()).c_str(), TerminalSafe(f.path()).c_str(),
                f.not_listed().empty()
                    ? ""
                    : absl::StrCat("  (not listed: ", TerminalSafe(f.not_listed()), ")").c_str());
  }
  if (resp.truncated())
    std::fprintf(stderr, "sandgate session ls: the listing stopped early (a cap on entries)\n");
  return 0;
}

// sandgate session create|list|get|exec|upload|download|ls|keepalive|close ...
// args.positional starts after the subcommand: the session id first.
int CmdSession(Client& client, const std::string& sub, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  bool json = args.Has("--json");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  if (sub == "create") {
    if (!p.empty()) return Usage("create takes no arguments, only options");
    v1::CreateSessionRequest req;
    req.set_provider(args.Get("--provider"));
    req.set_idempotency_key(args.Get("--idempotency-key"));
    if (int rc = ParseSandbox(args, req.mutable_sandbox())) return rc;
    v1::Session s;
    grpc::Status st = client.stub().CreateSession(&ctx, req, &s);
    if (!st.ok()) return Fail(st);
    if (json) {
      PrintSession(s, true);
    } else {
      std::printf("%s\n", TerminalSafe(s.id()).c_str());
    }
    return 0;
  }
  if (sub == "list") {
    if (!p.empty()) return Usage("list takes no arguments");
    v1::ListSessionsRequest req;
    req.set_include_closed(args.Has("--all"));
    v1::ListSessionsResponse resp;
    grpc::Status st = client.stub().ListSessions(&ctx, req, &resp);
    if (!st.ok()) return Fail(st);
    for (const auto& s : resp.sessions()) {
      if (json) {
        PrintSession(s, true);
      } else {
        std::printf("%-20s %-16s %-8s in flight %u\n", TerminalSafe(s.id()).c_str(),
                    v1::SessionStatusLabel(s.status()).c_str(), TerminalSafe(s.provider()).c_str(),
                    s.in_flight());
      }
    }
    return 0;
  }
  if (sub == "exec") return SessionExec(client, ctx, args);
  if (sub == "upload") return SessionUpload(client, ctx, args);
  if (sub == "download") return SessionDownload(client, ctx, args);
  if (sub == "ls") return SessionLs(client, ctx, args);
  if (p.size() != 1) return Usage("needs exactly one session id");
  const std::string& id = p[0];
  v1::Session s;
  grpc::Status st;
  if (sub == "get") {
    v1::GetSessionRequest req;
    req.set_session_id(id);
    st = client.stub().GetSession(&ctx, req, &s);
  } else if (sub == "keepalive") {
    v1::KeepAliveRequest req;
    req.set_session_id(id);
    st = client.stub().KeepAlive(&ctx, req, &s);
  } else {
    v1::CloseSessionRequest req;
    req.set_session_id(id);
    req.set_reason(args.Get("--reason"));
    st = client.stub().CloseSession(&ctx, req, &s);
  }
  if (!st.ok()) return Fail(st);
  PrintSession(s, json);
  return 0;
}

// sandgate admin drain | purge --older-than-hours N   (operator tokens only)
int CmdAdmin(Client& client, const std::string& sub, const Args& args) {
  if (!args.positional.empty()) return Usage("takes no arguments");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  if (sub == "drain") {
    v1::DrainResponse resp;
    grpc::Status st = client.stub().Drain(&ctx, v1::DrainRequest(), &resp);
    if (!st.ok()) return Fail(st);
    std::printf("draining: %u active runs are being cancelled; the daemon exits when done\n", resp.active_runs());
    return 0;
  }
  double hours;
  if (!absl::SimpleAtod(args.Get("--older-than-hours", ""), &hours) || hours < 0) {
    return Usage("purge needs --older-than-hours N (0 or more)");
  }
  v1::PurgeRequest req;
  req.mutable_older_than()->set_seconds(static_cast<int64_t>(hours * 3600));
  v1::PurgeResponse resp;
  grpc::Status st = client.stub().Purge(&ctx, req, &resp);
  if (!st.ok()) return Fail(st);
  std::printf("purged %u runs\n", resp.runs_deleted());
  return 0;
}

std::vector<std::string> CommandNames(const std::string& group) {
  std::vector<std::string> names;
  for (const CommandSpec& c : Grammar().commands) {
    if (group.empty() && !absl::StrContains(c.name, ' ')) names.push_back(c.name);
    if (!group.empty() && absl::StartsWith(c.name, group + " "))
      names.push_back(c.name.substr(group.size() + 1));
  }
  return names;
}

int Main(int argc, char** argv) {
  // Before anything else, while this is the only thread: every thread gRPC starts later
  // inherits the blocked signals, and the one waiting thread takes them (client/interrupt.h).
  Interrupt& interrupt = Interrupt::Install(kExitDetached);
  Args args;
  absl::Status parsed = ParseArgs(std::vector<std::string>(argv, argv + argc), Grammar(), &args);
  if (args.spec) CommandName() = args.command;
  if (!parsed.ok()) return Usage(std::string(parsed.message()));
  if (args.version) {
    std::printf("sandgate %s\n", SANDGATE_VERSION);
    return 0;
  }
  if (args.command.empty()) {
    std::fputs(kUsage, args.help ? stdout : stderr);
    return args.help ? 0 : kExitUsage;
  }
  if (!args.spec) {
    std::string near = Nearest(args.command, CommandNames(""));
    return Usage(absl::StrCat("unknown command '", args.command, "'",
                              near.empty() ? "" : absl::StrCat("; did you mean '", near, "'?")));
  }
  if (args.help) {
    std::fputs(args.spec->usage.c_str(), stdout);
    return 0;
  }
  // "session" or "admin" without a subcommand it knows.
  std::vector<std::string> subcommands = CommandNames(args.command);
  if (!subcommands.empty()) {
    if (args.positional.empty()) {
      return Usage(absl::StrCat("needs a subcommand: ", absl::StrJoin(subcommands, ", ")));
    }
    std::string near = Nearest(args.positional[0], subcommands);
    return Usage(absl::StrCat("unknown subcommand '", args.positional[0], "'",
                              near.empty() ? "" : absl::StrCat("; did you mean '", near, "'?")));
  }

  const char* env_addr = std::getenv("SANDGATE_ADDR");
  std::string addr_text = args.Get("--addr", env_addr ? env_addr : "unix:/run/sandgate/sandgated.sock");
  absl::StatusOr<Address> addr = ParseAddress(addr_text);
  if (!addr.ok()) {
    return Usage(absl::StrCat(args.Has("--addr") ? "--addr: " : "SANDGATE_ADDR: ", addr.status().message()));
  }
  std::string token;
  if (args.Has("--token-file")) {
    auto t = ReadAll(args.Get("--token-file"));
    if (!t.ok()) return Usage(std::string(t.status().message()));
    token = std::string(absl::StripAsciiWhitespace(*t));
  } else if (const char* env_token = std::getenv("SANDGATE_TOKEN")) {
    token = env_token;
  }
  auto client = Client::Connect(*addr, token, &interrupt);
  const std::string& c = args.command;
  if (c == "run") return CmdRun(*client, args);
  if (c == "events") return CmdEvents(*client, args);
  if (c == "runs") return CmdRuns(*client, args);
  if (c == "get") return CmdGet(*client, args);
  if (c == "cancel") return CmdCancel(*client, args);
  if (c == "download") return CmdDownload(*client, args);
  if (absl::StartsWith(c, "session ")) return CmdSession(*client, c.substr(8), args);
  if (absl::StartsWith(c, "admin ")) return CmdAdmin(*client, c.substr(6), args);
  return Usage("unknown command");
}

}  // namespace
}  // namespace sandgate::cli

int main(int argc, char** argv) { return sandgate::cli::Main(argc, argv); }
