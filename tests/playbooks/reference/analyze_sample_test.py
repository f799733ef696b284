"""The reference analyze_financials.py on the sample statements, held to the contract
(docs/financial-analyst.md). Expected values are computed here from the raw CSV with
simple code of the test's own, never read back from the program.

Also holds the helpers the other *_test.py files of this folder import (functions only).
"""

import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path


def source_dir():
    env = os.environ.get("SANDGATE_SOURCE_DIR")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[3]


REPO = source_dir()
PROGRAM_DIR = REPO / "daemon" / "playbooks" / "financial_analyst" / "reference"
ANALYZE = PROGRAM_DIR / "analyze_financials.py"
RECOMPUTE = PROGRAM_DIR / "recompute_metrics.py"
SAMPLE = REPO / "tests" / "data" / "northstar_cloud_financial_statements.csv"
EDGE_DIR = REPO / "tests" / "data" / "financial"

METRIC_COLUMNS = [
    "year", "revenue_growth", "gross_margin", "operating_margin", "net_margin",
    "current_ratio", "quick_ratio", "liabilities_to_equity", "roa", "roe",
    "interest_coverage", "free_cash_flow", "fcf_margin", "cash_conversion",
    "receivables_growth", "inventory_growth",
]
MOVEMENT_COLUMNS = ["year", "item", "rule", "previous_value", "current_value", "change",
                    "detail"]
RULE_ORDER = ["yoy_move_15pct", "operating_margin_2pp", "receivables_outpace_revenue_10pp"]
HEADINGS = [
    "Executive view", "KPI table", "Profitability", "Liquidity and leverage",
    "Cash flow and earnings quality", "Unusual movements", "Bull case", "Bear case",
    "Diligence questions", "Data limitations", "Conclusion",
]
ARTIFACTS = ["analyze_financials.py", "calculated_metrics.csv", "unusual_movements.csv",
             "investment_analysis.md", "financial_trends.svg", "analysis_run.json"]
VALIDATION_KEYS = {
    "required_columns_present", "missing_columns", "all_values_numeric", "bad_cells",
    "years_unique", "years_ordered", "accounting_equation_passed_every_row",
    "accounting_equation_failures", "at_least_two_years",
}
MANIFEST_KEYS = {"input_filename", "row_count", "year_range", "validation_results",
                 "generated_filenames", "execution_directory"}


class Run:
    def __init__(self, completed, out_dir):
        self.rc = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.out = Path(out_dir)

    def text(self, name):
        return (self.out / name).read_text(encoding="utf-8")

    def rows(self, name):
        with open(self.out / name, newline="", encoding="utf-8") as handle:
            return list(csv.reader(handle))

    def dicts(self, name):
        with open(self.out / name, newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))

    def manifest(self):
        return json.loads(self.text("analysis_run.json"))

    def metrics_by_year(self):
        return {int(row["year"]): row for row in self.dicts("calculated_metrics.csv")}

    def hits(self):
        return [(int(r["year"]), r["item"], r["rule"]) for r in self.dicts("unusual_movements.csv")]


def temp_dir(case):
    path = tempfile.mkdtemp(prefix="sandgate-ref-")
    case.addCleanup(shutil.rmtree, path, True)
    return path


def run_analyze(case, input_path, out_dir=None, cwd=None, extra=()):
    """Runs analyze_financials.py into a fresh temp dir (or out_dir); returns a Run."""
    out_dir = out_dir or os.path.join(temp_dir(case), "out")
    argv = [sys.executable, str(ANALYZE), str(input_path)]
    if out_dir is not None:
        argv += ["--out-dir", str(out_dir)]
    argv += list(extra)
    completed = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=120)
    return Run(completed, out_dir)


def read_input(path):
    """Raw statements as (columns, list of dicts of floats-or-None keyed by column)."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        columns = [c.strip() for c in reader.fieldnames]
        rows = []
        for raw in reader:
            row = {}
            for key, value in raw.items():
                try:
                    row[key.strip()] = float(value)
                except (TypeError, ValueError):
                    row[key.strip()] = None
            rows.append(row)
    rows.sort(key=lambda r: r["year"])
    return columns, rows


def div(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def expected_metrics(rows):
    """The contract's metric formulas, written out again independently of the program."""
    out = {}
    for i, r in enumerate(rows):
        p = rows[i - 1] if i else None
        gp = r.get("gross_profit")
        if gp is None:
            gp = r["revenue"] - r["cost_of_revenue"]
        fcf = r["operating_cash_flow"] - abs(r["capital_expenditures"])
        grow = (lambda k: div(r[k] - p[k], abs(p[k])) if p else None)
        out[int(r["year"])] = {
            "revenue_growth": grow("revenue"),
            "gross_margin": div(gp, r["revenue"]),
            "operating_margin": div(r["operating_income"], r["revenue"]),
            "net_margin": div(r["net_income"], r["revenue"]),
            "current_ratio": div(r["total_current_assets"], r["total_current_liabilities"]),
            "quick_ratio": div(r["total_current_assets"] - r["inventory"],
                               r["total_current_liabilities"]),
            "liabilities_to_equity": div(r["total_liabilities"], r["shareholders_equity"]),
            "roa": div(r["net_income"], (r["total_assets"] + p["total_assets"]) / 2) if p else None,
            "roe": div(r["net_income"], (r["shareholders_equity"] + p["shareholders_equity"]) / 2)
            if p else None,
            "interest_coverage": div(r["operating_income"], r["interest_expense"]),
            "free_cash_flow": fcf,
            "fcf_margin": div(fcf, r["revenue"]),
            "cash_conversion": div(r["operating_cash_flow"], r["net_income"]),
            "receivables_growth": grow("accounts_receivable"),
            "inventory_growth": grow("inventory"),
        }
    return out


def expected_hits(columns, rows):
    """The (year, item, rule) triples the three rules must produce, in contract order."""
    numeric = [c for c in columns if c != "year"
               and all(r.get(c) is not None for r in rows)]
    metrics = expected_metrics(rows)
    hits = []
    for i in range(1, len(rows)):
        p, r = rows[i - 1], rows[i]
        year = int(r["year"])
        for c in numeric:
            if p[c] != 0 and abs((r[c] - p[c]) / abs(p[c])) >= 0.15 - 1e-12:
                hits.append((year, c, "yoy_move_15pct"))
        a, b = metrics[year]["operating_margin"], metrics[int(p["year"])]["operating_margin"]
        if a is not None and b is not None and abs(a - b) >= 0.02 - 1e-12:
            hits.append((year, "operating_margin", "operating_margin_2pp"))
        rg, vg = metrics[year]["receivables_growth"], metrics[year]["revenue_growth"]
        if rg is not None and vg is not None and rg - vg >= 0.10 - 1e-12:
            hits.append((year, "accounts_receivable", "receivables_outpace_revenue_10pp"))
    return hits


def assert_metrics_match(case, run, input_path):
    """Every cell of calculated_metrics.csv equals the independent computation."""
    _, rows = read_input(input_path)
    want = expected_metrics(rows)
    got = run.metrics_by_year()
    case.assertEqual(sorted(got), sorted(want))
    for year, metrics in want.items():
        for name, value in metrics.items():
            cell = got[year][name]
            with case.subTest(year=year, metric=name):
                if value is None:
                    case.assertEqual(cell, "", "expected an empty cell")
                else:
                    case.assertNotEqual(cell, "")
                    case.assertTrue(math.isclose(float(cell), value, rel_tol=1e-9,
                                                 abs_tol=1e-12), (cell, value))


def assert_memo_headings(case, memo):
    headings = [line[3:].strip() for line in memo.splitlines() if line.startswith("## ")]
    case.assertEqual(headings, HEADINGS)


def assert_safe_svg(case, svg_text):
    """Parses as XML, 4 titled panels, no script, external reference or raster image."""
    root = ET.fromstring(svg_text.encode("utf-8"))
    case.assertTrue(root.tag.endswith("svg"), root.tag)
    lowered = svg_text.lower()
    for bad in ("<script", "<image", "<foreignobject", "javascript:", "url(", "@import",
                "data:image", "onload", "onclick"):
        case.assertNotIn(bad, lowered)
    for element in root.iter():
        for attr in element.attrib:
            case.assertNotIn("href", attr.lower(), "external reference via %s" % attr)
            case.assertFalse(attr.lower().startswith("on"), "event handler %s" % attr)
    panels = [e for e in root.iter() if e.tag.endswith("}g") and e.get("class") == "panel"]
    case.assertEqual(len(panels), 4)
    for panel in panels:
        texts = ["".join(t.itertext()) for t in panel.iter() if t.tag.endswith("}text")]
        titles = [t for t in panel.iter()
                  if t.tag.endswith("}text") and t.get("class") == "panel-title"]
        case.assertEqual(len(titles), 1)
        axis = [t for t in panel.iter()
                if t.tag.endswith("}text") and t.get("class") == "axis-label"]
        case.assertEqual(len(axis), 2, "an x and a y axis label")
        legend = [t for t in panel.iter() if t.tag.endswith("}text") and t.get("class") == "legend"]
        case.assertGreaterEqual(len(legend), 2)
        case.assertTrue(texts)
    return root, panels


class SampleRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sandgate-ref-sample-")
        cls.out = os.path.join(cls.tmp, "out")
        completed = subprocess.run(
            [sys.executable, str(ANALYZE), str(SAMPLE), "--out-dir", cls.out],
            capture_output=True, text=True, timeout=120)
        cls.result = Run(completed, cls.out)
        cls.columns, cls.rows = read_input(SAMPLE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def test_exits_zero_and_writes_six_regular_nonempty_files(self):
        self.assertEqual(self.result.rc, 0, self.result.stderr)
        self.assertEqual(sorted(os.listdir(self.out)), sorted(ARTIFACTS))
        for name in ARTIFACTS:
            path = os.path.join(self.out, name)
            self.assertTrue(os.path.isfile(path) and not os.path.islink(path), name)
            self.assertGreater(os.path.getsize(path), 0, name)

    def test_progress_lines_on_stdout(self):
        lines = self.result.stdout.splitlines()
        self.assertIn("validated 6 rows, years 2020-2025", lines)
        self.assertIn("wrote calculated_metrics.csv (6 rows)", lines)
        self.assertIn("wrote unusual_movements.csv (%d rows)"
                      % len(expected_hits(self.columns, self.rows)), lines)
        self.assertTrue(lines[-1].startswith("done: 6 years 2020-2025"), lines[-1])

    def test_metrics_header_and_rows(self):
        rows = self.result.rows("calculated_metrics.csv")
        self.assertEqual(rows[0], METRIC_COLUMNS)
        self.assertEqual([r[0] for r in rows[1:]], [str(y) for y in range(2020, 2026)])
        self.assertTrue(all(len(r) == len(METRIC_COLUMNS) for r in rows))

    def test_metrics_by_hand(self):
        m = self.result.metrics_by_year()
        self.assertAlmostEqual(float(m[2025]["revenue_growth"]), (238700 - 209800) / 209800,
                               places=8)
        self.assertAlmostEqual(float(m[2025]["operating_margin"]), 19703 / 238700, places=8)
        self.assertAlmostEqual(float(m[2025]["free_cash_flow"]), 39800 - 33900, places=9)
        self.assertAlmostEqual(float(m[2025]["fcf_margin"]), 5900 / 238700, places=8)
        self.assertAlmostEqual(float(m[2025]["receivables_growth"]), (38900 - 27400) / 27400,
                               places=8)
        self.assertAlmostEqual(float(m[2021]["roe"]), -2978 / ((45400 + 33700) / 2), places=8)
        self.assertAlmostEqual(float(m[2024]["roa"]), 14849 / ((231300 + 186400) / 2), places=8)
        self.assertAlmostEqual(float(m[2023]["quick_ratio"]), (119700 - 1900) / 63600, places=8)
        self.assertAlmostEqual(float(m[2020]["interest_coverage"]), -5728 / 1200, places=8)
        self.assertAlmostEqual(float(m[2022]["cash_conversion"]), 27900 / 3351, places=8)
        self.assertAlmostEqual(float(m[2024]["inventory_growth"]), (2300 - 1900) / 1900,
                               places=8)
        for name in ("revenue_growth", "roa", "roe", "receivables_growth", "inventory_growth"):
            self.assertEqual(m[2020][name], "", name)  # no previous year
        self.assertEqual(m[2021]["inventory_growth"], "")  # 2020 inventory is 0

    def test_every_metric_matches_independent_computation(self):
        assert_metrics_match(self, self.result, SAMPLE)

    def test_ratio_cells_have_six_significant_digits(self):
        for row in self.result.dicts("calculated_metrics.csv"):
            for name in METRIC_COLUMNS[1:]:
                cell = row[name]
                self.assertNotIn(cell.lower(), ("nan", "inf", "-inf", "none"))
                if cell and name != "free_cash_flow" and float(cell) != 0:
                    digits = cell.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
                    self.assertGreaterEqual(len(digits), 6, (name, cell))
        gross = self.result.metrics_by_year()[2020]["gross_margin"]
        self.assertEqual(gross, "0.660000")  # 55572 / 84200, padded, not "0.66"

    def test_unusual_movements_header_and_hits(self):
        rows = self.result.rows("unusual_movements.csv")
        self.assertEqual(rows[0], MOVEMENT_COLUMNS)
        want = expected_hits(self.columns, self.rows)
        self.assertEqual(self.result.hits(), want)  # same set, same order
        self.assertIn((2025, "accounts_receivable", "receivables_outpace_revenue_10pp"), want)
        self.assertIn((2025, "operating_margin", "operating_margin_2pp"), want)
        self.assertIn((2025, "interest_expense", "yoy_move_15pct"), want)
        self.assertNotIn((2025, "revenue", "yoy_move_15pct"), want)  # 13.8%

    def test_unusual_movement_values(self):
        by_key = {(int(r["year"]), r["item"], r["rule"]): r
                  for r in self.result.dicts("unusual_movements.csv")}
        ar = by_key[(2025, "accounts_receivable", "receivables_outpace_revenue_10pp")]
        self.assertAlmostEqual(float(ar["change"]),
                               (38900 - 27400) / 27400 - (238700 - 209800) / 209800, places=8)
        om = by_key[(2025, "operating_margin", "operating_margin_2pp")]
        self.assertAlmostEqual(float(om["previous_value"]), 22409 / 209800, places=8)
        self.assertAlmostEqual(float(om["current_value"]), 19703 / 238700, places=8)
        self.assertAlmostEqual(float(om["change"]), 19703 / 238700 - 22409 / 209800, places=8)
        ie = by_key[(2025, "interest_expense", "yoy_move_15pct")]
        self.assertEqual((float(ie["previous_value"]), float(ie["current_value"])), (4300, 6900))
        self.assertAlmostEqual(float(ie["change"]), 2600 / 4300, places=8)
        for (year, item, rule), row in by_key.items():
            self.assertTrue(row["detail"].strip())
            if rule == "yoy_move_15pct":
                prev = [r for r in self.rows if r["year"] == year - 1][0][item]
                cur = [r for r in self.rows if r["year"] == year][0][item]
                self.assertEqual((float(row["previous_value"]), float(row["current_value"])),
                                 (prev, cur))
                self.assertAlmostEqual(float(row["change"]), (cur - prev) / abs(prev),
                                       places=8, msg=(year, item))
        # growth from a negative base divides by its absolute value: -5728 -> -1828 is +68%
        self.assertGreater(float(by_key[(2021, "operating_income", "yoy_move_15pct")]["change"]),
                           0)

    def test_memo_headings_and_ties_to_figures(self):
        memo = self.result.text("investment_analysis.md")
        assert_memo_headings(self, memo)
        self.assertIn("**Fact:**", memo)
        self.assertIn("**Hypothesis:**", memo)
        self.assertIn("northstar_cloud_financial_statements.csv, 2024\u21922025", memo)
        self.assertIn("accounts_receivable grew 42.0% in 2025 vs revenue 13.8%", memo)
        for item, figure in (("deferred_revenue", "49,700"), ("stock_based_compensation", "28,400"),
                             ("capital_expenditures", "33,900"), ("interest_expense", "6,900")):
            self.assertTrue(any(item in line and figure in line for line in memo.splitlines()),
                            "%s %s not tied in the memo" % (item, figure))
        kpi = memo.split("## KPI table", 1)[1].split("## ", 1)[0]
        self.assertIn("| KPI | 2021 | 2022 | 2023 | 2024 | 2025 |", kpi)
        self.assertIn("238,700", kpi)

    def test_memo_statements_are_marked(self):
        memo = self.result.text("investment_analysis.md")
        body = memo.split("## Executive view", 1)[1]
        for line in body.splitlines():
            if line.startswith("- "):
                self.assertTrue(line.startswith("- **Fact:**") or
                                line.startswith("- **Hypothesis:**"), line)

    def test_svg_is_safe_with_four_panels(self):
        root, panels = assert_safe_svg(self, self.result.text("financial_trends.svg"))
        titles = [t.text for p in panels for t in p.iter() if t.get("class") == "panel-title"]
        self.assertEqual(titles, ["Revenue and net income", "Gross, operating and net margins",
                                  "Operating cash flow, capex and free cash flow",
                                  "Receivables growth vs revenue growth"])
        lines = [e for e in root.iter() if e.tag.endswith("}polyline")]
        self.assertGreaterEqual(len(lines), 10)

    def test_manifest(self):
        manifest = self.result.manifest()
        self.assertEqual(set(manifest), MANIFEST_KEYS)
        self.assertEqual(set(manifest["validation_results"]), VALIDATION_KEYS)
        self.assertEqual(manifest["input_filename"], "northstar_cloud_financial_statements.csv")
        self.assertEqual(manifest["row_count"], 6)
        self.assertEqual(manifest["year_range"], [2020, 2025])
        self.assertEqual(manifest["generated_filenames"], ARTIFACTS)
        self.assertEqual(manifest["execution_directory"], os.path.abspath(self.out))
        v = manifest["validation_results"]
        self.assertEqual(v, {
            "required_columns_present": True, "missing_columns": [], "all_values_numeric": True,
            "bad_cells": [], "years_unique": True, "years_ordered": True,
            "accounting_equation_passed_every_row": True, "accounting_equation_failures": [],
            "at_least_two_years": True})

    def test_script_artifact_is_the_program_and_reruns(self):
        copy = Path(self.out) / "analyze_financials.py"
        self.assertEqual(copy.read_bytes(), ANALYZE.read_bytes())
        rerun_dir = temp_dir(self)
        shutil.copy(SAMPLE, rerun_dir)
        shutil.copy(copy, rerun_dir)
        completed = subprocess.run(
            [sys.executable, "analyze_financials.py", SAMPLE.name, "--out-dir", "."],
            cwd=rerun_dir, capture_output=True, text=True, timeout=120)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        self.assertEqual(sorted(os.listdir(rerun_dir)),
                         sorted(ARTIFACTS + [SAMPLE.name]))
        for name in ("calculated_metrics.csv", "unusual_movements.csv"):
            self.assertEqual(Path(rerun_dir, name).read_text(), self.result.text(name), name)
        self.assertEqual(Path(rerun_dir, "analyze_financials.py").read_bytes(),
                         ANALYZE.read_bytes())


class CommandLineTest(unittest.TestCase):
    def test_relative_input_and_default_out_dir(self):
        work = temp_dir(self)
        shutil.copy(SAMPLE, os.path.join(work, "in.csv"))
        completed = subprocess.run([sys.executable, str(ANALYZE), "in.csv"], cwd=work,
                                   capture_output=True, text=True, timeout=120)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        for name in ARTIFACTS:
            self.assertTrue(os.path.isfile(os.path.join(work, name)), name)
        manifest = json.loads(Path(work, "analysis_run.json").read_text())
        self.assertEqual(manifest["input_filename"], "in.csv")
        self.assertEqual(os.path.realpath(manifest["execution_directory"]),
                         os.path.realpath(work))

    def test_nested_out_dir_is_created(self):
        out = os.path.join(temp_dir(self), "a", "b")
        run = run_analyze(self, SAMPLE, out_dir=out)
        self.assertEqual(run.rc, 0, run.stderr)
        self.assertTrue(os.path.isfile(os.path.join(out, "analysis_run.json")))

    def test_unreadable_input_exits_2(self):
        run = run_analyze(self, "/nonexistent/statements.csv")
        self.assertEqual(run.rc, 2)
        self.assertIn("cannot read input", run.stderr)
        self.assertIn("statements.csv", run.stderr)

    def test_usage_error_without_input(self):
        completed = subprocess.run([sys.executable, str(ANALYZE)], capture_output=True,
                                   text=True, timeout=60)
        self.assertNotEqual(completed.returncode, 0)
        self.assertIn("usage", completed.stderr.lower())


if __name__ == "__main__":
    unittest.main()
