"""analyze_financials.py on inputs that used to break it: CSV errors (an unterminated quote,
ragged rows) are named with their line, and a file of many years gives bounded artifacts (a
sampled chart, a memo whose lists are cut) whose metrics still cover every year.

The 64 MiB case runs in tests/playbooks/financial_analyst/at_limit_test.cc, in the sandbox."""

import os
import unittest

from analyze_sample_test import run_analyze, temp_dir

HEADER = ("year,revenue,cost_of_revenue,operating_income,interest_expense,net_income,"
          "accounts_receivable,inventory,total_current_assets,total_assets,"
          "total_current_liabilities,total_liabilities,shareholders_equity,operating_cash_flow,"
          "capital_expenditures")


def row(year, revenue=1000, equity=800):
    """total_assets 2000 = total_liabilities 1200 + shareholders_equity 800 unless told."""
    return "%d,%d,400,200,20,100,100,50,500,2000,250,1200,%d,150,60" % (year, revenue, equity)


def write(case, text, name="input.csv"):
    path = os.path.join(temp_dir(case), name)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    return path


class CsvErrorsTest(unittest.TestCase):
    def test_unterminated_quote_names_its_line(self):
        text = "\n".join([HEADER, row(2020), '2021,"1000,400', row(2022), row(2023)]) + "\n"
        result = run_analyze(self, write(self, text))
        self.assertEqual(result.rc, 2, result.stdout + result.stderr)
        self.assertIn("fatal: unterminated quote: the quoted field that opens on CSV line 3 "
                      "never closes", result.stderr)
        self.assertEqual(os.listdir(result.out), ["analysis_run.json"])

    def test_short_row_is_named_ragged_with_its_line(self):
        text = "\n".join([HEADER, row(2020), "2021,1000,400", row(2022)]) + "\n"
        result = run_analyze(self, write(self, text))
        self.assertEqual(result.rc, 2, result.stdout + result.stderr)
        self.assertIn("fatal: ragged row: data row 2 (CSV line 3) has 3 cells, the header has "
                      "15 columns", result.stderr)

    def test_long_row_is_a_ragged_warning(self):
        text = "\n".join([HEADER, row(2020), row(2021) + ",7,8"]) + "\n"
        result = run_analyze(self, write(self, text))
        self.assertEqual(result.rc, 0, result.stdout + result.stderr)
        self.assertIn("warning: ragged row: data row 2 (CSV line 3) has 17 cells, the header "
                      "has 15 columns; the extra cells are ignored", result.stderr)

    def test_invalid_utf8_deep_in_the_file_is_fatal_not_a_traceback(self):
        path = os.path.join(temp_dir(self), "input.csv")
        with open(path, "wb") as handle:
            handle.write(("\n".join([HEADER] + [row(y) for y in range(1, 3001)]) + "\n").encode())
            handle.write(b"3001,\xff\xfe\n")
        result = run_analyze(self, path)
        self.assertEqual(result.rc, 2, result.stderr)
        self.assertIn("is not UTF-8 text", result.stderr)
        self.assertNotIn("Traceback", result.stderr)

    def test_messages_are_capped(self):
        rows = [HEADER] + ["%d,x,400,200,20,100,100,50,500,2000,250,1200,800,150,60" % y
                           for y in range(1000, 1500)]
        result = run_analyze(self, write(self, "\n".join(rows) + "\n"))
        self.assertEqual(result.rc, 2)
        self.assertLess(result.stderr.count("\n"), 30, result.stderr[:2000])
        self.assertIn("480 more errors not listed", result.stderr)


class ManyYearsTest(unittest.TestCase):
    """5,000 years whose balance sheet never balances and whose revenue swings every year."""

    @classmethod
    def setUpClass(cls):
        cls.years = 5000
        lines = [HEADER] + [row(y, revenue=1000 if y % 2 else 1300, equity=805)
                            for y in range(1, cls.years + 1)]
        cls.text = "\n".join(lines) + "\n"

    def setUp(self):
        self.result = run_analyze(self, write(self, self.text))
        self.assertEqual(self.result.rc, 0, self.result.stderr)

    def test_every_year_has_a_metrics_row(self):
        self.assertEqual(len(self.result.metrics_by_year()), self.years)

    def test_chart_is_sampled_and_says_so(self):
        svg = self.result.text("financial_trends.svg")
        self.assertLess(len(svg), 400_000)
        self.assertIn("200 of 5000 years plotted, evenly spaced", svg)
        self.assertIn("plots 200 of the 5000 years", self.result.text("investment_analysis.md"))

    def test_memo_lists_are_bounded(self):
        memo = self.result.text("investment_analysis.md")
        self.assertLess(len(memo), 30_000)
        self.assertIn("more (see analysis_run.json)", memo)
        self.assertIn("earlier year(s) with hits are listed in unusual_movements.csv", memo)
        failures = self.result.manifest()["validation_results"]["accounting_equation_failures"]
        self.assertEqual(len(failures), self.years)


if __name__ == "__main__":
    unittest.main()
