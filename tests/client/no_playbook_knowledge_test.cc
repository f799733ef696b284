// The CLI holds no playbook knowledge: no playbook name, artifact name, metric or rule name
// appears in client/'s sources. The lists come from the daemon's playbooks themselves, so a
// playbook that gains a file or a metric is checked too. What the CLI shows of a run comes
// from the daemon's RunSummary (client/summary.h).
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "playbooks/financial_analyst/metrics.h"
#include "playbooks/financial_analyst/summary.h"
#include "playbooks/playbook.h"

namespace sandgate::cli {
namespace {

// Every name a playbook owns that a client could be tempted to hard-code.
std::set<std::string> PlaybookKnowledge() {
  std::set<std::string> names;
  for (const std::string& name : playbooks::PlaybookNames()) {
    names.insert(name);
    absl::StatusOr<const playbooks::Playbook*> p = playbooks::FindPlaybook(name);
    if (!p.ok()) continue;
    for (const std::string& artifact : (*p)->ExpectedArtifacts()) names.insert(artifact);
  }
  for (const std::string& metric : playbooks::financial::MetricColumns()) {
    if (metric != "year") names.insert(metric);
  }
  for (const std::string& metric : playbooks::financial::KeyMetrics()) names.insert(metric);
  for (const char* rule :
       {playbooks::financial::kRuleYoyMove, playbooks::financial::kRuleOperatingMargin,
        playbooks::financial::kRuleReceivablesOutpaceRevenue}) {
    names.insert(rule);
  }
  return names;
}

bool IsWordChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whole-word occurrences only: "roe" is a metric, "heroes" is not.
bool ContainsWord(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    bool starts = at == 0 || !IsWordChar(text[at - 1]);
    size_t end = at + word.size();
    bool ends = end == text.size() || !IsWordChar(text[end]);
    if (starts && ends) return true;
  }
  return false;
}

TEST(NoPlaybookKnowledgeTest, ClientSourcesNameNoPlaybookArtifactMetricOrRule) {
  std::set<std::string> names = PlaybookKnowledge();
  ASSERT_GT(names.size(), 20u) << "the lists from the playbooks are not what this test expects";
  std::filesystem::path dir = std::filesystem::path(SANDGATE_SOURCE_DIR) / "client";
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    ++files;
    for (const std::string& name : names) {
      EXPECT_FALSE(ContainsWord(ss.str(), name))
          << entry.path().string() << " names \"" << name
          << "\": the CLI shows the daemon's RunSummary instead of knowing playbooks";
    }
  }
  EXPECT_GT(files, 5u) << "client/ was not found under " << dir;
}

TEST(NoPlaybookKnowledgeTest, WholeWordsOnly) {
  EXPECT_TRUE(ContainsWord("x = \"roe\";", "roe"));
  EXPECT_FALSE(ContainsWord("heroes", "roe"));
  EXPECT_TRUE(ContainsWord("a/checks.json", "checks.json"));
  EXPECT_FALSE(ContainsWord("my_checks.json", "checks.json"));
}

}  // namespace
}  // namespace sandgate::cli
