// The financial-analyst playbook at its advertised limits: an input just under the 64 MiB
// max_input_bytes holding the 100,000 data rows the playbook accepts, run by the real daemon
// in the real local sandbox with the default limits (1 GiB memory), checked by the daemon's
// verifier; and the verifier alone on the same input, measured.
//
// The CSV comes from a deterministic generator (no checked-in 64 MiB file): yearly rows
// that balance, move a few percent a year (so some, not all, cells hit the 15% rule), twenty
// extra segment columns and a quoted notes column with commas and doubled quotes that makes
// up the bytes a row needs to reach the size limit with 100,000 rows.
//
// Slow by design (the analysis of 64 MiB in a sandbox takes tens of seconds on a loaded
// machine): labelled "slow" in CMake.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "playbooks/financial_analyst/playbook.h"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/financial_analyst/verifier.h"
#include "tests/playbooks/daemon_run.h"

namespace sandgate::playbooks::financial {
namespace {

namespace fs = std::filesystem;

constexpr size_t kTargetBytes = FinancialAnalystPlaybook::kMaxInputBytes - 4096;

// A 64-bit LCG: the same bytes on every machine.
class Lcg {
 public:
  // Uniform in [-1, 1).
  double Next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state_ >> 11) / static_cast<double>(1ull << 53) * 2 - 1;
  }
  int64_t Around(double base, double spread) {
    return static_cast<int64_t>(std::llround(base * (1 + spread * Next())));
  }

 private:
  uint64_t state_ = 12345;
};

// `rows` yearly rows padded to exactly `target` bytes.
std::string LimitCsv(size_t target, size_t rows) {
  std::vector<std::string> header = RequiredColumns();
  for (const char* optional : {"gross_profit", "deferred_revenue", "stock_based_compensation",
                               "long_term_debt", "cash_and_equivalents"}) {
    header.push_back(optional);
  }
  for (int k = 0; k < 20; ++k) header.push_back(absl::StrCat("segment_", k, "_revenue"));
  header.push_back("notes");
  std::string head = absl::StrCat(absl::StrJoin(header, ","), "\n");

  Lcg r;
  std::vector<std::string> numbers;
  size_t used = head.size();
  for (size_t i = 0; i < rows; ++i) {
    int64_t revenue = r.Around(150000, 0.06), cost = r.Around(revenue * 0.4, 0.05),
            operating = r.Around(revenue * 0.15, 0.07), net = operating * 7 / 10,
            liabilities = r.Around(120000, 0.05), equity = r.Around(80000, 0.05);
    std::vector<int64_t> cells = {static_cast<int64_t>(1000 + i),
                                  revenue,
                                  cost,
                                  operating,
                                  r.Around(2000, 0.05),
                                  net,
                                  r.Around(20000, 0.1),
                                  r.Around(5000, 0.1),
                                  r.Around(90000, 0.05),
                                  liabilities + equity,
                                  r.Around(50000, 0.05),
                                  liabilities,
                                  equity,
                                  r.Around(net * 1.2, 0.08),
                                  -r.Around(8000, 0.05),
                                  revenue - cost,
                                  r.Around(10000, 0.05),
                                  r.Around(3000, 0.05),
                                  r.Around(40000, 0.05),
                                  r.Around(30000, 0.05)};
    for (int k = 0; k < 20; ++k) cells.push_back(r.Around(7000, 0.05));
    numbers.push_back(absl::StrCat(absl::StrJoin(cells, ","), ","));
    used += numbers.back().size() + 3;  // the notes' quotes and the newline
  }
  // Spread the remaining bytes over the notes cells.
  size_t remaining = target - used;
  std::string out = head;
  out.reserve(target);
  const std::string phrase = "revenue recognised per contract, \"\"billings\"\" deferred; ";
  for (size_t i = 0; i < rows; ++i) {
    size_t n = remaining / rows + (i < remaining % rows ? 1 : 0);
    std::string note = absl::StrCat("FY", 1000 + i, ": ");
    while (note.size() < n) note += phrase;
    note.resize(n);
    // A cut must not leave half of a doubled quote.
    size_t quotes = 0;
    for (size_t k = note.size(); k > 0 && note[k - 1] == '"'; --k) ++quotes;
    if (quotes % 2) note.back() = 'x';
    absl::StrAppend(&out, numbers[i], "\"", note, "\"\n");
  }
  return out;
}

const std::string& Input() {
  static const std::string* const kInput = new std::string(LimitCsv(kTargetBytes, kMaxDataRows));
  return *kInput;
}

TEST(AtLimitTest, InputIsJustUnderTheLimitAndValid) {
  EXPECT_EQ(Input().size(), kTargetBytes);
  std::vector<InputFile> inputs = {{"limit.csv", Input()}};
  auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(FinancialAnalystPlaybook().ValidateInputs(inputs).ok());
  std::printf("request-time validation at the limit: %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  ValidationReport report;
  ASSERT_TRUE(LoadStatements(Input(), &report).ok());
  EXPECT_EQ(report.row_count, static_cast<int>(kMaxDataRows));
}

// The whole playbook in the real daemon and sandbox, default limits: every check passes.
TEST(AtLimitTest, RealDaemonAnalysesTheLimitInputWithDefaultLimits) {
  v1::RunAnalysisRequest req;
  req.set_playbook("financial-analyst");
  v1::InputFile* in = req.add_inputs();
  in->set_name("limit.csv");
  in->set_content(Input());
  auto started = std::chrono::steady_clock::now();
  testing::DaemonRun run = testing::RunThroughDaemon(req, 301000);
  ASSERT_FALSE(run.events.empty());
  const v1::Event& last = run.events.back();
  ASSERT_EQ(last.type(), "run.finished");
  EXPECT_EQ(last.run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << last.run_finished().reason() << "\n"
      << run.daemon_log;
  EXPECT_GT(run.checks, 20);
  EXPECT_EQ(absl::StrJoin(run.failed_checks, "\n"), "");
  std::printf("at-limit run: %zu bytes, %zu rows, %.1f s end to end\n", Input().size(),
              kMaxDataRows,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The resident set now, from /proc (ru_maxrss is a high-water mark that earlier tests in this
// process already raised).
long CurrentRssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// What a forked child measured of one Verify call.
struct Measured {
  double seconds = 0;
  long max_rss_kib = 0;
  bool all_passed = false;
  char first_failure[512] = {};
};

// Runs Verify in a forked child, whose peak RSS starts at this process's current RSS: the
// difference is the verifier's own peak, unaffected by what this process did before.
Measured VerifyInChild(const std::string& input, const Artifacts& artifacts) {
  Measured m;
  int fds[2];
  if (pipe(fds) != 0) return m;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Measured out;
    auto started = std::chrono::steady_clock::now();
    std::vector<Check> checks = Verify("limit.csv", input, artifacts);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    out.max_rss_kib = usage.ru_maxrss;
    out.all_passed = true;
    for (const Check& c : checks) {
      if (c.passed) continue;
      if (out.all_passed) {
        std::snprintf(out.first_failure, sizeof(out.first_failure), "%s: %s", c.name.c_str(),
                      c.detail.c_str());
      }
      out.all_passed = false;
    }
    ssize_t ignored = write(fds[1], &out, sizeof(out));
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  if (pid > 0 && read(fds[0], &m, sizeof(m)) != static_cast<ssize_t>(sizeof(m))) m = Measured();
  close(fds[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  return m;
}

// The daemon-side verifier on the limit input and the reference program's artifacts: every
// check passes, in bounded time and memory (measured: the figures are printed).
TEST(AtLimitTest, VerifierTimeAndMemoryAtTheLimit) {
  char pattern[] = "/tmp/sandgate-at-limit-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  fs::path dir = pattern;
  { std::ofstream(dir / "limit.csv", std::ios::binary) << Input(); }
  std::string command =
      absl::StrCat("cd '", dir.string(), "' && python3 '", SANDGATE_SOURCE_DIR,
                   "/daemon/playbooks/financial_analyst/reference/analyze_financials.py' limit.csv "
                   "--out-dir out > output.txt 2>&1");
  int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp(dir / "output.txt");
  Artifacts artifacts;
  for (const std::string& name : ArtifactNames()) artifacts[name] = Slurp(dir / "out" / name);
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  for (const auto& [name, bytes] : artifacts) {
    EXPECT_LT(bytes.size(), 32u << 20) << name << " would not fit the artifact cap";
  }
  EXPECT_LT(artifacts[kChartFile].size(), 1u << 20) << "the chart is not bounded";

  long rss_before = CurrentRssKib();
  Measured m = VerifyInChild(Input(), artifacts);
  long growth_mib = (m.max_rss_kib - rss_before) / 1024;
  EXPECT_TRUE(m.all_passed) << m.first_failure;
  std::printf(
      "verifier at the limit: %.2f s, peak RSS +%ld MiB over the %zu input and %zu "
      "artifact bytes it was handed\n",
      m.seconds, growth_mib, Input().size(), [&] {
        size_t n = 0;
        for (const auto& [name, bytes] : artifacts) n += bytes.size();
        return n;
      }());
  // Generous bounds that still catch a per-cell blow-up.
  EXPECT_GT(m.max_rss_kib, 0);
  EXPECT_LT(m.seconds, 60);
  EXPECT_LT(growth_mib, 512);
}

}  // namespace
}  // namespace sandgate::playbooks::financial
