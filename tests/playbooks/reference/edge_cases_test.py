"""analyze_financials.py on the edge-case inputs of tests/data/financial/: undefined metrics
stay empty, sorting and equation failures are reported, odd layouts give the sample's numbers,
and fatal inputs exit 2 with a message naming the column, row or year while still writing
analysis_run.json."""

import csv
import os
import unittest

from analyze_sample_test import (EDGE_DIR, SAMPLE, VALIDATION_KEYS,
                                 assert_memo_headings, assert_metrics_match, assert_safe_svg,
                                 expected_hits, read_input, run_analyze, temp_dir)


def edge(name):
    return EDGE_DIR / name


class ZeroDenominatorsTest(unittest.TestCase):
    def setUp(self):
        self.result = run_analyze(self, edge("zero_denominators.csv"))
        self.assertEqual(self.result.rc, 0, self.result.stderr)
        self.m = self.result.metrics_by_year()

    def test_undefined_cells_are_empty(self):
        m = self.m
        # 2022: revenue 0, total_current_liabilities 0, equity 0, interest 0, net income 0.
        for name in ("gross_margin", "operating_margin", "net_margin", "current_ratio",
                     "quick_ratio", "liabilities_to_equity", "interest_coverage", "fcf_margin",
                     "cash_conversion", "inventory_growth"):
            self.assertEqual(m[2022][name], "", name)
        # 2023: previous revenue, receivables and inventory 0; equity 0 and average equity 0.
        for name in ("revenue_growth", "receivables_growth", "inventory_growth",
                     "liabilities_to_equity", "roe"):
            self.assertEqual(m[2023][name], "", name)
        for name in ("revenue_growth", "roa", "roe", "receivables_growth", "inventory_growth"):
            self.assertEqual(m[2021][name], "", name)

    def test_defined_cells_around_zeros(self):
        m = self.m
        self.assertEqual(float(m[2022]["revenue_growth"]), -1.0)  # (0 - 1000) / 1000
        self.assertEqual(float(m[2022]["receivables_growth"]), -1.0)
        self.assertEqual(float(m[2022]["roa"]), 0.0)  # net income 0 over avg assets 950
        self.assertEqual(float(m[2022]["roe"]), 0.0)  # over avg equity (400 + 0) / 2
        self.assertEqual(float(m[2022]["free_cash_flow"]), 5.0)
        self.assertAlmostEqual(float(m[2023]["roa"]), 20 / ((800 + 900) / 2), places=8)
        self.assertAlmostEqual(float(m[2023]["quick_ratio"]), (400 - 10) / 100, places=8)
        assert_metrics_match(self, self.result, edge("zero_denominators.csv"))
        for row in self.result.rows("calculated_metrics.csv"):
            for cell in row:
                self.assertNotIn(cell.lower(), ("nan", "inf", "-inf"))

    def test_no_growth_hits_from_a_zero_base(self):
        hits = self.result.hits()
        columns, rows = read_input(edge("zero_denominators.csv"))
        self.assertEqual(hits, expected_hits(columns, rows))
        self.assertIn((2022, "revenue", "yoy_move_15pct"), hits)
        self.assertFalse([h for h in hits if h[0] == 2023 and h[1] in
                          ("revenue", "cost_of_revenue", "net_income", "interest_expense",
                           "accounts_receivable", "inventory", "shareholders_equity")])
        self.assertFalse([h for h in hits if h[2] == "operating_margin_2pp"])

    def test_memo_and_chart_survive(self):
        assert_memo_headings(self, self.result.text("investment_analysis.md"))
        assert_safe_svg(self, self.result.text("financial_trends.svg"))


class LayoutVariantsTest(unittest.TestCase):
    """Inputs that hold the sample's numbers in another layout give the sample's metrics."""

    def same_as_sample(self, name):
        result = run_analyze(self, edge(name))
        self.assertEqual(result.rc, 0, result.stderr)
        sample = run_analyze(self, SAMPLE)
        self.assertEqual(result.text("calculated_metrics.csv"),
                         sample.text("calculated_metrics.csv"))
        assert_metrics_match(self, result, SAMPLE)
        return result, sample

    def test_unsorted_years_are_sorted_and_reported(self):
        result, sample = self.same_as_sample("unsorted_years.csv")
        v = result.manifest()["validation_results"]
        self.assertFalse(v["years_ordered"])
        self.assertTrue(v["years_unique"])
        self.assertEqual(result.manifest()["year_range"], [2020, 2025])
        self.assertIn("sorted", result.stdout)
        self.assertIn("not in ascending order", result.stderr)
        self.assertEqual(result.hits(), sample.hits())
        self.assertIn("sorted by year", result.text("investment_analysis.md"))

    def test_reordered_and_extra_columns(self):
        result, sample = self.same_as_sample("reordered_extra_columns.csv")
        hits = result.hits()
        columns, rows = read_input(edge("reordered_extra_columns.csv"))
        self.assertEqual(hits, expected_hits(columns, rows))  # input column order for items
        self.assertIn((2022, "headcount", "yoy_move_15pct"), hits)  # 455 -> 560
        self.assertIn((2025, "headcount", "yoy_move_15pct"), hits)  # 610 -> 720
        self.assertNotIn((2021, "headcount", "yoy_move_15pct"), hits)  # +11%
        self.assertFalse([h for h in hits if h[1] == "segment"])  # a text column
        self.assertEqual(set(h for h in hits if h[1] != "headcount"), set(sample.hits()))
        items_2025 = [h[1] for h in hits if h[0] == 2025 and h[2] == "yoy_move_15pct"]
        self.assertEqual(items_2025[0], "capital_expenditures")  # first column after segment
        memo = result.text("investment_analysis.md")
        self.assertIn("headcount", memo)
        self.assertIn("segment", memo)

    def test_negative_capex_uses_abs(self):
        result, sample = self.same_as_sample("negative_capex.csv")
        self.assertEqual(float(result.metrics_by_year()[2025]["free_cash_flow"]), 39800 - 33900)
        self.assertEqual(result.hits(), sample.hits())
        self.assertIn("33,900", result.text("investment_analysis.md"))

    def test_bom_and_crlf(self):
        raw = edge("bom_crlf.csv").read_bytes()
        self.assertTrue(raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw)
        result, sample = self.same_as_sample("bom_crlf.csv")
        self.assertEqual(result.hits(), sample.hits())
        manifest = result.manifest()
        self.assertEqual(manifest["input_filename"], "bom_crlf.csv")
        self.assertTrue(manifest["validation_results"]["required_columns_present"])

    def test_no_gross_profit_column_is_derived(self):
        result, _ = self.same_as_sample("no_gross_profit.csv")
        self.assertAlmostEqual(float(result.metrics_by_year()[2021]["gross_margin"]),
                               (112900 - 36128) / 112900, places=8)
        memo = result.text("investment_analysis.md")
        self.assertIn("derived as revenue - cost_of_revenue", memo)
        self.assertFalse([h for h in result.hits() if h[1] == "gross_profit"])

    def test_required_columns_only(self):
        result = run_analyze(self, edge("required_columns_only.csv"))
        self.assertEqual(result.rc, 0, result.stderr)
        assert_metrics_match(self, result, edge("required_columns_only.csv"))
        memo = result.text("investment_analysis.md")
        assert_memo_headings(self, memo)
        self.assertIn("no deferred_revenue figure for 2025", memo)
        self.assertIn("no stock_based_compensation figure for 2025", memo)
        self.assertIn("no long_term_debt figure for 2025", memo)
        self.assertIn("optional column(s) absent: gross_profit, deferred_revenue, "
                      "stock_based_compensation, long_term_debt, cash_and_equivalents", memo)
        for item in ("accounts_receivable", "capital_expenditures", "interest_expense"):
            self.assertIn(item, memo)


class OptionalCellsTest(unittest.TestCase):
    def test_bad_optional_cells_are_not_fatal(self):
        """A text cell in gross_profit falls back to revenue - cost_of_revenue for that row; a
        blank deferred_revenue cell only drops the growths that need it."""
        work = temp_dir(self)
        path = os.path.join(work, "optional_cells.csv")
        with open(SAMPLE, newline="") as handle:
            rows = list(csv.reader(handle))
        gp, dr = rows[0].index("gross_profit"), rows[0].index("deferred_revenue")
        rows[3][gp] = "n/a"  # 2022
        rows[6][dr] = ""  # 2025
        with open(path, "w", newline="") as handle:
            csv.writer(handle, lineterminator="\n").writerows(rows)
        result = run_analyze(self, path)
        self.assertEqual(result.rc, 0, result.stderr)
        self.assertTrue(result.manifest()["validation_results"]["all_values_numeric"])
        m = result.metrics_by_year()
        self.assertAlmostEqual(float(m[2022]["gross_margin"]), (148300 - 45973) / 148300,
                               places=8)
        hits = result.hits()
        self.assertFalse([h for h in hits if h[1] == "gross_profit"])  # a text column now
        self.assertIn((2021, "deferred_revenue", "yoy_move_15pct"), hits)
        self.assertFalse([h for h in hits if h[1] == "deferred_revenue" and h[0] == 2025])
        assert_memo_headings(self, result.text("investment_analysis.md"))


class ExtremeValuesTest(unittest.TestCase):
    def test_values_near_the_float_limits_still_give_every_file(self):
        """Free cash flow of -1e308 next to operating cash flow of 1e308 spans more than a
        double can hold; the chart's axis must cope instead of crashing before the manifest."""
        work = temp_dir(self)
        path = os.path.join(work, "extreme.csv")
        with open(SAMPLE, newline="") as handle:
            rows = list(csv.reader(handle))
        ocf, capex = rows[0].index("operating_cash_flow"), rows[0].index("capital_expenditures")
        rows[6][ocf] = "1e308"  # 2025
        rows[5][capex] = "-1e308"  # 2024
        with open(path, "w", newline="") as handle:
            csv.writer(handle, lineterminator="\n").writerows(rows)
        result = run_analyze(self, path)
        self.assertEqual(result.rc, 0, result.stderr)
        assert_safe_svg(self, result.text("financial_trends.svg"))
        self.assertEqual(result.manifest()["row_count"], 6)


class WarningsTest(unittest.TestCase):
    def test_broken_accounting_equation_lists_years(self):
        result = run_analyze(self, edge("broken_equation.csv"))
        self.assertEqual(result.rc, 0, result.stderr)
        v = result.manifest()["validation_results"]
        self.assertFalse(v["accounting_equation_passed_every_row"])
        # 2021 is off by 0.5 (inside the tolerance of 1), 2022 by 2, 2024 by 500.
        self.assertEqual(v["accounting_equation_failures"], [2022, 2024])
        self.assertIn("2022", result.stderr)
        memo = result.text("investment_analysis.md")
        self.assertIn("2022, 2024", memo)
        self.assertEqual(len(os.listdir(result.out)), 6)

    def test_single_year(self):
        result = run_analyze(self, edge("single_year.csv"))
        self.assertEqual(result.rc, 0, result.stderr)
        manifest = result.manifest()
        self.assertEqual(manifest["row_count"], 1)
        self.assertEqual(manifest["year_range"], [2025, 2025])
        self.assertFalse(manifest["validation_results"]["at_least_two_years"])
        m = result.metrics_by_year()
        self.assertEqual(sorted(m), [2025])
        for name in ("revenue_growth", "roa", "roe", "receivables_growth", "inventory_growth"):
            self.assertEqual(m[2025][name], "", name)
        self.assertAlmostEqual(float(m[2025]["operating_margin"]), 19703 / 238700, places=8)
        self.assertEqual(result.rows("unusual_movements.csv"),
                         [["year", "item", "rule", "previous_value", "current_value", "change",
                           "detail"]])
        memo = result.text("investment_analysis.md")
        assert_memo_headings(self, memo)
        self.assertIn("single year", memo)
        assert_safe_svg(self, result.text("financial_trends.svg"))


class ThresholdBoundaryTest(unittest.TestCase):
    """Values that sit on a threshold, some a float rounding error below it: the 1e-12 slack
    makes them fire; 14.9% (headcount) and 1.85 pp (2023 margin) do not."""

    def test_hits_at_the_boundaries(self):
        result = run_analyze(self, edge("boundary_thresholds.csv"))
        self.assertEqual(result.rc, 0, result.stderr)
        self.assertLess((0.69 - 0.6) / 0.6, 0.15)  # the file really holds below-threshold floats
        self.assertLess(138 / 1150 - 100 / 1000, 0.02)
        self.assertLess((15.5 - 12.4) / 12.4 - 0.15, 0.10)
        self.assertEqual(result.hits(), [
            (2022, "revenue", "yoy_move_15pct"),
            (2022, "cost_of_revenue", "yoy_move_15pct"),
            (2022, "operating_income", "yoy_move_15pct"),
            (2022, "accounts_receivable", "yoy_move_15pct"),
            (2022, "price_index", "yoy_move_15pct"),
            (2022, "operating_margin", "operating_margin_2pp"),
            (2022, "accounts_receivable", "receivables_outpace_revenue_10pp"),
            (2023, "revenue", "yoy_move_15pct"),
            (2023, "cost_of_revenue", "yoy_move_15pct"),
        ])
        columns, rows = read_input(edge("boundary_thresholds.csv"))
        self.assertEqual(result.hits(), expected_hits(columns, rows))
        recv = [r for r in result.dicts("unusual_movements.csv")
                if r["rule"] == "receivables_outpace_revenue_10pp"][0]
        self.assertAlmostEqual(float(recv["previous_value"]), 0.15, places=8)  # revenue growth
        self.assertAlmostEqual(float(recv["current_value"]), 0.25, places=8)  # receivables


class FatalInputsTest(unittest.TestCase):
    def fatal(self, name):
        result = run_analyze(self, edge(name))
        self.assertEqual(result.rc, 2, result.stdout + result.stderr)
        self.assertEqual(os.listdir(result.out), ["analysis_run.json"])
        manifest = result.manifest()
        self.assertEqual(set(manifest["validation_results"]), VALIDATION_KEYS)
        self.assertEqual(manifest["input_filename"], name)
        self.assertEqual(manifest["generated_filenames"], ["analysis_run.json"])
        return result, manifest["validation_results"]

    def test_missing_column(self):
        result, v = self.fatal("missing_column.csv")
        self.assertIn("fatal: missing required column(s): interest_expense", result.stderr)
        self.assertFalse(v["required_columns_present"])
        self.assertEqual(v["missing_columns"], ["interest_expense"])

    def test_non_numeric_cell(self):
        result, v = self.fatal("non_numeric_cell.csv")
        self.assertIn("fatal: non-numeric value 'n/a' in column revenue at data row 3 "
                      "(CSV line 4, year 2022)", result.stderr)
        self.assertFalse(v["all_values_numeric"])
        self.assertEqual(v["bad_cells"], [{"row": 3, "column": "revenue", "value": "n/a"}])

    def test_duplicate_year(self):
        result, v = self.fatal("duplicate_year.csv")
        self.assertIn("fatal: duplicate year 2023 at data rows 4 and 5", result.stderr)
        self.assertFalse(v["years_unique"])

    def test_empty_file(self):
        result, v = self.fatal("empty.csv")
        self.assertIn("empty", result.stderr)
        self.assertFalse(v["required_columns_present"])
        self.assertEqual(len(v["missing_columns"]), 15)


if __name__ == "__main__":
    unittest.main()
