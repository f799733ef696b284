#include "playbooks/financial_analyst/metrics.h"

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace sandgate::playbooks::financial {
namespace {

using ::testing::ElementsAre;

const char kHeader[] =
    "year,revenue,cost_of_revenue,operating_income,interest_expense,net_income,"
    "accounts_receivable,inventory,total_current_assets,total_assets,"
    "total_current_liabilities,total_liabilities,shareholders_equity,operating_cash_flow,"
    "capital_expenditures";

struct Figures {
  double year, revenue = 1000, cost = 400, op_income = 200, interest = 20, net_income = 100,
               receivables = 100, inventory = 50, current_assets = 500, assets = 2000,
               current_liabilities = 250, liabilities = 1200, equity = 800, ocf = 150, capex = 60;
  std::string Row() const {
    return absl::StrJoin(
        {year, revenue, cost, op_income, interest, net_income, receivables, inventory,
         current_assets, assets, current_liabilities, liabilities, equity, ocf, capex},
        ",", [](std::string* out, double v) { absl::StrAppend(out, v); });
  }
};

Statements Load(const std::vector<Figures>& rows, const std::string& header = kHeader,
                const std::vector<std::string>& suffixes = {}) {
  std::string csv = absl::StrCat(header, "\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    absl::StrAppend(&csv, rows[i].Row(), i < suffixes.size() ? suffixes[i] : "", "\n");
  }
  ValidationReport report;
  auto st = LoadStatements(csv, &report);
  EXPECT_TRUE(st.ok()) << st.status();
  return st.ok() ? *st : Statements();
}

Statements Sample() {
  ValidationReport report;
  auto st = LoadStatements(testing::SampleCsv(), &report);
  EXPECT_TRUE(st.ok()) << st.status();
  return *st;
}

TEST(MetricsTest, SampleMatchesHandComputedValues) {
  std::vector<MetricsRow> m = ComputeMetrics(Sample());
  ASSERT_EQ(m.size(), 6u);
  const MetricsRow& y2020 = m[0];
  const MetricsRow& y2021 = m[1];
  const MetricsRow& y2025 = m[5];
  EXPECT_EQ(y2020.year, 2020);
  EXPECT_EQ(y2025.year, 2025);
  // The first year has no previous row.
  EXPECT_FALSE(y2020.Get("revenue_growth").has_value());
  EXPECT_FALSE(y2020.Get("roa").has_value());
  EXPECT_FALSE(y2020.Get("roe").has_value());
  EXPECT_FALSE(y2020.Get("receivables_growth").has_value());
  EXPECT_FALSE(y2020.Get("inventory_growth").has_value());
  // 2021 inventory grows from 0 to 0: undefined. 2022 from 0 to 1200: undefined.
  EXPECT_FALSE(y2021.Get("inventory_growth").has_value());
  EXPECT_FALSE(m[2].Get("inventory_growth").has_value());

  EXPECT_DOUBLE_EQ(*y2025.Get("revenue_growth"), (238700 - 209800) / 209800.0);
  EXPECT_DOUBLE_EQ(*y2021.Get("roa"), -2978 / ((107600 + 85600) / 2.0));
  EXPECT_DOUBLE_EQ(*y2021.Get("roe"), -2978 / ((45400 + 33700) / 2.0));
  EXPECT_DOUBLE_EQ(*y2025.Get("gross_margin"), 164703 / 238700.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("operating_margin"), 19703 / 238700.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("net_margin"), 10370 / 238700.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("current_ratio"), 134000 / 75100.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("quick_ratio"), (134000 - 3600) / 75100.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("liabilities_to_equity"), 170100 / 89400.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("interest_coverage"), 19703 / 6900.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("free_cash_flow"), 39800 - 33900);
  EXPECT_DOUBLE_EQ(*y2025.Get("fcf_margin"), (39800 - 33900) / 238700.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("cash_conversion"), 39800 / 10370.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("receivables_growth"), (38900 - 27400) / 27400.0);
  EXPECT_DOUBLE_EQ(*y2025.Get("inventory_growth"), (3600 - 2300) / 2300.0);
  EXPECT_DOUBLE_EQ(*y2020.Get("free_cash_flow"), 9800 - 7200);
  EXPECT_DOUBLE_EQ(*y2020.Get("cash_conversion"), 9800 / -6928.0);
}

TEST(MetricsTest, GrossMarginFallsBackToRevenueMinusCost) {
  // The sample's gross_profit equals revenue - cost; here there is no gross_profit column.
  std::vector<MetricsRow> m = ComputeMetrics(Load({{2020}}));
  EXPECT_DOUBLE_EQ(*m[0].Get("gross_margin"), (1000 - 400) / 1000.0);
  // With the column, its value is used even when it disagrees.
  Statements with = Load({{2020}}, absl::StrCat(kHeader, ",gross_profit"), {",700"});
  EXPECT_DOUBLE_EQ(*ComputeMetrics(with)[0].Get("gross_margin"), 0.7);
}

TEST(MetricsTest, ZeroDenominatorsAreUndefined) {
  Figures p{2020};
  p.revenue = 0;
  p.receivables = 0;
  p.inventory = 0;
  p.assets = 1000;
  p.equity = 500;
  p.liabilities = 500;
  Figures t{2021};
  t.revenue = 0;
  t.current_liabilities = 0;
  t.equity = -500;  // average equity (-500 + 500) / 2 == 0
  t.liabilities = 1500;
  t.assets = 1000;
  t.interest = 0;
  t.net_income = 0;
  std::vector<MetricsRow> m = ComputeMetrics(Load({p, t}));
  for (const char* undefined :
       {"revenue_growth", "gross_margin", "operating_margin", "net_margin", "current_ratio",
        "quick_ratio", "roe", "interest_coverage", "fcf_margin", "cash_conversion",
        "receivables_growth", "inventory_growth"}) {
    EXPECT_FALSE(m[1].Get(undefined).has_value()) << undefined;
  }
  EXPECT_DOUBLE_EQ(*m[1].Get("liabilities_to_equity"), 1500 / -500.0);
  EXPECT_DOUBLE_EQ(*m[1].Get("roa"), 0);  // net income 0 over a non-zero average

  // Shareholders' equity zero: liabilities_to_equity undefined; average assets zero: roa.
  Figures a{2020};
  a.assets = 100;
  Figures b{2021};
  b.assets = -100;
  b.equity = 0;
  std::vector<MetricsRow> m2 = ComputeMetrics(Load({a, b}));
  EXPECT_FALSE(m2[1].Get("liabilities_to_equity").has_value());
  EXPECT_FALSE(m2[1].Get("roa").has_value());
}

TEST(MetricsTest, GrowthDividesByAbsolutePrevious) {
  Figures p{2020};
  p.net_income = -100;
  p.revenue = -200;
  Figures t{2021};
  t.net_income = -50;
  t.revenue = 100;
  Statements st = Load({p, t});
  EXPECT_DOUBLE_EQ(*Growth(st.Get(1, "net_income"), st.Get(0, "net_income")), 0.5);
  EXPECT_DOUBLE_EQ(*ComputeMetrics(st)[1].Get("revenue_growth"), 1.5);
}

TEST(MetricsTest, CapexSignDoesNotMatter) {
  Figures neg{2020};
  neg.capex = -60;
  Figures pos{2021};
  std::vector<MetricsRow> m = ComputeMetrics(Load({neg, pos}));
  EXPECT_DOUBLE_EQ(*m[0].Get("free_cash_flow"), 90);
  EXPECT_DOUBLE_EQ(*m[1].Get("free_cash_flow"), 90);
  EXPECT_DOUBLE_EQ(*m[0].Get("fcf_margin"), 0.09);
}

TEST(MetricsTest, UnsortedInputIsComputedInYearOrder) {
  Figures a{2021};
  a.revenue = 1200;
  Figures b{2020};
  std::vector<MetricsRow> m = ComputeMetrics(Load({a, b}));
  EXPECT_EQ(m[0].year, 2020);
  EXPECT_DOUBLE_EQ(*m[1].Get("revenue_growth"), 0.2);
}

TEST(MetricsTest, SingleYearHasNoGrowthAndNoHits) {
  Statements st = Load({{2020}});
  std::vector<MetricsRow> m = ComputeMetrics(st);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_FALSE(m[0].Get("revenue_growth").has_value());
  EXPECT_TRUE(m[0].Get("operating_margin").has_value());
  EXPECT_TRUE(FindUnusualMovements(st).empty());
}

using Hit = std::tuple<int64_t, std::string, std::string>;

std::vector<Hit> Hits(const Statements& st) {
  std::vector<Hit> out;
  for (const UnusualMovement& m : FindUnusualMovements(st))
    out.emplace_back(m.year, m.item, m.rule);
  return out;
}

TEST(UnusualMovementsTest, SampleHitsByHand) {
  std::vector<UnusualMovement> hits = FindUnusualMovements(Sample());
  std::vector<Hit> y2025;
  for (const UnusualMovement& m : hits) {
    if (m.year == 2025) y2025.emplace_back(m.year, m.item, m.rule);
  }
  // 2025 vs 2024, by hand: growth of each column, in input column order.
  //   revenue 13.8%, cost_of_revenue 19.6%, gross_profit 11.4%, research 11.5%,
  //   sales_and_marketing 19.3%, G&A 13.6%, operating_income -12.1%, interest 60.5%,
  //   income_before_tax -29.3%, tax -25.4%, net_income -30.2%, sbc 29.7%, cash -13.5%,
  //   receivables 42.0%, inventory 56.5%, tca 0.6%, assets 12.2%, payables 32.8%,
  //   deferred -4.1%, tcl 4.5%, ltd 35.7%, liabilities 19.9%, equity 0%, ocf -7.9%, capex 37.2%.
  //   Operating margin 10.68% -> 8.25% (-2.43 pp); receivables - revenue growth = 28.2 pp.
  EXPECT_THAT(
      y2025,
      ElementsAre(
          Hit{2025, "cost_of_revenue", kRuleYoyMove},
          Hit{2025, "sales_and_marketing", kRuleYoyMove},
          Hit{2025, "interest_expense", kRuleYoyMove}, Hit{2025, "income_before_tax", kRuleYoyMove},
          Hit{2025, "income_tax_expense", kRuleYoyMove}, Hit{2025, "net_income", kRuleYoyMove},
          Hit{2025, "stock_based_compensation", kRuleYoyMove},
          Hit{2025, "accounts_receivable", kRuleYoyMove}, Hit{2025, "inventory", kRuleYoyMove},
          Hit{2025, "accounts_payable", kRuleYoyMove}, Hit{2025, "long_term_debt", kRuleYoyMove},
          Hit{2025, "total_liabilities", kRuleYoyMove},
          Hit{2025, "capital_expenditures", kRuleYoyMove},
          Hit{2025, "operating_margin", kRuleOperatingMargin},
          Hit{2025, "accounts_receivable", kRuleReceivablesOutpaceRevenue}));
  const UnusualMovement& last = hits.back();
  EXPECT_DOUBLE_EQ(last.change, (38900 - 27400) / 27400.0 - (238700 - 209800) / 209800.0);
  // Ordered by year.
  for (size_t i = 1; i < hits.size(); ++i) EXPECT_LE(hits[i - 1].year, hits[i].year);
  // Growth from zero (inventory 2020 -> 2021 -> 2022) never fires.
  for (const UnusualMovement& m : hits) {
    EXPECT_FALSE(m.item == "inventory" && m.year <= 2022) << m.year;
  }
}

TEST(UnusualMovementsTest, ThresholdsIncludeTheBoundary) {
  Figures a{2020};
  Figures b{2021};
  b.revenue = 1150;       // +15% exactly
  b.cost = 340;           // -15% exactly
  b.net_income = 114.99;  // just under 15%
  b.op_income = 253;      // margin 0.2 -> 0.22 (+2 pp, the boundary)
  b.receivables = 126.5;  // +26.5% vs revenue +15%: 11.5 pp
  std::vector<Hit> hits = Hits(Load({a, b}));
  EXPECT_THAT(hits, ElementsAre(Hit{2021, "revenue", kRuleYoyMove},
                                Hit{2021, "cost_of_revenue", kRuleYoyMove},
                                Hit{2021, "operating_income", kRuleYoyMove},
                                Hit{2021, "accounts_receivable", kRuleYoyMove},
                                Hit{2021, "operating_margin", kRuleOperatingMargin},
                                Hit{2021, "accounts_receivable", kRuleReceivablesOutpaceRevenue}));
  // Receivables exactly 10 pp ahead of revenue fires; 9.99 pp does not.
  Figures c{2021};
  c.revenue = 1100;
  c.op_income = 220;
  c.receivables = 120;
  EXPECT_THAT(Hits(Load({a, c})),
              ElementsAre(Hit{2021, "accounts_receivable", kRuleYoyMove},
                          Hit{2021, "accounts_receivable", kRuleReceivablesOutpaceRevenue}));
  c.receivables = 119.99;
  EXPECT_THAT(Hits(Load({a, c})), ElementsAre(Hit{2021, "accounts_receivable", kRuleYoyMove}));
}

TEST(UnusualMovementsTest, ExtraNumericColumnsAreFlaggedInInputOrder) {
  // "customers" before the required columns, "segment" (text) and "mixed" after.
  std::string header = absl::StrCat("customers,", kHeader, ",segment,mixed");
  std::string csv = absl::StrCat(header, "\n10,", Figures{2020}.Row(), ",cloud,5\n", "20,",
                                 Figures{2021}.Row(), ",cloud,n/a\n");
  ValidationReport report;
  auto st = LoadStatements(csv, &report);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_THAT(NumericColumns(*st).front(), "customers");
  EXPECT_THAT(Hits(*st), ElementsAre(Hit{2021, "customers", kRuleYoyMove}));
}

}  // namespace
}  // namespace sandgate::playbooks::financial
