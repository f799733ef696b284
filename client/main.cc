// sandgate: the command-line client of sandgated. Thin: flags, rendering, file download.
//
//   sandgate run examples/northstar_cloud_financial_statements.csv --out results/
//   sandgate events RUN --follow
//
// Address: --addr, else $SANDGATE_ADDR, else unix:/run/sandgate/sandgated.sock.
// Token: --token-file, else $SANDGATE_TOKEN (never a flag: it would show in `ps`).
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/render.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"
#include "sandgate/v1/labels.h"
#include "sandgate/v1/sandgate.grpc.pb.h"

namespace sandgate::cli {
namespace {

constexpr char kUsage[] = R"(usage: sandgate [--addr ADDR] [--token-file FILE] COMMAND ...

commands:
  run FILE [--out DIR] [--json] [--playbook NAME] [--agent NAME] [--provider NAME]
           [--timeout SECONDS] [--idempotency-key KEY] [--cancel-on-exit]
           [--env NAME=VALUE]... [--setup COMMAND]... [--network disabled|restricted|enabled]
           [--allow DOMAIN]... [--memory-mib N]
      start a run, show its progress, download its artifacts and events.jsonl into DIR
      (default ./sandgate-<run id>), print a summary; exit 0 only if the run succeeded.
      Playbooks: financial-analyst (default; FILE is a CSV of yearly statements) and
      sandbox-probe (checks the sandbox itself; FILE is any file it should read).
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

environment: SANDGATE_ADDR (default unix:/run/sandgate/sandgated.sock), SANDGATE_TOKEN
exit codes: 0 success, 1 the run did not succeed, 2 usage or connection error, 130 detached
)";

constexpr int kExitRunFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitDetached = 130;
constexpr int kMaxMessageBytes = 80 << 20;

struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> options;  // --name -> value ("" for switches)
  bool Has(const std::string& name) const { return options.count(name) > 0; }
  // The last value given for `name`.
  std::string Get(const std::string& name, const std::string& def = "") const {
    auto range = options.equal_range(name);
    return range.first == range.second ? def : std::prev(range.second)->second;
  }
  std::vector<std::string> All(const std::string& name) const {
    std::vector<std::string> values;
    for (auto [it, end] = options.equal_range(name); it != end; ++it) values.push_back(it->second);
    return values;
  }
};

int Usage(const std::string& msg) {
  std::fprintf(stderr, "sandgate: %s\n(see sandgate --help)\n", msg.c_str());
  return kExitUsage;
}

int RpcError(const std::string& what, const grpc::Status& s) {
  static const char* kCodes[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                 "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                 "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  int code = s.error_code();
  std::fprintf(stderr, "sandgate: %s: %s: %s\n", what.c_str(),
               code >= 0 && code <= 16 ? kCodes[code] : "ERROR", s.error_message().c_str());
  return kExitUsage;
}

class Client {
 public:
  static std::unique_ptr<Client> Connect(const std::string& addr, std::string token) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    auto channel = grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args);
    return std::unique_ptr<Client>(new Client(v1::Sandgate::NewStub(channel), std::move(token)));
  }
  void Prepare(grpc::ClientContext* ctx) const {
    if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
  }
  v1::Sandgate::Stub& stub() { return *stub_; }

 private:
  Client(std::unique_ptr<v1::Sandgate::Stub> stub, std::string token)
      : stub_(std::move(stub)), token_(std::move(token)) {}
  std::unique_ptr<v1::Sandgate::Stub> stub_;
  std::string token_;
};

// Ctrl-C: a watcher thread (signals blocked everywhere else) cancels the active stream.
class Interrupt {
 public:
  Interrupt() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] {
      int sig;
      if (sigwait(&set_, &sig) != 0) return;
      std::lock_guard<std::mutex> lock(mu_);
      fired_ = true;
      if (ctx_) ctx_->TryCancel();
    });
    thread_.detach();
  }
  void Watch(grpc::ClientContext* ctx) {
    std::lock_guard<std::mutex> lock(mu_);
    ctx_ = ctx;
    if (fired_ && ctx_) ctx_->TryCancel();
  }
  bool fired() {
    std::lock_guard<std::mutex> lock(mu_);
    return fired_;
  }

 private:
  sigset_t set_;
  std::thread thread_;
  std::mutex mu_;
  grpc::ClientContext* ctx_ = nullptr;
  bool fired_ = false;
};

bool WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  return static_cast<bool>(out);
}

bool MakeDirs(const std::string& dir) {
  std::string partial;
  for (const auto& part : absl::StrSplit(dir, '/')) {
    partial += std::string(part) + "/";
    if (part.empty() || part == ".") continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// Streams a run's events to `on_event` until the stream ends. Returns the final status.
grpc::Status FollowEvents(Client& client, Interrupt* interrupt, const std::string& run_id,
                          int64_t after, bool follow,
                          const std::function<void(const v1::Event&)>& on_event) {
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  if (interrupt) interrupt->Watch(&ctx);
  v1::StreamEventsRequest req;
  req.set_run_id(run_id);
  req.set_after_seq(after);
  req.set_follow(follow);
  auto reader = client.stub().StreamEvents(&ctx, req);
  v1::Event e;
  while (reader->Read(&e)) on_event(e);
  grpc::Status st = reader->Finish();
  if (interrupt) interrupt->Watch(nullptr);
  return st;
}

// Follows a run from `after` to its run.finished, reconnecting from the last seq seen when
// the daemon is unavailable or ends the stream (a restarting daemon keeps waiting runs):
// nothing is missed or seen twice. Gives up after about a minute without the daemon. Sets
// *finished when run.finished arrived; otherwise returns why not (OK when interrupted).
grpc::Status FollowToEnd(Client& client, Interrupt* interrupt, const std::string& run_id,
                         int64_t after, bool* finished,
                         const std::function<void(const v1::Event&)>& on_event) {
  int64_t last = after;
  *finished = false;
  grpc::Status st;
  for (int attempt = 0; !*finished && attempt < 60; ++attempt) {
    st = FollowEvents(client, interrupt, run_id, last, true, [&](const v1::Event& e) {
      if (e.seq() > 0) last = e.seq();
      if (e.type() == "run.finished") *finished = true;
      on_event(e);
    });
    if (interrupt != nullptr && interrupt->fired()) return grpc::Status::OK;
    if (!st.ok() && !*finished) {
      // Not interrupted here, so a CANCELLED came from a server shutting down.
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE && st.error_code() != grpc::StatusCode::CANCELLED) return st;
      if (attempt == 0) std::fprintf(stderr, "sandgate: the daemon is unavailable (%s); reconnecting…\n", st.error_message().c_str());
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  return *finished ? grpc::Status::OK : st;
}

grpc::Status Download(Client& client, const v1::Run& run, const std::string& dir) {
  for (const v1::Artifact& a : run.artifacts()) {
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    v1::DownloadArtifactRequest req;
    req.set_run_id(run.id());
    req.set_name(a.name());
    auto reader = client.stub().DownloadArtifact(&ctx, req);
    std::string data;
    v1::ArtifactChunk chunk;
    while (reader->Read(&chunk)) data += chunk.data();
    grpc::Status st = reader->Finish();
    if (!st.ok()) return st;
    if (!WriteFile(dir + "/" + a.name(), data)) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "cannot write " + dir + "/" + a.name());
    }
  }
  std::string jsonl;
  grpc::Status st = FollowEvents(client, nullptr, run.id(), 0, false, [&](const v1::Event& e) {
    absl::StrAppend(&jsonl, ToJson(e), "\n");
  });
  if (!st.ok()) return st;
  if (!WriteFile(dir + "/events.jsonl", jsonl)) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "cannot write " + dir + "/events.jsonl");
  }
  return grpc::Status::OK;
}

std::vector<std::string> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else if (c != '\r') {
      cells.back() += c;
    }
  }
  return cells;
}

std::vector<std::vector<std::string>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(SplitCsvLine(line));
  }
  return rows;
}

// The latest year's key metrics and the flags, from the downloaded artifacts.
void PrintFinancialSummary(const std::string& dir) {
  auto metrics = ReadCsv(dir + "/calculated_metrics.csv");
  if (metrics.size() >= 2) {
    const auto& header = metrics[0];
    const auto& last = metrics.back();
    std::printf("\nlatest year %s\n", last[0].c_str());
    static const char* kKey[] = {"revenue_growth", "gross_margin", "operating_margin", "net_margin",
                                 "current_ratio", "liabilities_to_equity", "free_cash_flow",
                                 "fcf_margin", "receivables_growth"};
    for (const char* key : kKey) {
      for (size_t i = 0; i < header.size() && i < last.size(); ++i) {
        if (header[i] != key) continue;
        double v;
        std::string shown = last[i].empty() ? "n/a" : last[i];
        bool ratio = std::string(key) != "free_cash_flow" && std::string(key) != "current_ratio" &&
                     std::string(key) != "liabilities_to_equity";
        if (!last[i].empty() && absl::SimpleAtod(last[i], &v)) {
          shown = ratio ? absl::StrFormat("%.1f%%", v * 100) : absl::StrFormat("%.2f", v);
        }
        std::printf("  %-22s %s\n", key, shown.c_str());
      }
    }
  }
  auto flags = ReadCsv(dir + "/unusual_movements.csv");
  if (flags.size() >= 2 && metrics.size() >= 2) {
    const std::string& latest = metrics.back()[0];
    size_t in_latest = 0;
    for (size_t r = 1; r < flags.size(); ++r) in_latest += flags[r][0] == latest ? 1 : 0;
    std::printf("\nunusual movements: %zu in all, %zu in %s\n", flags.size() - 1, in_latest,
                latest.c_str());
    for (size_t r = 1; r < flags.size(); ++r) {
      const auto& f = flags[r];
      double change;
      if (f.size() < 6 || f[0] != latest) continue;
      // Growth rules move by a percentage; the margin and receivables rules by points.
      bool points = f[2] != "yoy_move_15pct";
      std::string shown = f[5];
      if (absl::SimpleAtod(f[5], &change)) {
        shown = absl::StrFormat(points ? "%+.1f pp" : "%+.1f%%", change * 100);
      }
      std::printf("  %-28s %-34s %s\n", f[1].c_str(), f[2].c_str(), shown.c_str());
    }
  }
}

// The probe's findings, from the downloaded checks.json.
void PrintProbeSummary(const std::string& dir) {
  std::ifstream in(dir + "/checks.json");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!doc.is_object() || !doc.contains("facts")) return;
  const auto& f = doc["facts"];
  auto str = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  std::printf("\nsandbox: %s, kernel %s, python %s, node %s, cwd %s, uid %s\n", str(f["os"]).c_str(),
              str(f["kernel"]).c_str(), str(f["python"]).c_str(),
              f["node"].is_string() ? f["node"].get<std::string>().c_str() : "not available",
              str(f["cwd"]).c_str(), str(f["uid"]).c_str());
  if (doc.contains("network") && doc["network"].is_object()) {
    const auto& n = doc["network"];
    std::printf("network (%s): %s exit %s: %s\n", str(doc.value("expected_network", nlohmann::json("?"))).c_str(),
                str(n.value("tool", nlohmann::json("?"))).c_str(), str(n.value("exit_code", nlohmann::json())).c_str(),
                str(n.value("message", nlohmann::json(""))).c_str());
  }
  if (doc.contains("checks") && doc["checks"].is_array()) {
    for (const auto& c : doc["checks"]) {
      if (!c.is_object()) continue;
      std::printf("  %s %-16s %s\n", c.value("ok", false) ? "ok  " : "FAIL", str(c.value("name", nlohmann::json(""))).c_str(),
                  str(c.value("detail", nlohmann::json(""))).c_str());
    }
  }
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
  req.set_idempotency_key(args.Get("--idempotency-key"));
  if (args.Has("--timeout")) {
    int64_t s;
    if (!absl::SimpleAtoi(args.Get("--timeout"), &s) || s <= 0) return Usage("--timeout needs a positive number of seconds");
    req.mutable_run_timeout()->set_seconds(s);
  }
  if (args.Has("--session")) {
    for (const char* flag : {"--env", "--setup", "--network", "--allow", "--memory-mib", "--idle",
                             "--lifetime", "--command-timeout"}) {
      if (args.Has(flag)) return Usage(std::string(flag) + " does not apply with --session: the run uses that session's sandbox");
    }
    req.set_session_id(args.Get("--session"));
  } else if (int rc = ParseSandbox(args, req.mutable_sandbox())) {
    return rc;
  }
  absl::StatusOr<std::string> content = ReadAll(path);
  if (!content.ok()) return Usage(std::string(content.status().message()));
  auto* in = req.add_inputs();
  in->set_name(path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1));
  in->set_content(*content);

  Interrupt interrupt;
  v1::Run run;
  {
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    grpc::Status st = client.stub().RunAnalysis(&ctx, req, &run);
    if (!st.ok()) return RpcError("run", st);
  }
  FILE* progress = json ? stderr : stdout;
  std::fprintf(progress, "run %s started for %s\n", run.id().c_str(), in->name().c_str());
  ProgressPrinter printer(progress);
  bool finished = false;
  grpc::Status followed = FollowToEnd(client, &interrupt, run.id(), 0, &finished, [&](const v1::Event& e) {
    if (json && e.seq() > 0) std::printf("%s\n", ToJson(e).c_str());
    if (!json || e.seq() > 0) printer.Print(e);
  });
  if (!followed.ok()) return RpcError("events", followed);
  if (interrupt.fired() && !finished) {
    if (args.Has("--cancel-on-exit")) {
      grpc::ClientContext ctx;
      client.Prepare(&ctx);
      v1::CancelRunRequest creq;
      creq.set_run_id(run.id());
      creq.set_reason("sandgate run interrupted with --cancel-on-exit");
      v1::Run cancelled;
      grpc::Status st = client.stub().CancelRun(&ctx, creq, &cancelled);
      if (!st.ok()) return RpcError("cancel", st);
      std::fprintf(stderr, "\ncancelled run %s\n", run.id().c_str());
    } else {
      std::fprintf(stderr, "\ndetached; the run goes on. Follow it with: sandgate events %s --follow\n",
                   run.id().c_str());
    }
    return kExitDetached;
  }
  {
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    v1::GetRunRequest greq;
    greq.set_run_id(run.id());
    grpc::Status st = client.stub().GetRun(&ctx, greq, &run);
    if (!st.ok()) return RpcError("get", st);
  }
  std::string dir = args.Get("--out", "sandgate-" + run.id());
  if (!MakeDirs(dir)) return Usage("cannot create output directory " + dir);
  grpc::Status st = Download(client, run, dir);
  if (!st.ok()) return RpcError("download", st);
  if (json) {
    std::printf("%s\n", ToJson(run).c_str());
  } else {
    if (run.playbook() == "financial-analyst") PrintFinancialSummary(dir);
    if (run.playbook() == "sandbox-probe") PrintProbeSummary(dir);
    std::printf("\n%s: %zu artifacts and events.jsonl in %s/\n", StatusName(run.status()).c_str(),
                static_cast<size_t>(run.artifacts_size()), dir.c_str());
    if (!run.status_reason().empty()) std::printf("reason: %s\n", run.status_reason().c_str());
  }
  return run.status() == v1::RUN_STATUS_SUCCEEDED ? 0 : kExitRunFailed;
}

int CmdEvents(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("events needs a run id");
  int64_t after = 0;
  if (args.Has("--after") && (!absl::SimpleAtoi(args.Get("--after"), &after) || after < 0)) {
    return Usage("--after needs a whole number");
  }
  bool json = args.Has("--json");
  Interrupt interrupt;
  ProgressPrinter printer(stdout);
  auto print = [&](const v1::Event& e) {
    if (json) {
      if (e.seq() > 0) std::printf("%s\n", ToJson(e).c_str());
    } else {
      if (e.seq() > 0) std::printf("%4lld ", static_cast<long long>(e.seq()));
      printer.Print(e);
    }
    std::fflush(stdout);
  };
  bool finished = false;
  // --follow rides out a daemon restart as `run` does.
  grpc::Status st = args.Has("--follow")
                        ? FollowToEnd(client, &interrupt, args.positional[0], after, &finished, print)
                        : FollowEvents(client, &interrupt, args.positional[0], after, false, print);
  if (interrupt.fired()) return kExitDetached;
  return st.ok() ? 0 : RpcError("events", st);
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
  if (!st.ok()) return RpcError("runs", st);
  if (args.Has("--json")) {
    for (const auto& r : resp.runs()) std::printf("%s\n", ToJson(r).c_str());
    return 0;
  }
  std::printf("%-22s %-10s %-18s %-24s %s\n", "RUN", "STATUS", "PLAYBOOK", "CREATED", "INPUTS");
  for (const auto& r : resp.runs()) {
    std::string inputs;
    for (const auto& n : r.input_names()) absl::StrAppend(&inputs, inputs.empty() ? "" : ",", n);
    std::printf("%-22s %-10s %-18s %-24s %s\n", r.id().c_str(), StatusName(r.status()).c_str(),
                r.playbook().c_str(),
                google::protobuf::util::TimeUtil::ToString(r.created_at()).substr(0, 19).c_str(),
                inputs.c_str());
  }
  return 0;
}

int GetRun(Client& client, const std::string& id, v1::Run* run) {
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  v1::GetRunRequest req;
  req.set_run_id(id);
  grpc::Status st = client.stub().GetRun(&ctx, req, run);
  return st.ok() ? 0 : RpcError("get", st);
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
  if (!st.ok()) return RpcError("cancel", st);
  std::printf("run %s: %s\n", run.id().c_str(), StatusName(run.status()).c_str());
  return 0;
}

int CmdDownload(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("download needs a run id");
  v1::Run run;
  if (int rc = GetRun(client, args.positional[0], &run)) return rc;
  std::string dir = args.Get("--out", "sandgate-" + run.id());
  if (!MakeDirs(dir)) return Usage("cannot create output directory " + dir);
  grpc::Status st = Download(client, run, dir);
  if (!st.ok()) return RpcError("download", st);
  std::printf("%d artifacts and events.jsonl in %s/\n", run.artifacts_size(), dir.c_str());
  return 0;
}

void PrintSession(const v1::Session& s, bool json) {
  if (json) {
    std::printf("%s\n", ToJson(s).c_str());
    return;
  }
  using google::protobuf::util::TimeUtil;
  std::printf("session    %s\n", s.id().c_str());
  std::printf("status     %s%s\n", v1::SessionStatusLabel(s.status()).c_str(),
              s.status_reason().empty() ? "" : (" (" + s.status_reason() + ")").c_str());
  std::printf("provider   %s  workdir %s  in flight %u\n", s.provider().c_str(), s.workdir().c_str(), s.in_flight());
  std::printf("clocks     idle_timeout %s, max_lifetime %s\n", TimeUtil::ToString(s.idle_timeout()).c_str(),
              TimeUtil::ToString(s.max_lifetime()).c_str());
  if (s.has_expires_at()) std::printf("expires    %s unless used\n", TimeUtil::ToString(s.expires_at()).c_str());
  for (const auto& u : s.unenforced()) std::printf("! not enforced: %s\n", u.c_str());
}

// sandgate session create|list|get|exec|upload|download|ls|keepalive|close ...
int CmdSession(Client& client, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.empty()) return Usage("session needs a subcommand: create, list, get, exec, upload, download, ls, keepalive, close");
  const std::string& sub = p[0];
  bool json = args.Has("--json");
  auto need = [&](size_t n, const char* usage) { return p.size() == n ? 0 : Usage(std::string("usage: sandgate session ") + usage); };
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  if (sub == "create") {
    if (int rc = need(1, "create [--provider NAME] [--idle S] [--lifetime S] [--env K=V]... [--setup CMD]... [--idempotency-key K]")) return rc;
    v1::CreateSessionRequest req;
    req.set_provider(args.Get("--provider"));
    req.set_idempotency_key(args.Get("--idempotency-key"));
    if (int rc = ParseSandbox(args, req.mutable_sandbox())) return rc;
    v1::Session s;
    grpc::Status st = client.stub().CreateSession(&ctx, req, &s);
    if (!st.ok()) return RpcError("session create", st);
    if (json) {
      PrintSession(s, true);
    } else {
      std::printf("%s\n", s.id().c_str());
    }
    return 0;
  }
  if (sub == "list") {
    v1::ListSessionsRequest req;
    req.set_include_closed(args.Has("--all"));
    v1::ListSessionsResponse resp;
    grpc::Status st = client.stub().ListSessions(&ctx, req, &resp);
    if (!st.ok()) return RpcError("session list", st);
    for (const auto& s : resp.sessions()) {
      if (json) {
        PrintSession(s, true);
      } else {
        std::printf("%-20s %-16s %-8s in flight %u\n", s.id().c_str(), v1::SessionStatusLabel(s.status()).c_str(),
                    s.provider().c_str(), s.in_flight());
      }
    }
    return 0;
  }
  if (p.size() < 2) return Usage("session " + sub + " needs a session id");
  const std::string& id = p[1];
  if (sub == "get" || sub == "keepalive" || sub == "close") {
    if (int rc = need(2, (sub + " ID").c_str())) return rc;
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
    if (!st.ok()) return RpcError("session " + sub, st);
    PrintSession(s, json);
    return 0;
  }
  if (sub == "exec") {
    if (p.size() < 3) return Usage("usage: sandgate session exec ID [--] COMMAND [ARG]...");
    v1::ExecRequest req;
    req.set_session_id(id);
    if (p.size() == 3) {
      req.set_command(p[2]);  // one word: a shell command line
    } else {
      for (size_t i = 2; i < p.size(); ++i) req.add_argv(p[i]);
    }
    if (args.Has("--timeout")) {
      int64_t seconds;
      if (!absl::SimpleAtoi(args.Get("--timeout"), &seconds) || seconds <= 0) return Usage("--timeout needs a positive number of seconds");
      req.mutable_timeout()->set_seconds(seconds);
    }
    for (const std::string& kv : args.All("--env")) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) return Usage("--env needs NAME=VALUE, got '" + kv + "'");
      (*req.mutable_env())[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    Interrupt interrupt;
    interrupt.Watch(&ctx);
    auto reader = client.stub().Exec(&ctx, req);
    v1::ExecResponse r;
    int exit_code = 0;
    while (reader->Read(&r)) {
      if (r.has_output()) {
        FILE* f = r.output().stream() == v1::CommandOutput::STREAM_STDERR ? stderr : stdout;
        std::fwrite(r.output().data().data(), 1, r.output().data().size(), f);
        std::fflush(f);
      } else if (r.has_expiring()) {
        std::fprintf(stderr, "sandgate: session %s %s at %s; the command is killed then\n",
                     r.expiring().session_id().c_str(), r.expiring().reason().c_str(),
                     google::protobuf::util::TimeUtil::ToString(r.expiring().expires_at()).c_str());
      } else if (r.has_finished()) {
        const auto& fin = r.finished();
        exit_code = fin.timed_out() ? 124 : fin.signal() ? 128 + fin.signal() : fin.exit_code();
        if (fin.timed_out()) std::fprintf(stderr, "sandgate: the command timed out\n");
        if (fin.output_truncated()) std::fprintf(stderr, "sandgate: output truncated at the cap\n");
      }
    }
    interrupt.Watch(nullptr);
    grpc::Status st = reader->Finish();
    if (!st.ok()) return RpcError("session exec", st);
    return exit_code;  // the command's own exit status
  }
  if (sub == "upload") {
    if (p.size() != 3 && p.size() != 4) return Usage("usage: sandgate session upload ID LOCAL_FILE [WORKSPACE_PATH]");
    absl::StatusOr<std::string> data = ReadAll(p[2]);
    if (!data.ok()) return Usage(std::string(data.status().message()));
    std::string remote = p.size() == 4 ? p[3] : p[2].substr(p[2].rfind('/') == std::string::npos ? 0 : p[2].rfind('/') + 1);
    v1::FileInfo info;
    auto writer = client.stub().UploadFile(&ctx, &info);
    v1::UploadFileRequest m;
    m.mutable_header()->set_session_id(id);
    m.mutable_header()->set_path(remote);
    bool ok = writer->Write(m);
    constexpr size_t kChunk = 1 << 20;
    for (size_t off = 0; ok && off < data->size(); off += kChunk) {
      m.Clear();
      m.set_data(data->substr(off, kChunk));
      ok = writer->Write(m);
    }
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    if (!st.ok()) return RpcError("session upload", st);
    std::printf("uploaded %s (%s, sha256 %s)\n", info.path().c_str(), HumanBytes(info.size_bytes()).c_str(), info.sha256().c_str());
    return 0;
  }
  if (sub == "download") {
    if (int rc = need(3, "download ID WORKSPACE_PATH [--out FILE]")) return rc;
    v1::DownloadFileRequest req;
    req.set_session_id(id);
    req.set_path(p[2]);
    auto reader = client.stub().DownloadFile(&ctx, req);
    std::string data;
    v1::FileChunk c;
    while (reader->Read(&c)) data += c.data();
    grpc::Status st = reader->Finish();
    if (!st.ok()) return RpcError("session download", st);
    std::string out = args.Get("--out", p[2].substr(p[2].rfind('/') == std::string::npos ? 0 : p[2].rfind('/') + 1));
    if (!WriteFile(out, data)) return Usage("cannot write " + out);
    std::printf("downloaded %s to %s (%s)\n", p[2].c_str(), out.c_str(), HumanBytes(data.size()).c_str());
    return 0;
  }
  if (sub == "ls") {
    v1::ListFilesRequest req;
    req.set_session_id(id);
    if (p.size() > 2) req.set_dir(p[2]);
    v1::ListFilesResponse resp;
    grpc::Status st = client.stub().ListFiles(&ctx, req, &resp);
    if (!st.ok()) return RpcError("session ls", st);
    for (const auto& f : resp.files()) {
      const char* kind = f.type() == v1::FileInfo::TYPE_DIRECTORY ? "dir " : f.type() == v1::FileInfo::TYPE_SYMLINK ? "link" : f.type() == v1::FileInfo::TYPE_REGULAR ? "file" : "other";
      std::printf("%s %10s  %s\n", kind, HumanBytes(f.size_bytes()).c_str(), f.path().c_str());
    }
    return 0;
  }
  return Usage("unknown session subcommand '" + sub + "'");
}

// sandgate admin drain | purge --older-than-hours N   (operator tokens only)
int CmdAdmin(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("usage: sandgate admin drain | purge --older-than-hours N");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  if (args.positional[0] == "drain") {
    v1::DrainResponse resp;
    grpc::Status st = client.stub().Drain(&ctx, v1::DrainRequest(), &resp);
    if (!st.ok()) return RpcError("admin drain", st);
    std::printf("draining: %u active runs are being cancelled; the daemon exits when done\n", resp.active_runs());
    return 0;
  }
  if (args.positional[0] == "purge") {
    double hours;
    if (!absl::SimpleAtod(args.Get("--older-than-hours", ""), &hours) || hours < 0) {
      return Usage("purge needs --older-than-hours N (0 or more)");
    }
    v1::PurgeRequest req;
    req.mutable_older_than()->set_seconds(static_cast<int64_t>(hours * 3600));
    v1::PurgeResponse resp;
    grpc::Status st = client.stub().Purge(&ctx, req, &resp);
    if (!st.ok()) return RpcError("admin purge", st);
    std::printf("purged %u runs\n", resp.runs_deleted());
    return 0;
  }
  return Usage("unknown admin command '" + args.positional[0] + "'");
}

// Switches take no value; every other option takes the next argument.
const std::map<std::string, bool> kOptions = {
    {"--out", true},         {"--json", false},    {"--playbook", true},        {"--agent", true},
    {"--provider", true},    {"--timeout", true},  {"--idempotency-key", true}, {"--cancel-on-exit", false},
    {"--follow", false},     {"--after", true},    {"--limit", true},           {"--reason", true},
    {"--addr", true},        {"--token-file", true}, {"--env", true},            {"--setup", true},
    {"--network", true},     {"--allow", true},    {"--memory-mib", true},      {"--session", true},
    {"--idle", true},        {"--lifetime", true}, {"--all", false},            {"--command-timeout", true},
    {"--older-than-hours", true}};

}  // namespace
}  // namespace sandgate::cli

int main(int argc, char** argv) {
  using namespace sandgate::cli;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : 0;
  }
  Args args;
  std::string command;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--" && !options_done) {
      options_done = true;
    } else if (!options_done && a.rfind("--", 0) == 0) {
      auto it = kOptions.find(a);
      if (it == kOptions.end()) return Usage("unknown option " + a);
      if (it->second) {
        if (i + 1 >= argc) return Usage(a + " needs a value");
        args.options.emplace(a, argv[++i]);
      } else {
        args.options.emplace(a, "");
      }
    } else if (command.empty()) {
      command = a;
    } else {
      args.positional.push_back(a);
    }
  }
  const char* env_addr = std::getenv("SANDGATE_ADDR");
  std::string addr = args.Get("--addr", env_addr ? env_addr : "unix:/run/sandgate/sandgated.sock");
  std::string token;
  if (args.Has("--token-file")) {
    auto t = ReadAll(args.Get("--token-file"));
    if (!t.ok()) return Usage(std::string(t.status().message()));
    token = std::string(absl::StripAsciiWhitespace(*t));
  } else if (const char* env_token = std::getenv("SANDGATE_TOKEN")) {
    token = env_token;
  }
  auto client = Client::Connect(addr, token);
  if (command == "run") return CmdRun(*client, args);
  if (command == "events") return CmdEvents(*client, args);
  if (command == "runs") return CmdRuns(*client, args);
  if (command == "get") return CmdGet(*client, args);
  if (command == "cancel") return CmdCancel(*client, args);
  if (command == "download") return CmdDownload(*client, args);
  if (command == "session") return CmdSession(*client, args);
  if (command == "admin") return CmdAdmin(*client, args);
  return Usage("unknown command '" + command + "'");
}
