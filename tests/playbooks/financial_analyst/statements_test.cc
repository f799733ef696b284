#include "playbooks/financial_analyst/statements.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace sandgate::playbooks::financial {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char kHeader[] =
    "year,revenue,cost_of_revenue,operating_income,interest_expense,net_income,"
    "accounts_receivable,inventory,total_current_assets,total_assets,"
    "total_current_liabilities,total_liabilities,shareholders_equity,operating_cash_flow,"
    "capital_expenditures";

// A balanced row for `year` (total_assets 2000 = 1200 + 800).
std::string Row(int year) {
  return absl::StrCat(year, ",1000,400,200,20,100,100,50,500,2000,250,1200,800,150,60");
}

std::string Csv(const std::vector<std::string>& rows, const std::string& header = kHeader) {
  return absl::StrCat(header, "\n", absl::StrJoin(rows, "\n"), "\n");
}

TEST(ParseNumberTest, AcceptsPlainDecimalsOnly) {
  EXPECT_EQ(ParseNumber(" 12.5 "), 12.5);
  EXPECT_EQ(ParseNumber("-3"), -3);
  EXPECT_EQ(ParseNumber("+4"), 4);
  EXPECT_EQ(ParseNumber("1e3"), 1000);
  EXPECT_EQ(ParseNumber(".5"), 0.5);
  EXPECT_EQ(ParseNumber("5."), 5);
  // Underflow is zero, as Python's float() has it; overflow is not finite.
  EXPECT_EQ(ParseNumber("1e-400"), 0);
  EXPECT_EQ(ParseNumber("-0.0000001e-320"), 0);
  EXPECT_FALSE(ParseNumber("1e400").has_value());
  EXPECT_FALSE(ParseNumber("0.001e312").has_value());
  for (const char* bad : {"", " ", "1,000", "$5", "nan", "NaN", "inf", "-Infinity", "0x10", "1e400",
                          "12a", "1e", "--1", "."}) {
    EXPECT_FALSE(ParseNumber(bad).has_value()) << bad;
  }
}

TEST(ParseCsvTest, QuotesBomCrlfAndBlankLines) {
  auto records = ParseCsv(
      "\xEF\xBB\xBF"
      "a,\"b,c\",\"say \"\"hi\"\"\"\r\n\r\n1,\"x\r\ny\",3\r\n");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_THAT(records[0], ElementsAre("a", "b,c", "say \"hi\""));
  EXPECT_THAT(records[1], ElementsAre("1", "x\r\ny", "3"));
}

TEST(StatementsTest, SampleIsValid) {
  ValidationReport report;
  auto st = LoadStatements(testing::SampleCsv(), &report);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->rows().size(), 6u);
  EXPECT_EQ(st->columns().size(), 26u);
  EXPECT_EQ(st->columns()[3], "gross_profit");  // input order kept
  EXPECT_EQ(st->rows().front().year, 2020);
  EXPECT_EQ(st->rows().back().year, 2025);
  EXPECT_EQ(st->Get(5, "revenue"), 238700);
  EXPECT_TRUE(report.required_columns_present && report.all_values_numeric && report.years_unique &&
              report.years_ordered && report.accounting_equation_passed_every_row &&
              report.at_least_two_years);
  EXPECT_TRUE(report.warnings.empty()) << absl::StrJoin(report.warnings, "; ");
  EXPECT_EQ(report.row_count, 6);
  EXPECT_EQ(report.year_range, std::make_pair(int64_t{2020}, int64_t{2025}));
  std::vector<std::string> keys;
  nlohmann::json json = report.ToJson();
  for (const auto& [key, value] : json.items()) keys.push_back(key);
  std::vector<std::string> expected = ValidationKeys();
  std::sort(expected.begin(), expected.end());
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, expected);
}

TEST(StatementsTest, BomCrlfQuotedHeaderAndExtraColumns) {
  std::string csv =
      absl::StrCat("\xEF\xBB\xBF", "notes,", kHeader, ",\"customers\"\r\n",
                   "\"cloud, \"\"core\"\"\",", Row(2020), ",10\r\n", "x,", Row(2021), ",12\r\n");
  ValidationReport report;
  auto st = LoadStatements(csv, &report);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->columns().front(), "notes");
  EXPECT_EQ(st->columns().back(), "customers");
  EXPECT_EQ(st->rows()[0].Raw(0), "cloud, \"core\"");
  EXPECT_EQ(st->rows()[0].Raw(1), "2020");  // the year, kept as written
  EXPECT_EQ(st->rows()[0].Raw(2), "");      // another number: only its value is kept
  EXPECT_EQ(st->Get(1, "customers"), 12);
}

TEST(StatementsTest, ReorderedColumns) {
  // capital_expenditures first, year last.
  std::string header =
      "capital_expenditures,revenue,cost_of_revenue,operating_income,"
      "interest_expense,net_income,accounts_receivable,inventory,"
      "total_current_assets,total_assets,total_current_liabilities,"
      "total_liabilities,shareholders_equity,operating_cash_flow,year";
  std::string csv =
      absl::StrCat(header, "\n60,1000,400,200,20,100,100,50,500,2000,250,1200,800,150,2020\n");
  ValidationReport report;
  auto st = LoadStatements(csv, &report);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->rows()[0].year, 2020);
  EXPECT_EQ(st->Get(0, "capital_expenditures"), 60);
}

TEST(StatementsTest, UnsortedYearsAreSortedAndReported) {
  ValidationReport report;
  auto st = LoadStatements(Csv({Row(2022), Row(2020), Row(2021)}), &report);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_FALSE(report.years_ordered);
  EXPECT_EQ(st->rows()[0].year, 2020);
  EXPECT_EQ(st->rows()[1].year, 2021);
  EXPECT_EQ(st->rows()[2].year, 2022);
  EXPECT_EQ(st->rows()[0].source_row, 2);
  EXPECT_THAT(absl::StrJoin(report.warnings, ";"), HasSubstr("ascending"));
}

TEST(StatementsTest, BlankLinesAreNotRows) {
  ValidationReport report;
  auto st =
      LoadStatements(absl::StrCat(kHeader, "\n\n", Row(2020), "\n,,,\n", Row(2021), "\n"), &report);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->rows().size(), 2u);
  EXPECT_EQ(st->rows()[1].source_row, 2);
}

TEST(StatementsTest, MissingColumnIsFatalAndNamed) {
  std::string header = kHeader;
  header.erase(header.find(",inventory"), std::string(",inventory").size());
  std::string row = "2020,1000,400,200,20,100,100,500,2000,250,1200,800,150,60";
  ValidationReport report;
  auto st = LoadStatements(absl::StrCat(header, "\n", row, "\n"), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.status().message(), HasSubstr("inventory"));
  EXPECT_FALSE(report.required_columns_present);
  EXPECT_THAT(report.missing_columns, ElementsAre("inventory"));
  EXPECT_TRUE(report.fatal());
}

TEST(StatementsTest, NonNumericCellIsFatalAndNamesRowColumnValue) {
  std::string bad = Row(2021);
  bad.replace(bad.find(",1000,"), 6, ",12a,");
  ValidationReport report;
  auto st = LoadStatements(Csv({Row(2020), bad}), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.status().message(), HasSubstr("data row 2"));
  EXPECT_THAT(st.status().message(), HasSubstr("revenue"));
  EXPECT_THAT(st.status().message(), HasSubstr("12a"));
  EXPECT_FALSE(report.all_values_numeric);
  ASSERT_EQ(report.bad_cells.size(), 1u);
  EXPECT_EQ(report.bad_cells[0].row, 2);
  EXPECT_EQ(report.bad_cells[0].column, "revenue");
  EXPECT_EQ(report.bad_cells[0].value, "12a");
}

TEST(StatementsTest, EmptyAndInfiniteRequiredCellsAreFatal) {
  std::string empty = Row(2020);
  empty.replace(empty.find(",400,"), 5, ",,");
  std::string inf = Row(2021);
  inf.replace(inf.find(",100,100,"), 5, ",inf,");
  ValidationReport report;
  auto st = LoadStatements(Csv({empty, inf}), &report);
  ASSERT_FALSE(st.ok());
  ASSERT_EQ(report.bad_cells.size(), 2u);
  EXPECT_EQ(report.bad_cells[0].column, "cost_of_revenue");
  EXPECT_EQ(report.bad_cells[1].column, "net_income");
  EXPECT_EQ(report.bad_cells[1].value, "inf");
  EXPECT_THAT(st.status().message(), HasSubstr("empty value"));
}

TEST(StatementsTest, DuplicateYearIsFatalAndNamed) {
  ValidationReport report;
  auto st = LoadStatements(Csv({Row(2020), Row(2021), Row(2021)}), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.status().message(), HasSubstr("duplicate year 2021"));
  EXPECT_FALSE(report.years_unique);
  EXPECT_TRUE(report.all_values_numeric);
}

TEST(StatementsTest, NonIntegerYearIsFatal) {
  std::string row = Row(2021);
  row.replace(0, 4, "2021.5");
  ValidationReport report;
  auto st = LoadStatements(Csv({Row(2020), row}), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.status().message(), HasSubstr("2021.5"));
  EXPECT_FALSE(report.years_unique);
}

TEST(StatementsTest, AccountingEquationFailuresListYears) {
  // total_assets 2000 against 1200 + 800: off by 1 passes (tolerance max(1, 0.002)), 1.5 fails.
  std::string off_by_one = Row(2021);
  off_by_one.replace(off_by_one.find(",2000,"), 6, ",2001,");
  std::string off = Row(2022);
  off.replace(off.find(",2000,"), 6, ",2001.5,");
  std::string big = "2023,1000,400,200,20,100,100,50,500,1000000999,250,600000000,400000000,150,60";
  std::string big_off =
      "2024,1000,400,200,20,100,100,50,500,1000001001,250,600000000,400000000,150,60";
  ValidationReport report;
  auto st = LoadStatements(Csv({Row(2020), off_by_one, off, big, big_off}), &report);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_FALSE(report.accounting_equation_passed_every_row);
  EXPECT_THAT(report.accounting_equation_failures, ElementsAre(2022, 2024));
  EXPECT_THAT(absl::StrJoin(report.warnings, ";"), HasSubstr("2022, 2024"));
}

TEST(StatementsTest, SingleYearIsAWarning) {
  ValidationReport report;
  auto st = LoadStatements(Csv({Row(2020)}), &report);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_FALSE(report.at_least_two_years);
  EXPECT_EQ(report.year_range, std::make_pair(int64_t{2020}, int64_t{2020}));
}

TEST(StatementsTest, EmptyFileAndHeaderOnlyAreFatal) {
  ValidationReport report;
  EXPECT_THAT(LoadStatements("", &report).status().message(), HasSubstr("empty"));
  EXPECT_FALSE(report.required_columns_present);
  auto st = LoadStatements(absl::StrCat(kHeader, "\n"), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.status().message(), HasSubstr("no data rows"));
  EXPECT_TRUE(report.required_columns_present);
  EXPECT_FALSE(report.at_least_two_years);
}

TEST(StatementsTest, ManyBadCellsAreCountedNotAllListed) {
  std::vector<std::string> rows;
  for (int year = 1; year <= 1500; ++year) {
    std::string row = Row(year);
    row.replace(row.find(",1000,"), 6, ",x,");
    rows.push_back(row);
  }
  ValidationReport report;
  auto st = LoadStatements(Csv(rows), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(report.bad_cell_count, 1500u);
  EXPECT_EQ(report.bad_cells.size(), kMaxBadCells);
  EXPECT_LE(report.errors.size(), 21u);
  EXPECT_LT(st.status().message().size(), 4000u);
}

TEST(CsvReaderTest, RecordLinesCountQuotedLineBreaks) {
  CsvReader reader("a,b\n\n\"x\ny\",2\r\n3,4\n");
  std::vector<std::string> record;
  std::vector<int> lines;
  while (reader.Next(&record)) lines.push_back(reader.record_line());
  EXPECT_THAT(lines, ElementsAre(1, 3, 5));
  EXPECT_EQ(reader.unterminated_quote_line(), 0);
}

TEST(CsvReaderTest, SkipTellsBlankRecordsWithoutKeepingThem) {
  CsvReader reader("a,b\n , \n\"\",\"\"\n\"x\ny\",2\n");
  std::vector<bool> blanks;
  bool blank = false;
  while (reader.Skip(&blank)) blanks.push_back(blank);
  EXPECT_THAT(blanks, ElementsAre(false, true, true, false));
  EXPECT_EQ(reader.record_line(), 4);
}

TEST(CsvReaderTest, UnterminatedQuoteIsReportedWithItsLine) {
  CsvReader reader("a,b\n1,2\n3,\"4\n5,6\n");
  std::vector<std::string> record;
  std::vector<std::vector<std::string>> records;
  while (reader.Next(&record)) records.push_back(record);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_THAT(records[2], ElementsAre("3", "4\n5,6\n"));  // as Python's csv module reads it
  EXPECT_EQ(reader.unterminated_quote_line(), 3);
}

TEST(StatementsTest, UnterminatedQuoteIsFatalAndSaysSo) {
  ValidationReport report;
  auto st = LoadStatements(
      absl::StrCat(kHeader, "\n", Row(2020), "\n2021,\"1000,400\n", Row(2022), "\n"), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.status().message(),
              HasSubstr("unterminated quote: the quoted field that opens on CSV line 3 never "
                        "closes"));
  EXPECT_EQ(report.unterminated_quote_line, 3);
  EXPECT_TRUE(report.fatal());
}

TEST(StatementsTest, RaggedRowsSaySoWithTheirLine) {
  ValidationReport report;
  auto st = LoadStatements(
      absl::StrCat(kHeader, "\n", Row(2020), "\n\n2021,1000,400\n", Row(2022), "\n"), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.status().message(),
              HasSubstr("ragged row: data row 2 (CSV line 4) has 3 cells, the header has 15 "
                        "columns; the required cells past the last one are missing"));
  EXPECT_THAT(st.status().message(), HasSubstr("data row 2 (CSV line 4), column interest_expense"));

  st = LoadStatements(Csv({Row(2020), absl::StrCat(Row(2021), ",7,8")}), &report);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_THAT(absl::StrJoin(report.warnings, "; "),
              HasSubstr("ragged row: data row 2 (CSV line 3) has 17 cells, the header has 15 "
                        "columns; the extra cells are ignored"));
}

TEST(StatementsTest, DuplicateYearNamesBothLines) {
  ValidationReport report;
  auto st = LoadStatements(Csv({Row(2020), Row(2021), Row(2020)}), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.status().message(),
              HasSubstr("duplicate year 2020 at data rows 1 and 3 (CSV lines 2 and 4)"));
}

TEST(StatementsTest, MoreRowsThanTheLimitIsFatalAndNamesTheLimit) {
  std::vector<std::string> rows;
  for (size_t i = 0; i <= kMaxDataRows; ++i) rows.push_back(Row(static_cast<int>(1000 + i)));
  ValidationReport report;
  auto st = LoadStatements(Csv(rows), &report);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(report.too_many_rows);
  EXPECT_THAT(st.status().message(), HasSubstr("more than 100000 data rows (CSV line 100002"));
  rows.pop_back();
  EXPECT_TRUE(LoadStatements(Csv(rows), &report).ok());
}

}  // namespace
}  // namespace sandgate::playbooks::financial
