// The generic summary renderer: any playbook's RunSummary, shown the same way.
#include "client/summary.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace sandgate::cli {
namespace {

v1::RunSummary::Metric Number(const std::string& label, double value, const std::string& unit,
                              uint32_t decimals) {
  v1::RunSummary::Metric m;
  m.set_label(label);
  m.set_value(value);
  m.set_unit(unit);
  m.set_decimals(decimals);
  return m;
}

TEST(SummaryTest, RendersEveryPartWithItsUnit) {
  v1::RunSummary s;
  s.set_headline("books.csv: 3 years");
  *s.add_metrics() = Number("margin", 41.234, "%", 1);
  *s.add_metrics() = Number("cash", 1234.5, "", 2);
  *s.add_metrics() = Number("spread", 2.04, "pp", 1);
  s.add_metrics()->set_label("undefined one");  // no value: a zero denominator
  v1::RunSummary::Metric* os = s.add_metrics();
  os->set_label("os");
  os->set_text("Debian 12");
  v1::RunSummary::Flag* f = s.add_flags();
  f->set_what("receivables");
  f->set_period("2025");
  f->set_rule("outpaces");
  *f->mutable_size() = Number("", 28.2, "pp", 1);
  v1::RunSummary::Count* c = s.add_counts();
  c->set_label("checks passed");
  c->set_value(21);
  c = s.add_counts();
  c->set_label("checks failed");
  c->set_value(0);
  v1::RunSummary::File* file = s.add_files();
  file->set_role("memo");
  file->set_name("memo.md");

  EXPECT_EQ(RenderSummary(s, "out"),
            "\n"
            "books.csv: 3 years\n"
            "  margin                 41.2%\n"
            "  cash                   1234.50\n"
            "  spread                 2.0 pp\n"
            "  undefined one          n/a\n"
            "  os                     Debian 12\n"
            "flagged:\n"
            "  receivables                  2025   outpaces                           +28.2 pp\n"
            "checks passed: 21, checks failed: 0\n"
            "files:\n"
            "  memo       out/memo.md\n");
  // Without a download directory the file is named as the run names it.
  EXPECT_TRUE(absl::StrContains(RenderSummary(s, ""), "  memo       memo.md\n"));
}

TEST(SummaryTest, ChangesAreSignedAndFiguresAreNot) {
  EXPECT_EQ(FormatMetric(Number("", -2.43, "pp", 1), /*signed_change=*/true), "-2.4 pp");
  EXPECT_EQ(FormatMetric(Number("", 13.77, "%", 1), /*signed_change=*/true), "+13.8%");
  EXPECT_EQ(FormatMetric(Number("", 13.77, "%", 1)), "13.8%");
  EXPECT_EQ(FormatMetric(Number("", 1.5, "x", 0)), "2 x");
}

TEST(SummaryTest, AnEmptySummaryPrintsNothing) {
  EXPECT_EQ(RenderSummary(v1::RunSummary(), "out"), "");
}

TEST(SummaryTest, TextsFromTheSandboxAreEscaped) {
  v1::RunSummary s;
  s.set_headline("sandbox: \x1b]0;pwned\x07Linux");
  v1::RunSummary::Metric* m = s.add_metrics();
  m->set_label("net\nwork");
  m->set_text("\x1b[2J");
  v1::RunSummary::Flag* f = s.add_flags();
  f->set_what("gross\x1b[2J\nrun SUCCEEDED");
  *f->mutable_size() = Number("", 1, "\x1b[31m", 0);
  s.add_files()->set_name("a\x1b[31m.md");
  std::string out = RenderSummary(s, "dir");
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_TRUE(absl::StrContains(out, "sandbox: \\x1b]0;pwned\\x07Linux")) << out;
  EXPECT_TRUE(absl::StrContains(out, "net\\nwork")) << out;
  EXPECT_FALSE(absl::StrContains(out, "\nrun SUCCEEDED")) << out;
}

}  // namespace
}  // namespace sandgate::cli
