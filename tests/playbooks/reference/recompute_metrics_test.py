"""recompute_metrics.py: an independent second implementation of three latest-year metrics
that agrees with analyze_financials.py and catches a tampered calculated_metrics.csv."""

import csv
import shutil
import subprocess
import sys
import unittest

from analyze_sample_test import EDGE_DIR, RECOMPUTE, SAMPLE, run_analyze, temp_dir


def recompute(input_path, cwd):
    return subprocess.run([sys.executable, str(RECOMPUTE), str(input_path)], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def values(stdout):
    """{'year': '2025', 'revenue_growth': '0.137...', ...} from the first output line."""
    return dict(field.split("=", 1) for field in stdout.splitlines()[0].split())


def tamper(path, year, column, new_value):
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    col = rows[0].index(column)
    for row in rows[1:]:
        if row[0] == str(year):
            row[col] = new_value
    with open(path, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


class RecomputeTest(unittest.TestCase):
    def analyzed(self, input_path):
        result = run_analyze(self, input_path)
        self.assertEqual(result.rc, 0, result.stderr)
        return result.out

    def test_agrees_with_analyze_on_sample(self):
        out = self.analyzed(SAMPLE)
        completed = recompute(SAMPLE, out)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        self.assertEqual(completed.stdout.splitlines()[-1], "match")
        got = values(completed.stdout)
        self.assertEqual(got["year"], "2025")
        self.assertAlmostEqual(float(got["revenue_growth"]), (238700 - 209800) / 209800,
                               places=9)
        self.assertAlmostEqual(float(got["operating_margin"]), 19703 / 238700, places=9)
        self.assertEqual(float(got["free_cash_flow"]), 39800 - 33900)

    def test_detects_each_tampered_metric(self):
        for column, bad in (("revenue_growth", "0.14"), ("operating_margin", "0.0826"),
                            ("free_cash_flow", "5901"), ("free_cash_flow", "")):
            with self.subTest(column=column, value=bad):
                out = self.analyzed(SAMPLE)
                tamper(out / "calculated_metrics.csv", 2025, column, bad)
                completed = recompute(SAMPLE, out)
                self.assertEqual(completed.returncode, 1, completed.stdout)
                self.assertIn("MISMATCH %s" % column, completed.stdout)
                self.assertNotIn("\nmatch", completed.stdout)

    def test_tampering_another_year_is_not_its_business(self):
        out = self.analyzed(SAMPLE)
        tamper(out / "calculated_metrics.csv", 2024, "free_cash_flow", "1")
        self.assertEqual(recompute(SAMPLE, out).returncode, 0)

    def test_missing_latest_year_row_is_a_mismatch(self):
        out = self.analyzed(SAMPLE)
        tamper(out / "calculated_metrics.csv", 2025, "year", "2026")
        completed = recompute(SAMPLE, out)
        self.assertEqual(completed.returncode, 1)
        self.assertIn("MISMATCH year", completed.stdout)

    def test_agrees_on_edge_inputs(self):
        for name, blank in (("unsorted_years.csv", False), ("negative_capex.csv", False),
                            ("bom_crlf.csv", False), ("single_year.csv", True),
                            ("zero_denominators.csv", True), ("reordered_extra_columns.csv", False)):
            with self.subTest(name=name):
                out = self.analyzed(EDGE_DIR / name)
                completed = recompute(EDGE_DIR / name, out)
                self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
                self.assertEqual(completed.stdout.splitlines()[-1], "match")
                self.assertEqual(values(completed.stdout)["revenue_growth"] == "", blank)

    def test_without_metrics_file_only_prints(self):
        work = temp_dir(self)
        completed = recompute(SAMPLE, work)
        self.assertEqual(completed.returncode, 0)
        self.assertIn("nothing compared", completed.stdout)
        self.assertEqual(values(completed.stdout)["free_cash_flow"], "5900")

    def test_bad_input_exits_2(self):
        # (a missing interest_expense does not concern it: it reads only five columns)
        work = temp_dir(self)
        no_revenue = work + "/no_revenue.csv"
        with open(SAMPLE) as src, open(no_revenue, "w") as dst:
            dst.write(src.read().replace("year,revenue,", "year,sales,", 1))
        for path in (no_revenue, EDGE_DIR / "non_numeric_cell.csv",
                     EDGE_DIR / "duplicate_year.csv", EDGE_DIR / "empty.csv"):
            with self.subTest(path=path):
                completed = recompute(path, work)
                self.assertEqual(completed.returncode, 2, completed.stdout)
                self.assertTrue(completed.stderr.startswith("error:"), completed.stderr)

    def test_is_independent_of_analyze(self):
        source = RECOMPUTE.read_text()
        self.assertNotIn("import analyze_financials", source)
        self.assertNotIn("from analyze_financials", source)
        # It runs alone: copied into an empty directory with nothing else beside it.
        work = temp_dir(self)
        shutil.copy(RECOMPUTE, work)
        completed = subprocess.run([sys.executable, "recompute_metrics.py", str(SAMPLE)],
                                   cwd=work, capture_output=True, text=True, timeout=60)
        self.assertEqual(completed.returncode, 0, completed.stderr)


if __name__ == "__main__":
    unittest.main()
