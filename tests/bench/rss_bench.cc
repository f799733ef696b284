// The daemon's memory around large runs, measured from outside as a caller sees it: starts
// sandgated on a temporary socket, sends RunAnalysis requests with a large generated
// financial CSV through the gRPC API, follows each run to run.finished, downloads every
// artifact, and samples the daemon's VmRSS (every 20 ms) and VmHWM from /proc/PID/status.
//
//   build/bin/bench_rss [--mib 63] [--runs 5] [--settle 10] [--playbook financial-analyst]
//                       [--memory-mib N] [--env NAME=VALUE]... [--daemon PATH] (as root)
//   build/bin/bench_rss --socket PATH --pid PID ...     (a daemon already running, e.g.
//                                                        under heaptrack)
//
// `--memory-mib` sets the sandbox's memory (the default 1 GiB is too little to analyse 63 MiB:
// the run then fails in the sandbox, after the daemon has taken, stored and placed the input).
// Prints: idle RSS (before any run), for each run the peak RSS while it ran and the RSS
// `settle` seconds after it finished, and at the end VmHWM and the final RSS. `--env` is
// passed to the daemon (e.g. --env GLIBC_TUNABLES=glibc.malloc.arena_max=2, to compare
// allocator settings); `--daemon` runs another sandgated binary (e.g. a copy built before a
// change, beside a sandgate-init).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/follow_run.h"

namespace {

using Clock = std::chrono::steady_clock;

// One field of /proc/PID/status in MiB ("VmRSS", "VmHWM"), or -1.
double StatusMiB(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0 && line.size() > len && line[len] == ':') {
      return std::atof(line.c_str() + len + 1) / 1024.0;  // the kernel says kB
    }
  }
  return -1;
}

// A valid statements CSV of about `bytes`: the columns of examples/ and a `notes` column, one
// row per year (1, 2, ...), values varied so that the accounting equation holds in every row.
// The notes pad each row so that the file stays within the playbook's 100,000 data rows
// (statements.h, kMaxDataRows) at any size up to max_input_bytes.
std::string MakeCsv(size_t bytes) {
  std::string csv =
      "year,revenue,cost_of_revenue,gross_profit,research_and_development,sales_and_marketing,"
      "general_and_administrative,operating_income,interest_expense,income_before_tax,"
      "income_tax_expense,net_income,stock_based_compensation,cash_and_equivalents,"
      "accounts_receivable,inventory,total_current_assets,total_assets,accounts_payable,"
      "deferred_revenue,total_current_liabilities,long_term_debt,total_liabilities,"
      "shareholders_equity,operating_cash_flow,capital_expenditures,notes\n";
  csv.reserve(bytes + 4096);
  const size_t row_bytes = bytes / 95000 + 1;
  char row[512];
  for (long year = 1; csv.size() < bytes; ++year) {
    // A slowly growing scale: real statements do not move 15% in every line every year, and
    // a file where they do would fill unusual_movements.csv past the artifact cap.
    long k = 100000 + year;
    long revenue = 84 * k, cost = 28 * k, gross = revenue - cost;
    long rd = 21 * k, sm = 30 * k, ga = 9 * k, op = gross - rd - sm - ga;
    long interest = k, pretax = op - interest, tax = 0, net = pretax - tax;
    long liabilities = 51 * k, equity = 33 * k + year % 97, assets = liabilities + equity;
    std::snprintf(row, sizeof(row),
                  "%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,"
                  "%ld,%ld,%ld,%ld,%ld,%ld,%ld,",
                  year, revenue, cost, gross, rd, sm, ga, op, interest, pretax, tax, net, 6 * k,
                  41 * k, 10 * k, 0L, 54 * k, assets, 5 * k, 22 * k, 31 * k, 20 * k, liabilities,
                  equity, 9 * k, 7 * k);
    const size_t start = csv.size();
    csv += row;
    size_t used = csv.size() - start + 1;
    csv.append(row_bytes > used ? row_bytes - used : 1, 'n');
    csv += '\n';
  }
  return csv;
}

// Samples VmRSS in the background; peak() is the largest sample since the last reset().
class Sampler {
 public:
  explicit Sampler(pid_t pid) : pid_(pid), thread_([this] { Loop(); }) {}
  ~Sampler() {
    stop_ = true;
    thread_.join();
  }
  void reset() { peak_ = 0; }
  double peak() const { return peak_ / 1024.0; }

 private:
  void Loop() {
    while (!stop_) {
      double mib = StatusMiB(pid_, "VmRSS");
      long kib = static_cast<long>(mib * 1024);
      if (kib > peak_) peak_ = kib;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  const pid_t pid_;
  std::atomic<long> peak_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct RunOutcome {
  std::string status = "RPC-FAILED";
  std::string reason;
  size_t artifacts = 0;
  uint64_t downloaded = 0;
};

RunOutcome OneRun(sandgate::v1::Sandgate::Stub& stub, const std::string& csv,
                  const std::string& playbook, uint64_t memory_bytes) {
  RunOutcome out;
  sandgate::v1::Run run;
  {
    sandgate::v1::RunAnalysisRequest req;
    req.set_playbook(playbook);
    if (memory_bytes) req.mutable_sandbox()->set_memory_bytes(memory_bytes);
    auto* in = req.add_inputs();
    in->set_name("large_statements.csv");
    in->set_content(csv);
    grpc::ClientContext ctx;
    grpc::Status st = stub.RunAnalysis(&ctx, req, &run);
    if (!st.ok()) {
      out.reason = st.error_message();
      return out;
    }
  }
  const sandgate::v1::RunFinished finished = sandgate::bench::FollowToFinish(stub, run.id());
  if (finished.status() != sandgate::v1::RUN_STATUS_UNSPECIFIED) {
    out.status = sandgate::v1::RunStatus_Name(finished.status());
    out.reason = finished.reason();
  }
  grpc::ClientContext gctx;
  sandgate::v1::GetRunRequest greq;
  greq.set_run_id(run.id());
  if (stub.GetRun(&gctx, greq, &run).ok()) {
    for (const auto& a : run.artifacts()) {
      ++out.artifacts;
      grpc::ClientContext dctx;
      sandgate::v1::DownloadArtifactRequest dreq;
      dreq.set_run_id(run.id());
      dreq.set_name(a.name());
      auto chunks = stub.DownloadArtifact(&dctx, dreq);
      sandgate::v1::ArtifactChunk chunk;
      while (chunks->Read(&chunk)) out.downloaded += chunk.data().size();
      chunks->Finish();
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double mib = 63;
  int runs = 5, settle = 10;
  uint64_t memory_bytes = 0;
  std::string playbook = "financial-analyst";
  std::vector<std::string> env;
  std::string socket, daemon_path = SANDGATED_PATH;
  pid_t daemon = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--mib")
      mib = std::atof(argv[i + 1]);
    else if (flag == "--runs")
      runs = std::atoi(argv[i + 1]);
    else if (flag == "--settle")
      settle = std::atoi(argv[i + 1]);
    else if (flag == "--playbook")
      playbook = argv[i + 1];
    else if (flag == "--env")
      env.push_back(argv[i + 1]);
    else if (flag == "--socket")
      socket = argv[i + 1];
    else if (flag == "--pid")
      daemon = std::atoi(argv[i + 1]);
    else if (flag == "--memory-mib")
      memory_bytes = std::strtoull(argv[i + 1], nullptr, 10) << 20;
    else if (flag == "--daemon")
      daemon_path = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::string csv = MakeCsv(static_cast<size_t>(mib * (1 << 20)));

  char tmpl[] = "/tmp/sg-rss-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  const bool own = socket.empty();
  if (own) socket = dir + "/s.sock";
  if (own && (daemon = fork()) == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    for (std::string& kv : env) putenv(kv.data());
    execl(daemon_path.c_str(), "sandgated", "--listen", ("unix:" + socket).c_str(), "--state-dir",
          (dir + "/state").c_str(), "--log-level", "error", nullptr);
    _exit(127);
  }
  for (int i = 0; i < 200 && access(socket.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  auto stub = sandgate::v1::Sandgate::NewStub(
      grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  {
    // One call so the idle figure includes a connected channel, as a daemon in service has.
    grpc::ClientContext ctx;
    sandgate::v1::ListRunsRequest req;
    sandgate::v1::ListRunsResponse resp;
    stub->ListRuns(&ctx, req, &resp);
  }
  std::printf("%s: input %.1f MiB, playbook %s, %d runs, settle %d s%s%s\n",
              own ? daemon_path.c_str() : socket.c_str(), csv.size() / double(1 << 20),
              playbook.c_str(), runs, settle, env.empty() ? "" : ", env ",
              env.empty() ? "" : env[0].c_str());
  std::printf("%-34s %8.1f MiB\n", "idle VmRSS", StatusMiB(daemon, "VmRSS"));
  {
    Sampler sampler(daemon);
    for (int r = 1; r <= runs; ++r) {
      sampler.reset();
      auto t0 = Clock::now();
      RunOutcome o = OneRun(*stub, csv, playbook, memory_bytes);
      double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      double peak = sampler.peak();
      std::this_thread::sleep_for(std::chrono::seconds(settle));
      std::printf(
          "run %d: %-9s %5.1f s  peak %7.1f MiB  after %ds %7.1f MiB (anon %.1f, file "
          "%.1f)  (%zu artifacts, %.1f MiB downloaded)%s%.100s\n",
          r, o.status.substr(o.status.rfind('_') + 1).c_str(), secs, peak, settle,
          StatusMiB(daemon, "VmRSS"), StatusMiB(daemon, "RssAnon"), StatusMiB(daemon, "RssFile"),
          o.artifacts, o.downloaded / double(1 << 20), o.reason.empty() ? "" : "  ",
          o.reason.c_str());
      std::fflush(stdout);
    }
  }
  std::printf("%-34s %8.1f MiB\n", "VmHWM (peak over all runs)", StatusMiB(daemon, "VmHWM"));
  std::printf("%-34s %8.1f MiB\n", "final VmRSS", StatusMiB(daemon, "VmRSS"));
  if (own) {
    kill(daemon, SIGTERM);
    waitpid(daemon, nullptr, 0);
  }
  std::system(("rm -rf " + dir).c_str());
  return 0;
}
