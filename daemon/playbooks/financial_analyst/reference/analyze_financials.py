#!/usr/bin/env python3
"""Reference analysis for the sandgate financial-analyst playbook.

Usage: python3 analyze_financials.py INPUT.csv [--out-dir DIR]

Reads one CSV of yearly statements and writes, into DIR (default "."), the six
artifacts of the contract (docs/financial-analyst.md):

    analyze_financials.py     a copy of this program, so the analysis can be rerun
    calculated_metrics.csv    one row per year, the contract's metric columns
    unusual_movements.csv     the rule hits (yoy_move_15pct, operating_margin_2pp,
                              receivables_outpace_revenue_10pp)
    investment_analysis.md    the memo, written from the numbers
    financial_trends.svg      four panels, hand-written SVG
    analysis_run.json         the manifest with the validation results

Exit status: 0 on success (warnings allowed); 2 on a fatal validation failure (missing
required column, a required cell that is not a finite number, non-integer or duplicate
year) -- analysis_run.json is still written then -- or on an unreadable/empty input.
Python 3 standard library only.
"""

import argparse
import collections
import contextlib
import csv
import json
import math
import os
import re
import shutil
import sys
import tempfile
from array import array
from xml.sax.saxutils import escape as xml_escape

REQUIRED_COLUMNS = [
    "year", "revenue", "cost_of_revenue", "operating_income", "interest_expense",
    "net_income", "accounts_receivable", "inventory", "total_current_assets",
    "total_assets", "total_current_liabilities", "total_liabilities",
    "shareholders_equity", "operating_cash_flow", "capital_expenditures",
]
OPTIONAL_COLUMNS = [
    "gross_profit", "deferred_revenue", "stock_based_compensation", "long_term_debt",
    "cash_and_equivalents",
]
METRIC_COLUMNS = [
    "year", "revenue_growth", "gross_margin", "operating_margin", "net_margin",
    "current_ratio", "quick_ratio", "liabilities_to_equity", "roa", "roe",
    "interest_coverage", "free_cash_flow", "fcf_margin", "cash_conversion",
    "receivables_growth", "inventory_growth",
]
AMOUNT_METRICS = {"free_cash_flow"}  # in file units; every other metric is a ratio
MOVEMENT_COLUMNS = ["year", "item", "rule", "previous_value", "current_value", "change",
                    "detail"]
RULES = ["yoy_move_15pct", "operating_margin_2pp", "receivables_outpace_revenue_10pp"]
YOY_THRESHOLD = 0.15
MARGIN_THRESHOLD = 0.02
RECEIVABLES_THRESHOLD = 0.10
SLACK = 1e-12
MEMO_HEADINGS = [
    "Executive view", "KPI table", "Profitability", "Liquidity and leverage",
    "Cash flow and earnings quality", "Unusual movements", "Bull case", "Bear case",
    "Diligence questions", "Data limitations", "Conclusion",
]
SCRIPT_NAME = "analyze_financials.py"
METRICS_NAME = "calculated_metrics.csv"
MOVEMENTS_NAME = "unusual_movements.csv"
MEMO_NAME = "investment_analysis.md"
CHART_NAME = "financial_trends.svg"
MANIFEST_NAME = "analysis_run.json"
GENERATED = [SCRIPT_NAME, METRICS_NAME, MOVEMENTS_NAME, MEMO_NAME, CHART_NAME, MANIFEST_NAME]
EXIT_OK = 0
EXIT_FATAL = 2
REQUIRED_ORDER = {name: k for k, name in enumerate(REQUIRED_COLUMNS)}
# The daemon refuses more rows before a sandbox exists (statements.h, kMaxDataRows).
MAX_DATA_ROWS = 100000
MAX_BAD_CELLS = 1000  # listed in validation_results; bad_cell_count has them all
MAX_MESSAGES = 20  # of each kind (errors, warnings) printed
MAX_CHART_POINTS = 200  # per series; more years are sampled evenly
MAX_LISTED_YEARS = 20  # years named in one sentence of the memo
SHORT_FORMAT = "%.10g"
NAN = float("nan")


def say(message):
    print(message, flush=True)


def warn(message):
    print("warning: " + message, file=sys.stderr, flush=True)


class FatalInput(Exception):
    """The input cannot be analysed; the message says why."""


# ---------------------------------------------------------------------------------------
# Reading and validation


PLAIN_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")


def parse_number(text):
    """A finite float from a plain decimal cell ("-12", "3.5", "1e6", blanks around allowed),
    or None: blank, thousands separators, currency signs, "nan", "inf", "1_000", hex."""
    if text is None:
        return None
    text = text.strip(" \t\r\n\f\v")
    if not PLAIN_DECIMAL.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


class QuoteTracker:
    """The physical lines of a CSV file, for csv.reader, following its quote state on the way.

    The csv module reads an unterminated quote silently to the end of the file (the last cell
    swallows every line after it); this tells that apart, with the line the quote opened on.
    Same rules as the csv module: a quote opens a field only at its start, "" inside a quoted
    field is a quote. Lines without a quote are not scanned, so this costs little."""

    def __init__(self, handle):
        self.handle = handle
        self.line = 0
        self.in_quotes = False
        self.opened_line = 0

    def __iter__(self):
        return self

    def __next__(self):
        line = next(self.handle)
        self.line += 1
        if '"' in line:
            self._scan(line)
        return line

    def _scan(self, line):
        at_field_start = not self.in_quotes
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if self.in_quotes:
                if c == '"':
                    if i + 1 < n and line[i + 1] == '"':
                        i += 1
                    else:
                        self.in_quotes = False
            elif c == '"' and at_field_start:
                self.in_quotes = True
                self.opened_line = self.line
            else:
                at_field_start = c in ",\r\n"
            i += 1


class Problems:
    """(fatal, message) pairs in the order found. Past MAX_MESSAGES of a kind they are only
    counted: a broken 64 MiB file must not print a line per cell into the run's events."""

    def __init__(self):
        self.items = []
        self.counts = {True: 0, False: 0}

    def add(self, fatal, message):
        self.counts[fatal] += 1
        if self.counts[fatal] <= MAX_MESSAGES:
            self.items.append((fatal, message))

    @property
    def fatal(self):
        return self.counts[True] > 0

    @property
    def warnings(self):
        return self.counts[False]

    def __iter__(self):
        for item in self.items:
            yield item
        for kind in (True, False):
            if self.counts[kind] > MAX_MESSAGES:
                yield kind, "%d more %s not listed" % (self.counts[kind] - MAX_MESSAGES,
                                                        "errors" if kind else "warnings")


class Table:
    """The input, column by column: one array of floats per column (NaN where a cell is blank
    or not a number), which costs 8 bytes a cell instead of a Python string and a dict entry.
    Rows are in file order until sort_by_year()."""

    def __init__(self, header):
        self.header = header
        self.columns = []  # input order, deduplicated, named
        self.positions = []
        self.values = {}  # column -> array('d')
        self.text_columns = set()  # columns with a non-blank cell that is not a number
        self.number_columns = set()  # columns with at least one number
        self.lines = array("q")  # the CSV line each data row ends on
        self.years = []  # int per row, None where the year is not an integer
        self.rows = 0

    def get(self, name, i):
        column = self.values.get(name)
        if column is None:
            return None
        value = column[i]
        return None if value != value else value  # NaN: blank or not a number

    def sort_by_year(self):
        order = sorted(range(self.rows), key=self.years.__getitem__)
        for name, column in self.values.items():
            self.values[name] = array("d", (column[i] for i in order))
        self.lines = array("q", (self.lines[i] for i in order))
        self.years = [self.years[i] for i in order]


def open_input(path):
    try:
        handle = open(path, "r", encoding="utf-8-sig", newline="")
        handle.read(1 << 16)  # decode errors and unreadable files show here, not mid-way
        handle.seek(0)
        return handle
    except OSError as error:
        raise FatalInput("cannot read input %s: %s" % (path, error.strerror or error))
    except UnicodeDecodeError as error:
        raise FatalInput("input %s is not UTF-8 text (byte %d)" % (path, error.start))


def read_table(path, problems):
    """Streams the CSV once into a Table, noting the per-cell problems (ragged rows, bad
    cells of required columns); None when the file holds no record. Raises FatalInput when
    the file cannot be read or decoded."""
    bad_cells = []
    bad_count = 0
    with open_input(path) as handle:
        lines = QuoteTracker(handle)
        reader = csv.reader(lines)
        table = None
        try:
            for record in reader:
                if not any(cell.strip() for cell in record):
                    continue  # blank line
                if table is None:
                    table = start_table([cell.strip() for cell in record], problems)
                    continue
                table.rows += 1
                number = table.rows
                line = reader.line_num
                if number > MAX_DATA_ROWS:
                    problems.add(True, "more than %d data rows (CSV line %d is data row %d): the "
                                 "playbook's limit, which keeps calculated_metrics.csv under the "
                                 "artifact size cap" % (MAX_DATA_ROWS, line, number))
                    table.rows -= 1
                    break
                table.lines.append(line)
                width = len(table.header)
                extra = any(c.strip() for c in record[width:])
                if extra or len(record) < width:
                    what = ("ragged row: data row %d (CSV line %d) has %d cells, the header has "
                            "%d columns" % (number, line, len(record), width))
                    if extra:
                        problems.add(False, what + "; the extra cells are ignored")
                    elif len(record) < table.required_width:
                        problems.add(True, what + "; the required cells past the last one are "
                                     "missing")
                    else:
                        problems.add(False, what + "; the missing optional cells are blank")
                row_bad = []
                for name, position in zip(table.columns, table.positions):
                    text = record[position] if position < len(record) else ""
                    value = parse_number(text)
                    if value is None:
                        table.values[name].append(NAN)
                        if text.strip():
                            table.text_columns.add(name)
                    else:
                        table.values[name].append(value)
                        table.number_columns.add(name)
                    if value is None and name in table.required:
                        row_bad.append((REQUIRED_ORDER[name], name, text))
                # In the contract's column order, as the daemon lists them.
                for _, name, text in sorted(row_bad):
                    bad_count += 1
                    if len(bad_cells) < MAX_BAD_CELLS:
                        bad_cells.append({"row": number, "column": name, "value": text})
                    year_text = (record[table.year_position].strip()
                                 if name != "year" and table.year_position is not None and
                                 table.year_position < len(record) else "")
                    where = "data row %d (CSV line %d%s)" % (
                        number, line, ", year %s" % year_text if year_text else "")
                    what = ("empty value" if not text.strip()
                            else "non-numeric value %r" % text)
                    problems.add(True, "%s in column %s at %s" % (what, name, where))
        except csv.Error as error:
            raise FatalInput("input %s is not valid CSV at line %d: %s"
                             % (path, reader.line_num, error))
        except UnicodeDecodeError:
            # Read as a stream, so the position is a line, not a byte of the file.
            raise FatalInput("input %s is not UTF-8 text (after CSV line %d)"
                             % (path, lines.line))
        if lines.in_quotes:
            problems.add(True, "unterminated quote: the quoted field that opens on CSV line %d "
                         "never closes, so it runs to the end of the file" % lines.opened_line)
    if table is not None:
        table.bad_cells, table.bad_cell_count = bad_cells, bad_count
    return table


def start_table(header, problems):
    table = Table(header)
    for position, name in enumerate(header):
        if not name:
            continue
        if name in table.values:
            problems.add(False, "column %s appears more than once; the first one is used" % name)
            continue
        table.columns.append(name)
        table.positions.append(position)
        table.values[name] = array("d")
    table.required = [name for name in REQUIRED_COLUMNS if name in table.values]
    table.required_width = max([table.positions[table.columns.index(name)] + 1
                                for name in table.required] or [0])
    table.year_position = (table.positions[table.columns.index("year")]
                           if "year" in table.values else None)
    return table


def validate(table, problems):
    """The contract's validation_results for a Table read by read_table (None: an empty file);
    sorts the rows by year when the input is usable. Fatal problems go to `problems`."""
    if table is None:
        problems.add(True, "the file is empty: expected a header row and yearly rows")
        return {
            "required_columns_present": False, "missing_columns": list(REQUIRED_COLUMNS),
            "all_values_numeric": False, "bad_cells": [],
            "years_unique": False, "years_ordered": True,
            "accounting_equation_passed_every_row": True, "accounting_equation_failures": [],
            "at_least_two_years": False,
        }
    missing = [name for name in REQUIRED_COLUMNS if name not in table.values]
    if missing:
        problems.add(True, "missing required column(s): %s" % ", ".join(missing))

    years_unique = "year" in table.values
    seen = {}
    for i in range(table.rows):
        if "year" not in table.values:
            table.years.append(None)
            continue
        value = table.get("year", i)
        year = None
        if value is None:
            years_unique = False  # already reported as a bad cell
        elif value != int(value):
            years_unique = False
            problems.add(True, "year %s at data row %d (CSV line %d) is not an integer"
                         % (fmt_number(value), i + 1, table.lines[i]))
        else:
            year = int(value)
            first = seen.setdefault(year, i)
            if first != i:
                years_unique = False
                problems.add(True, "duplicate year %d at data rows %d and %d (CSV lines %d and "
                             "%d)" % (year, first + 1, i + 1, table.lines[first], table.lines[i]))
        table.years.append(year)
    seen = None
    known = [y for y in table.years if y is not None]
    years_ordered = all(a < b for a, b in zip(known, known[1:]))
    known = None
    if not years_ordered:
        problems.add(False, "years are not in ascending order in the file; rows were sorted by "
                     "year")

    failures = []
    equation_ok = True
    if all(name in table.values for name in ("total_assets", "total_liabilities",
                                             "shareholders_equity")):
        for i in range(table.rows):
            assets = table.get("total_assets", i)
            liabilities = table.get("total_liabilities", i)
            equity = table.get("shareholders_equity", i)
            if assets is None or liabilities is None or equity is None:
                continue
            tolerance = max(1.0, 1e-6 * abs(assets))
            if abs(assets - (liabilities + equity)) > tolerance:
                equation_ok = False
                label = table.years[i]
                if label is not None:  # a row without an integer year is already fatal
                    failures.append(label)
                problems.add(False, "accounting equation fails in %s: total_assets %s vs "
                             "total_liabilities + shareholders_equity %s" % (
                                 label if label is not None else "data row %d" % (i + 1),
                                 fmt_amount(assets), fmt_amount(liabilities + equity)))
    failures.sort()
    at_least_two = table.rows >= 2
    if not at_least_two:
        problems.add(False, "only %d data row(s): growth, roa, roe and the unusual-movement "
                     "rules need two years and stay blank" % table.rows)
    results = {
        "required_columns_present": not missing,
        "missing_columns": missing,
        "all_values_numeric": table.bad_cell_count == 0,
        "bad_cells": table.bad_cells,
        "years_unique": years_unique,
        "years_ordered": years_ordered,
        "accounting_equation_passed_every_row": equation_ok,
        "accounting_equation_failures": failures,
        "at_least_two_years": at_least_two,
    }
    if table.bad_cell_count > len(table.bad_cells):
        # Only the first MAX_BAD_CELLS are listed, and this says how many in all: the contract
        # bounds the manifest so that a garbage file still gets its explanation through.
        results["bad_cell_count"] = table.bad_cell_count
    if table.rows == 0 and not problems.fatal:
        problems.add(True, "no data rows: the file has a header but no yearly rows")
    if not problems.fatal and not years_ordered:
        table.sort_by_year()
    return results


# ---------------------------------------------------------------------------------------
# Metrics


def ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator == 0:
        return None
    value = numerator / denominator
    return value if math.isfinite(value) else None


def growth(current, previous):
    if current is None or previous is None:
        return None
    return ratio(current - previous, abs(previous))


def numeric_columns(table):
    """Input columns other than year whose every non-blank cell is a finite number."""
    return [name for name in table.columns if name != "year" and
            name in table.number_columns and name not in table.text_columns]


class Rows:
    """A sequence of per-year dicts built on demand from columns of floats (NaN: undefined):
    a dict per year held for the whole file would cost about a kilobyte a year."""

    def __init__(self, length, build):
        self.length = length
        self.build = build

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError(i)
        return self.build(i)

    def __iter__(self):
        for i in range(self.length):
            yield self.build(i)


def build_values(table):
    """(numeric column names, Rows of {column: float or None, "year", "_gross_profit",
    "_gross_profit_derived"})."""
    names = numeric_columns(table)

    def row(i):
        values = {name: table.get(name, i) for name in names}
        values["year"] = table.years[i]
        # gross_profit when this row's cell is a number, else revenue - cost_of_revenue
        gross = table.get("gross_profit", i)
        values["_gross_profit_derived"] = gross is None
        if gross is None:
            gross = values["revenue"] - values["cost_of_revenue"]
        values["_gross_profit"] = gross
        return values

    return names, Rows(table.rows, row)


def metrics_of(row, p):
    """The contract's metrics of one year, `p` the previous year's values (None for the first)."""
    fcf = row["operating_cash_flow"] - abs(row["capital_expenditures"])
    m = {"year": row["year"]}
    m["revenue_growth"] = growth(row["revenue"], p["revenue"]) if p else None
    m["gross_margin"] = ratio(row["_gross_profit"], row["revenue"])
    m["operating_margin"] = ratio(row["operating_income"], row["revenue"])
    m["net_margin"] = ratio(row["net_income"], row["revenue"])
    m["current_ratio"] = ratio(row["total_current_assets"], row["total_current_liabilities"])
    m["quick_ratio"] = ratio(row["total_current_assets"] - row["inventory"],
                             row["total_current_liabilities"])
    m["liabilities_to_equity"] = ratio(row["total_liabilities"], row["shareholders_equity"])
    m["roa"] = (ratio(row["net_income"], (row["total_assets"] + p["total_assets"]) / 2)
                if p else None)
    m["roe"] = (ratio(row["net_income"],
                      (row["shareholders_equity"] + p["shareholders_equity"]) / 2)
                if p else None)
    m["interest_coverage"] = ratio(row["operating_income"], row["interest_expense"])
    m["free_cash_flow"] = fcf if math.isfinite(fcf) else None
    m["fcf_margin"] = ratio(m["free_cash_flow"], row["revenue"])
    m["cash_conversion"] = ratio(row["operating_cash_flow"], row["net_income"])
    m["receivables_growth"] = (growth(row["accounts_receivable"], p["accounts_receivable"])
                               if p else None)
    m["inventory_growth"] = growth(row["inventory"], p["inventory"]) if p else None
    return m


def compute_metrics(values):
    """Rows of per-year metric dicts, computed once and kept as columns of floats."""
    columns = {name: array("d") for name in METRIC_COLUMNS[1:]}
    years = []
    previous = None
    for row in values:
        m = metrics_of(row, previous)
        years.append(m["year"])
        for name, column in columns.items():
            value = m[name]
            column.append(NAN if value is None else value)
        previous = row

    def row(i):
        m = {name: (None if column[i] != column[i] else column[i])
             for name, column in columns.items()}
        m["year"] = years[i]
        return m

    return Rows(len(years), row)


class HitSummary:
    """What the memo says about the hits, bounded whatever their number: counts, the latest
    year's hits, and the last few earlier years (unusual_movements.csv has every hit)."""

    EARLIER_YEARS = 10

    def __init__(self, last_year):
        self.last_year = last_year
        self.total = 0
        self.counts = {rule: 0 for rule in RULES}
        self.latest = []
        self.earlier = collections.OrderedDict()  # year -> [moves, [(rule, change)]]
        self.earlier_dropped = 0  # earlier years with hits not in self.earlier

    def add(self, hit):
        self.total += 1
        self.counts[hit["rule"]] += 1
        if hit["year"] == self.last_year:
            self.latest.append(hit)
            return
        entry = self.earlier.get(hit["year"])
        if entry is None:
            entry = self.earlier[hit["year"]] = [0, []]
            if len(self.earlier) > self.EARLIER_YEARS:
                self.earlier.popitem(last=False)
                self.earlier_dropped += 1
        if hit["rule"] == "yoy_move_15pct":
            entry[0] += 1
        else:
            entry[1].append((hit["rule"], hit["change"]))

    def in_year(self, year):
        return len(self.latest) if year == self.last_year else None


def find_movements(names, values, metrics):
    """Every hit, in the contract's order, one at a time."""
    previous, previous_m = None, None
    for i in range(len(values)):
        cur, cur_m = values[i], metrics[i]
        if previous is not None:
            yield from year_movements(names, previous, cur, previous_m, cur_m)
        previous, previous_m = cur, cur_m


def year_movements(names, prev, cur, prev_m, cur_m):
    year = cur["year"]
    for name in names:
        g = growth(cur.get(name), prev.get(name))
        if g is not None and abs(g) >= YOY_THRESHOLD - SLACK:
            yield {
                "year": year, "item": name, "rule": "yoy_move_15pct",
                "previous_value": prev[name], "current_value": cur[name], "change": g,
                "detail": "%s %s %s from %s to %s" % (
                    name, "rose" if g > 0 else "fell", fmt_pct(abs(g)),
                    fmt_amount(prev[name]), fmt_amount(cur[name])),
            }
    om_t, om_p = cur_m["operating_margin"], prev_m["operating_margin"]
    if om_t is not None and om_p is not None:
        diff = om_t - om_p
        if abs(diff) >= MARGIN_THRESHOLD - SLACK:
            yield {
                "year": year, "item": "operating_margin", "rule": "operating_margin_2pp",
                "previous_value": om_p, "current_value": om_t, "change": diff,
                "detail": "operating margin %s %s from %s to %s" % (
                    "widened" if diff > 0 else "narrowed", fmt_pp(abs(diff)),
                    fmt_pct(om_p), fmt_pct(om_t)),
            }
    rg, vg = cur_m["receivables_growth"], cur_m["revenue_growth"]
    if rg is not None and vg is not None:
        diff = rg - vg
        if diff >= RECEIVABLES_THRESHOLD - SLACK:
            yield {
                "year": year, "item": "accounts_receivable",
                "rule": "receivables_outpace_revenue_10pp",
                "previous_value": vg, "current_value": rg, "change": diff,
                "detail": "accounts_receivable grew %s vs revenue %s, %s faster "
                          "(previous_value is revenue growth, current_value receivables "
                          "growth)" % (fmt_growth(rg), fmt_growth(vg), fmt_pp(diff)),
            }


# ---------------------------------------------------------------------------------------
# Formatting


def fmt_number(value):
    """For the CSV files: integers without .0, else 10 significant digits -- well past the
    contract's 6 and its 1e-6 tolerance, and short enough (at most 17 characters) that a
    metrics row stays under 290 bytes and 100,000 years fit the artifact cap."""
    if value is None or not math.isfinite(value):
        return ""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return SHORT_FORMAT % value


def fmt_ratio(value):
    """fmt_number for ratios, padded to at least 6 significant digits: 0.66 -> 0.660000."""
    text = fmt_number(value)
    if not text or value == 0:
        return text
    text = SHORT_FORMAT % value
    mantissa, _, exponent = text.partition("e")
    digits = mantissa.lstrip("-").replace(".", "").lstrip("0")
    if len(digits) < 6:
        if "." not in mantissa:
            mantissa += "."
        mantissa += "0" * (6 - len(digits))
    return mantissa + ("e" + exponent if exponent else "")


def fmt_amount(value):
    if value is None:
        return "n/a"
    if value == int(value) and abs(value) < 1e15:
        return "{:,}".format(int(value))
    return "{:,.2f}".format(value)


def fmt_pct(value):
    return "n/a" if value is None else "%.1f%%" % (value * 100)


def fmt_signed_pct(value):
    return "n/a" if value is None else "%+.1f%%" % (value * 100)


def fmt_growth(value):
    """12.3% for growth, -4.5% for shrinkage."""
    return "n/a" if value is None else "%.1f%%" % (value * 100)


def fmt_pp(value):
    return "n/a" if value is None else "%.1f pp" % (value * 100)


def fmt_times(value):
    return "n/a" if value is None else "%.2fx" % value


# ---------------------------------------------------------------------------------------
# Writing


@contextlib.contextmanager
def open_atomic(path, mode=0o644):
    """A text handle on a temporary file that becomes `path` when the block ends without an
    error: a reader never sees half a file, and a large one is written as it is made."""
    directory = os.path.dirname(path)
    fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            yield handle
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def write_atomic(path, text, mode=0o644):
    with open_atomic(path, mode) as handle:
        handle.write(text)


def write_metrics(path, metrics):
    with open_atomic(path) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(METRIC_COLUMNS)
        for m in metrics:
            writer.writerow([str(m["year"])] + [
                (fmt_number if name in AMOUNT_METRICS else fmt_ratio)(m[name])
                for name in METRIC_COLUMNS[1:]])


def write_movements(path, hits, summary):
    """Writes the hits as they come, noting each in `summary`."""
    with open_atomic(path) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(MOVEMENT_COLUMNS)
        for h in hits:
            summary.add(h)
            level = fmt_number if h["rule"] == "yoy_move_15pct" else fmt_ratio
            writer.writerow([str(h["year"]), h["item"], h["rule"], level(h["previous_value"]),
                             level(h["current_value"]), fmt_ratio(h["change"]), h["detail"]])


def copy_self(out_dir):
    source = os.path.abspath(__file__)
    target = os.path.join(out_dir, SCRIPT_NAME)
    if os.path.exists(target) and not os.path.islink(target) and os.path.samefile(source, target):
        return
    with open(source, "r", encoding="utf-8") as handle:
        write_atomic(target, handle.read(), 0o755)


def manifest(input_path, row_count, years, results, generated, out_dir):
    return json.dumps({
        "input_filename": os.path.basename(input_path),
        "row_count": row_count,
        "year_range": [min(years), max(years)] if years else None,
        "validation_results": results,
        "generated_filenames": generated,
        "execution_directory": out_dir,
    }, indent=2) + "\n"


# ---------------------------------------------------------------------------------------
# The memo


class Memo:
    def __init__(self, source, names, values, metrics, hits, results, table):
        self.source = source
        self.names = names
        self.values = values
        self.metrics = metrics
        self.hits = hits
        self.results = results
        self.table = table
        self.lines = []
        self.years = table.years
        self.last = values[-1]
        self.last_m = metrics[-1]
        self.prev = values[-2] if len(values) > 1 else None
        self.prev_m = metrics[-2] if len(metrics) > 1 else None
        self.first = values[0]
        self.first_m = metrics[0]

    # --- helpers
    def span(self):
        if len(self.years) == 1:
            return "year %d" % self.years[0]
        return "years %d-%d" % (self.years[0], self.years[-1])

    def cite(self, *years):
        if len(years) == 2 and years[0] != years[1]:
            return "(%s, %s\u2192%s)" % (self.source, years[0], years[1])
        return "(%s, %s)" % (self.source, years[0])

    def fact(self, text):
        self.lines.append("- **Fact:** " + text)

    def hypothesis(self, text):
        self.lines.append("- **Hypothesis:** " + text)

    def heading(self, title):
        if self.lines:
            self.lines.append("")
        self.lines.append("## " + title)
        self.lines.append("")

    def has(self, name):
        return name in self.names and self.last.get(name) is not None

    def change_fact(self, name, label=None):
        """'name went from A (y_p) to B (y_t), +x%' for the last two years, or latest only."""
        label = label or name
        cur = self.last.get(name)
        y = self.last["year"]
        if self.prev is not None and self.prev.get(name) is not None and cur is not None:
            g = growth(cur, self.prev[name])
            return "%s was %s in %d vs %s in %d (%s) %s" % (
                label, fmt_amount(cur), y, fmt_amount(self.prev[name]), self.prev["year"],
                fmt_signed_pct(g) if g is not None else "growth undefined from zero",
                self.cite(self.prev["year"], y))
        return "%s was %s in %d %s" % (label, fmt_amount(cur), y, self.cite(y))

    def year_list(self, years):
        """At most MAX_LISTED_YEARS years, then how many more: a sentence stays a sentence."""
        shown = ", ".join(str(y) for y in years[:MAX_LISTED_YEARS])
        if len(years) > MAX_LISTED_YEARS:
            shown += " and %d more (see %s)" % (len(years) - MAX_LISTED_YEARS, MANIFEST_NAME)
        return shown

    # --- sections
    def write(self):
        self.lines.append("# Investment analysis: %s" % self.source)
        self.lines.append("")
        self.lines.append("Figures are in the input file's own units; %s, %d row(s). "
                          "Every statement is marked **Fact:** (read or computed from %s) or "
                          "**Hypothesis:** (an interpretation to test in diligence)."
                          % (self.span(), len(self.years), self.source))
        self.executive()
        self.kpi_table()
        self.profitability()
        self.liquidity()
        self.cash_flow()
        self.unusual()
        self.bull()
        self.bear()
        self.diligence()
        self.limitations()
        self.conclusion()
        return "\n".join(self.lines) + "\n"

    def executive(self):
        self.heading("Executive view")
        y = self.last["year"]
        lm = self.last_m
        if self.prev is not None and lm["revenue_growth"] is None:
            self.fact("revenue was %s in %d vs %s in %d %s; growth is undefined from a zero "
                      "base." % (fmt_amount(self.last["revenue"]), y,
                                 fmt_amount(self.prev["revenue"]), self.prev["year"],
                                 self.cite(self.prev["year"], y)))
        elif self.prev is not None:
            self.fact("revenue reached %s in %d, %s vs %d %s; it was %s in %d." % (
                fmt_amount(self.last["revenue"]), y, fmt_signed_pct(lm["revenue_growth"]),
                self.prev["year"], self.cite(self.prev["year"], y),
                fmt_amount(self.first["revenue"]), self.first["year"]))
        else:
            self.fact("revenue was %s in %d %s; a single year gives no growth figures." % (
                fmt_amount(self.last["revenue"]), y, self.cite(y)))
        self.fact("%d operating margin %s, net margin %s, free cash flow %s (FCF margin %s) %s." % (
            y, fmt_pct(lm["operating_margin"]), fmt_pct(lm["net_margin"]),
            fmt_amount(lm["free_cash_flow"]), fmt_pct(lm["fcf_margin"]), self.cite(y)))
        self.fact("%d unusual-movement hit(s) across the file, %d of them in %d." % (
            self.hits.total, len(self.hits.latest), y))
        self.hypothesis(self.overall_view())

    def overall_view(self):
        lm, pm = self.last_m, self.prev_m
        parts = []
        if lm["revenue_growth"] is not None:
            parts.append("revenue is %s (%s in %d)" % (
                "growing" if lm["revenue_growth"] > 0 else "shrinking",
                fmt_signed_pct(lm["revenue_growth"]), self.last["year"]))
            if pm is not None and pm["revenue_growth"] is not None:
                parts.append("growth %s from %s the year before" % (
                    "accelerated" if lm["revenue_growth"] > pm["revenue_growth"]
                    else "decelerated", fmt_signed_pct(pm["revenue_growth"])))
        if pm is not None and lm["operating_margin"] is not None and \
                pm["operating_margin"] is not None:
            parts.append("operating margin %s by %s" % (
                "expanded" if lm["operating_margin"] >= pm["operating_margin"] else "contracted",
                fmt_pp(abs(lm["operating_margin"] - pm["operating_margin"]))))
        if lm["free_cash_flow"] is not None:
            parts.append("free cash flow is %s" % ("positive" if lm["free_cash_flow"] > 0
                                                   else "negative or zero"))
        if not parts:
            return "the file gives too little to form a view beyond the single-year figures."
        return ("; ".join(parts) + ". The trajectory of the latest year, not the multi-year "
                "record, should drive the valuation view.")

    def kpi_table(self):
        self.heading("KPI table")
        shown = list(range(max(0, len(self.values) - 5), len(self.values)))
        years = [self.values[i]["year"] for i in shown]
        self.lines.append("Latest %d year(s) from %s (amounts in file units; ratios in %% or x)."
                          % (len(years), self.source))
        self.lines.append("")
        self.lines.append("| KPI | " + " | ".join(str(y) for y in years) + " |")
        self.lines.append("| --- | " + " | ".join("---:" for _ in years) + " |")
        rows = [
            ("Revenue", lambda i: fmt_amount(self.values[i]["revenue"])),
            ("Revenue growth", lambda i: fmt_signed_pct(self.metrics[i]["revenue_growth"])),
            ("Gross margin", lambda i: fmt_pct(self.metrics[i]["gross_margin"])),
            ("Operating margin", lambda i: fmt_pct(self.metrics[i]["operating_margin"])),
            ("Net margin", lambda i: fmt_pct(self.metrics[i]["net_margin"])),
            ("Net income", lambda i: fmt_amount(self.values[i]["net_income"])),
            ("Free cash flow", lambda i: fmt_amount(self.metrics[i]["free_cash_flow"])),
            ("FCF margin", lambda i: fmt_pct(self.metrics[i]["fcf_margin"])),
            ("Cash conversion (OCF/NI)", lambda i: fmt_times(self.metrics[i]["cash_conversion"])),
            ("Current ratio", lambda i: fmt_times(self.metrics[i]["current_ratio"])),
            ("Liabilities / equity", lambda i: fmt_times(self.metrics[i]["liabilities_to_equity"])),
            ("Interest coverage", lambda i: fmt_times(self.metrics[i]["interest_coverage"])),
            ("ROE", lambda i: fmt_pct(self.metrics[i]["roe"])),
            ("Receivables growth", lambda i: fmt_signed_pct(self.metrics[i]["receivables_growth"])),
        ]
        for label, cell in rows:
            self.lines.append("| %s | %s |" % (label, " | ".join(cell(i) for i in shown)))

    def profitability(self):
        self.heading("Profitability")
        y = self.last["year"]
        lm, fm = self.last_m, self.first_m
        derived = " (derived as revenue - cost_of_revenue)" if self.last["_gross_profit_derived"] \
            else ""
        if len(self.values) > 1:
            self.fact("gross margin%s moved from %s in %d to %s in %d %s." % (
                derived, fmt_pct(fm["gross_margin"]), self.first["year"],
                fmt_pct(lm["gross_margin"]), y, self.cite(self.first["year"], y)))
            self.fact("operating margin moved from %s in %d to %s in %d; net margin from %s to %s "
                      "%s." % (fmt_pct(self.prev_m["operating_margin"]), self.prev["year"],
                               fmt_pct(lm["operating_margin"]), y,
                               fmt_pct(self.prev_m["net_margin"]), fmt_pct(lm["net_margin"]),
                               self.cite(self.prev["year"], y)))
        else:
            self.fact("gross margin%s %s, operating margin %s, net margin %s in %d %s." % (
                derived, fmt_pct(lm["gross_margin"]), fmt_pct(lm["operating_margin"]),
                fmt_pct(lm["net_margin"]), y, self.cite(y)))
        self.fact(self.change_fact("interest_expense") + "; interest coverage (operating income "
                  "/ interest expense) is %s." % fmt_times(lm["interest_coverage"]))
        if self.has("stock_based_compensation"):
            sbc = self.last["stock_based_compensation"]
            self.fact(self.change_fact("stock_based_compensation") + "; that is %s of revenue "
                      "and %s of operating income." % (
                          fmt_pct(ratio(sbc, self.last["revenue"])),
                          fmt_pct(ratio(sbc, self.last["operating_income"]))))
            op_ex_sbc = self.last["operating_income"] + sbc
            self.hypothesis("operating income excluding stock-based compensation would be %s "
                            "(%s of revenue); reported margins understate cash profitability "
                            "but shareholders bear the dilution." % (
                                fmt_amount(op_ex_sbc),
                                fmt_pct(ratio(op_ex_sbc, self.last["revenue"]))))
        else:
            self.fact("the file has no stock_based_compensation figure for %d, so dilution from "
                      "equity pay cannot be measured." % self.last["year"])
        if self.prev_m is not None and lm["operating_margin"] is not None and \
                self.prev_m["operating_margin"] is not None:
            diff = lm["operating_margin"] - self.prev_m["operating_margin"]
            opex_growth = growth(self.last["revenue"] - self.last["operating_income"],
                                 self.prev["revenue"] - self.prev["operating_income"])
            self.hypothesis("costs above operating income (revenue - operating_income) grew %s "
                            "against revenue %s, which %s the %s margin change." % (
                                fmt_signed_pct(opex_growth), fmt_signed_pct(lm["revenue_growth"]),
                                "explains" if abs(diff) >= MARGIN_THRESHOLD else "is consistent with",
                                fmt_pp(diff) if diff < 0 else "+" + fmt_pp(diff)))

    def liquidity(self):
        self.heading("Liquidity and leverage")
        y = self.last["year"]
        lm = self.last_m
        self.fact("%d current ratio %s, quick ratio %s, liabilities to equity %s %s." % (
            y, fmt_times(lm["current_ratio"]), fmt_times(lm["quick_ratio"]),
            fmt_times(lm["liabilities_to_equity"]), self.cite(y)))
        if self.prev_m is not None:
            self.fact("a year earlier (%d) the current ratio was %s and liabilities to equity %s."
                      % (self.prev["year"], fmt_times(self.prev_m["current_ratio"]),
                         fmt_times(self.prev_m["liabilities_to_equity"])))
        if self.has("cash_and_equivalents"):
            self.fact(self.change_fact("cash_and_equivalents") + ".")
        if self.has("long_term_debt"):
            self.fact(self.change_fact("long_term_debt") + ".")
            if self.prev is not None and self.prev.get("long_term_debt") is not None:
                debt_added = self.last["long_term_debt"] - self.prev["long_term_debt"]
                interest_added = self.last["interest_expense"] - self.prev["interest_expense"]
                if debt_added > 0:
                    self.hypothesis("interest expense rose by %s as long_term_debt rose by %s; "
                                    "new borrowing at current rates, not operating stress, may be "
                                    "the driver of the coverage change." % (
                                        fmt_amount(interest_added), fmt_amount(debt_added)))
        else:
            self.fact("the file has no long_term_debt figure for %d; leverage is read from "
                      "total_liabilities only." % y)
        if lm["interest_coverage"] is not None:
            self.hypothesis("interest coverage of %s %s." % (
                fmt_times(lm["interest_coverage"]),
                "leaves limited headroom if operating income falls" if lm["interest_coverage"] < 4
                else "leaves room to service the debt from operating income"))
        if self.results["accounting_equation_failures"]:
            self.fact("the balance sheet does not balance (total_assets vs total_liabilities + "
                      "shareholders_equity) in %s, so these ratios rest on inconsistent figures."
                      % self.year_list(self.results["accounting_equation_failures"]))

    def cash_flow(self):
        self.heading("Cash flow and earnings quality")
        y = self.last["year"]
        lm = self.last_m
        capex = abs(self.last["capital_expenditures"])
        self.fact("operating cash flow %s less capital expenditures %s gives free cash flow %s in "
                  "%d %s." % (fmt_amount(self.last["operating_cash_flow"]), fmt_amount(capex),
                              fmt_amount(lm["free_cash_flow"]), y, self.cite(y)))
        if self.prev is not None:
            capex_prev = abs(self.prev["capital_expenditures"])
            self.fact("capital_expenditures were %s of revenue in %d vs %s in %d (%s in absolute "
                      "terms) %s." % (
                          fmt_pct(ratio(capex, self.last["revenue"])), y,
                          fmt_pct(ratio(capex_prev, self.prev["revenue"])), self.prev["year"],
                          fmt_signed_pct(growth(capex, capex_prev)),
                          self.cite(self.prev["year"], y)))
        else:
            self.fact("capital_expenditures were %s of revenue in %d." % (
                fmt_pct(ratio(capex, self.last["revenue"])), y))
        self.fact("cash conversion (operating cash flow / net income) is %s in %d." % (
            fmt_times(lm["cash_conversion"]), y))
        rg = lm["receivables_growth"]
        if rg is not None:
            self.fact("accounts_receivable grew %s in %d vs revenue %s %s." % (
                fmt_growth(rg), y, fmt_growth(lm["revenue_growth"]),
                self.cite(self.prev["year"], y)))
        else:
            self.fact("accounts_receivable was %s in %d; receivables growth is undefined for "
                      "this year %s." % (fmt_amount(self.last["accounts_receivable"]), y,
                                         self.cite(y)))
        dso = ratio(self.last["accounts_receivable"] * 365, self.last["revenue"])
        if dso is not None:
            text = "receivables equal %.0f days of revenue in %d" % (dso, y)
            if self.prev is not None:
                dso_p = ratio(self.prev["accounts_receivable"] * 365, self.prev["revenue"])
                if dso_p is not None:
                    text += " vs %.0f days in %d" % (dso_p, self.prev["year"])
            self.fact(text + ".")
            if rg is not None and lm["revenue_growth"] is not None and \
                    rg - lm["revenue_growth"] >= RECEIVABLES_THRESHOLD - SLACK:
                self.hypothesis("receivables outgrowing revenue may mean looser credit terms, "
                                "back-end-loaded billing or collection problems; revenue quality "
                                "in %d is in question until collections are seen." % y)
        if self.has("deferred_revenue"):
            self.fact(self.change_fact("deferred_revenue") + (
                "; revenue moved %s over the same years." % fmt_signed_pct(lm["revenue_growth"])
                if lm["revenue_growth"] is not None else "."))
            if self.prev is not None and self.prev.get("deferred_revenue") is not None:
                dg = growth(self.last["deferred_revenue"], self.prev["deferred_revenue"])
                if dg is not None and lm["revenue_growth"] is not None and \
                        dg < lm["revenue_growth"]:
                    self.hypothesis("deferred revenue growing slower than revenue (%s vs %s) "
                                    "suggests billings are lagging recognised revenue, a "
                                    "possible lead indicator of slower growth." % (
                                        fmt_signed_pct(dg), fmt_signed_pct(lm["revenue_growth"])))
        else:
            self.fact("the file has no deferred_revenue figure for %d, so billings cannot be "
                      "compared with recognised revenue." % y)
        if lm["cash_conversion"] is not None:
            self.hypothesis("cash conversion of %s %s." % (
                fmt_times(lm["cash_conversion"]),
                "means reported earnings are backed by cash" if lm["cash_conversion"] >= 1
                else "means part of reported earnings has not turned into cash"))

    def unusual(self):
        self.heading("Unusual movements")
        if not self.hits.total:
            self.fact("no rule fired (yoy_move_15pct, operating_margin_2pp, "
                      "receivables_outpace_revenue_10pp)%s." % (
                          "; with one year there is nothing to compare"
                          if len(self.values) < 2 else ""))
            return
        counts = self.hits.counts
        self.fact("%d hit(s): %s; the full list is in %s." % (
            self.hits.total, ", ".join("%s %d" % (r, counts[r]) for r in RULES), MOVEMENTS_NAME))
        y = self.last["year"]
        latest = self.hits.latest
        for hit in latest[:20]:
            self.fact("%d %s: %s %s." % (hit["year"], hit["rule"], hit["detail"],
                                         self.cite(self.prev["year"], hit["year"])))
        if len(latest) > 20:
            self.fact("%d more hit(s) in %d are listed in %s." % (len(latest) - 20, y,
                                                                  MOVEMENTS_NAME))
        if self.hits.earlier:
            summaries = []
            for year, (moves, rules) in self.hits.earlier.items():
                others = ["%s (%s)" % (rule, fmt_number(round(change, 4)))
                          for rule, change in rules]
                summaries.append("%d: %d item(s) moved 15%% or more%s" % (
                    year, moves, "; " + ", ".join(others) if others else ""))
            dropped = self.hits.earlier_dropped
            self.fact("%searlier years: " % ("the last %d " % len(summaries) if dropped else "") +
                      "; ".join(summaries) + "." +
                      (" %d earlier year(s) with hits are listed in %s." % (
                          dropped, MOVEMENTS_NAME) if dropped else ""))

    def bull_points(self):
        lm, pm = self.last_m, self.prev_m
        y = self.last["year"]
        points = []
        if lm["revenue_growth"] is not None and lm["revenue_growth"] > 0:
            points.append(("revenue grew %s in %d." % (fmt_growth(lm["revenue_growth"]), y),
                           "demand for the product is still expanding."))
        if lm["gross_margin"] is not None and pm is not None and pm["gross_margin"] is not None \
                and lm["gross_margin"] >= pm["gross_margin"]:
            points.append(("gross margin held or improved: %s in %d vs %s in %d." % (
                fmt_pct(lm["gross_margin"]), y, fmt_pct(pm["gross_margin"]), self.prev["year"]),
                "pricing power and delivery costs are under control."))
        elif lm["gross_margin"] is not None and lm["gross_margin"] >= 0.6:
            points.append(("gross margin is %s in %d." % (fmt_pct(lm["gross_margin"]), y),
                           "the unit economics leave room for operating leverage."))
        if lm["free_cash_flow"] is not None and lm["free_cash_flow"] > 0:
            points.append(("free cash flow was positive at %s in %d." % (
                fmt_amount(lm["free_cash_flow"]), y),
                "the business funds its own investment without new capital."))
        if self.first_m["operating_margin"] is not None and lm["operating_margin"] is not None \
                and lm["operating_margin"] > self.first_m["operating_margin"] and \
                len(self.values) > 1:
            points.append(("operating margin rose from %s in %d to %s in %d." % (
                fmt_pct(self.first_m["operating_margin"]), self.first["year"],
                fmt_pct(lm["operating_margin"]), y),
                "scale benefits are real and may resume once the latest costs are absorbed."))
        if lm["cash_conversion"] is not None and lm["cash_conversion"] >= 1:
            points.append(("operating cash flow was %s net income in %d." % (
                fmt_times(lm["cash_conversion"]), y),
                "earnings are cash-backed."))
        return points

    def bear_points(self):
        lm, pm = self.last_m, self.prev_m
        y = self.last["year"]
        points = []
        if pm is not None and lm["operating_margin"] is not None and \
                pm["operating_margin"] is not None and lm["operating_margin"] < pm["operating_margin"]:
            points.append(("operating margin fell from %s to %s in %d." % (
                fmt_pct(pm["operating_margin"]), fmt_pct(lm["operating_margin"]), y),
                "cost growth is outrunning revenue and may persist."))
        if lm["revenue_growth"] is not None and pm is not None and \
                pm["revenue_growth"] is not None and lm["revenue_growth"] < pm["revenue_growth"]:
            points.append(("revenue growth slowed from %s to %s in %d." % (
                fmt_signed_pct(pm["revenue_growth"]), fmt_signed_pct(lm["revenue_growth"]), y),
                "the market or the product is maturing."))
        rg = lm["receivables_growth"]
        if rg is not None and lm["revenue_growth"] is not None and rg > lm["revenue_growth"]:
            points.append(("accounts_receivable grew %s vs revenue %s in %d." % (
                fmt_growth(rg), fmt_growth(lm["revenue_growth"]), y),
                "part of the revenue may be slow or hard to collect."))
        if pm is not None and lm["interest_coverage"] is not None and \
                pm["interest_coverage"] is not None and \
                lm["interest_coverage"] < pm["interest_coverage"]:
            points.append(("interest coverage fell from %s to %s in %d (interest_expense %s)." % (
                fmt_times(pm["interest_coverage"]), fmt_times(lm["interest_coverage"]), y,
                fmt_amount(self.last["interest_expense"])),
                "rising debt cost is eating into operating income."))
        if pm is not None and lm["free_cash_flow"] is not None and \
                pm["free_cash_flow"] is not None and lm["free_cash_flow"] < pm["free_cash_flow"]:
            points.append(("free cash flow fell from %s to %s in %d." % (
                fmt_amount(pm["free_cash_flow"]), fmt_amount(lm["free_cash_flow"]), y),
                "investment needs are rising faster than operating cash generation."))
        if lm["free_cash_flow"] is not None and lm["free_cash_flow"] <= 0:
            points.append(("free cash flow was %s in %d." % (fmt_amount(lm["free_cash_flow"]), y),
                           "the business depends on outside funding."))
        if self.has("stock_based_compensation") and self.last["net_income"] > 0 and \
                self.last["stock_based_compensation"] > self.last["net_income"]:
            points.append(("stock_based_compensation (%s) exceeded net income (%s) in %d." % (
                fmt_amount(self.last["stock_based_compensation"]),
                fmt_amount(self.last["net_income"]), y),
                "per-share value is being diluted faster than earnings accrue."))
        if self.results["accounting_equation_failures"]:
            points.append(("the balance sheet does not balance in %s." % self.year_list(
                self.results["accounting_equation_failures"]),
                "the statements may be unreliable."))
        return points

    def cases(self, points, empty):
        if not points:
            self.fact(empty)
            return
        for fact, hypothesis in points:
            self.fact(fact.rstrip(".") + " " + self.cite(self.last["year"]) + ".")
            self.hypothesis(hypothesis)

    def bull(self):
        self.heading("Bull case")
        self.cases(self.bull_points(), "none of the bull signals checked (revenue growth, stable "
                   "gross margin, positive free cash flow, cash-backed earnings) holds in %d."
                   % self.last["year"])

    def bear(self):
        self.heading("Bear case")
        self.cases(self.bear_points(), "none of the bear signals checked (margin decline, slowing "
                   "growth, receivables outpacing revenue, weaker coverage, falling free cash "
                   "flow) holds in %d." % self.last["year"])

    def diligence(self):
        self.heading("Diligence questions")
        y = self.last["year"]
        lm = self.last_m
        questions = []
        rg = lm["receivables_growth"]
        if rg is not None:
            questions.append("What is behind accounts_receivable moving %s in %d against revenue "
                             "%s: customer mix, payment terms, or billing timing? Ask for the "
                             "aging schedule." % (fmt_signed_pct(rg), y,
                                                  fmt_signed_pct(lm["revenue_growth"])))
        if self.has("deferred_revenue"):
            questions.append("Why did deferred_revenue reach %s in %d? Are contract durations or "
                             "billing frequency changing?" % (
                                 fmt_amount(self.last["deferred_revenue"]), y))
        questions.append("What drove interest_expense of %s in %d, what rates and maturities "
                         "does the debt carry, and what does it cost next year?" % (
                             fmt_amount(self.last["interest_expense"]), y))
        questions.append("How much of capital_expenditures of %s in %d is growth versus "
                         "maintenance, and what is the plan for next year?" % (
                             fmt_amount(abs(self.last["capital_expenditures"])), y))
        if self.has("stock_based_compensation"):
            questions.append("What share-count dilution did stock_based_compensation of %s in %d "
                             "cause, and is there a buyback to offset it?" % (
                                 fmt_amount(self.last["stock_based_compensation"]), y))
        if self.prev_m is not None and lm["operating_margin"] is not None and \
                self.prev_m["operating_margin"] is not None:
            questions.append("Which cost lines explain operating margin going from %s to %s, and "
                             "which of them are one-off?" % (
                                 fmt_pct(self.prev_m["operating_margin"]),
                                 fmt_pct(lm["operating_margin"])))
        if self.results["accounting_equation_failures"]:
            questions.append("Why does the balance sheet not balance in %s?" % self.year_list(
                self.results["accounting_equation_failures"]))
        for number, question in enumerate(questions, start=1):
            self.lines.append("%d. %s" % (number, question))

    def limitations(self):
        self.heading("Data limitations")
        self.fact("the analysis uses only %s (%s) with no notes, segments, share counts or "
                  "market prices; units are whatever the file uses." % (self.source, self.span()))
        absent = [name for name in OPTIONAL_COLUMNS if name not in self.names]
        if absent:
            self.fact("optional column(s) absent: %s%s." % (
                ", ".join(absent),
                " (gross profit was derived as revenue - cost_of_revenue)"
                if "gross_profit" in absent else ""))
        extra = [name for name in self.table.columns
                 if name not in REQUIRED_COLUMNS and name not in OPTIONAL_COLUMNS]
        if extra:
            self.fact("extra column(s) kept and checked for 15%% moves: %s." % ", ".join(extra))
        text_columns = [name for name in self.table.columns
                        if name != "year" and name not in self.names]
        if text_columns:
            self.fact("non-numeric column(s) ignored: %s." % ", ".join(text_columns))
        if not self.results["years_ordered"]:
            self.fact("the file's rows were not in year order; they were sorted by year first.")
        if self.results["accounting_equation_failures"]:
            self.fact("accounting equation failures in: %s." % self.year_list(
                self.results["accounting_equation_failures"]))
        if len(self.values) < 2:
            self.fact("a single year: growth, roa, roe and all unusual-movement rules are blank.")
        else:
            self.fact("roa and roe use average assets and equity, so %d has none." %
                      self.first["year"])
        plotted = len(sample_indices(len(self.years)))
        if plotted < len(self.years):
            self.fact("%s plots %d of the %d years, evenly spaced with the first and the last "
                      "included, so that the chart stays small; the CSV files hold every year."
                      % (CHART_NAME, plotted, len(self.years)))
        self.hypothesis("yearly figures can hide seasonality and one-off items inside a year.")

    def conclusion(self):
        self.heading("Conclusion")
        bulls, bears = len(self.bull_points()), len(self.bear_points())
        y = self.last["year"]
        self.fact("%d bull signal(s) and %d bear signal(s) hold in %d; %d unusual-movement hit(s) "
                  "in that year." % (bulls, bears, y,
                                     len(self.hits.latest)))
        if bears > bulls:
            stance = "the latest figures lean negative; the diligence questions above (above all " \
                     "receivables, margins and debt cost) should be answered before any position."
        elif bulls > bears:
            stance = "the latest figures lean positive; the open questions are about durability, " \
                     "not about the direction of the business."
        else:
            stance = "the figures are balanced; the answers to the diligence questions decide the " \
                     "case."
        self.hypothesis(stance)


# ---------------------------------------------------------------------------------------
# The chart


def sample_indices(count):
    """At most MAX_CHART_POINTS indices of range(count), evenly spaced, first and last
    included."""
    if count <= MAX_CHART_POINTS:
        return list(range(count))
    step = (count - 1) / (MAX_CHART_POINTS - 1)
    return sorted({round(k * step) for k in range(MAX_CHART_POINTS)})


class Chart:
    WIDTH, HEIGHT = 1000, 760
    PANEL_W, PANEL_H = 500, 360
    LEFT, RIGHT, TOP, BOTTOM = 80, 20, 60, 50
    COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"]

    def __init__(self, source, years):
        self.source = source
        self.years = years
        self.parts = []

    def add(self, text):
        self.parts.append(text)

    @staticmethod
    def text(x, y, content, **attrs):
        extra = "".join(' %s="%s"' % (k.rstrip("_").replace("_", "-"), xml_escape(str(v), {'"': "&quot;"}))
                        for k, v in attrs.items())
        return '<text x="%.1f" y="%.1f"%s>%s</text>' % (x, y, extra, xml_escape(content))

    @staticmethod
    def ticks(low, high, count=5):
        if low == high:
            low, high = low - 1, high + 1
        # Divided first: high - low overflows for values near the float limits.
        raw = high / count - low / count
        if not math.isfinite(raw) or raw <= 0:
            raw = 1.0
        magnitude = 10 ** math.floor(math.log10(raw))
        step = magnitude
        for factor in (1, 2, 2.5, 5, 10):
            if raw <= factor * magnitude:
                step = factor * magnitude
                break
        start = math.floor(low / step) * step
        end = math.ceil(high / step) * step
        values = []
        v = start
        while v <= end + step * 1e-9 and math.isfinite(v) and len(values) < 64:
            values.append(round(v, 10) + 0.0)  # + 0.0 turns -0.0 into 0.0
            v += step
        return values

    def panel(self, col, row, title, y_label, series, percent):
        x0 = col * self.PANEL_W + self.LEFT
        y0 = 40 + row * (self.PANEL_H + 10) + self.TOP
        w = self.PANEL_W - self.LEFT - self.RIGHT
        h = self.PANEL_H - self.TOP - self.BOTTOM
        self.add('<g class="panel" id="panel-%d">' % (row * 2 + col + 1))
        self.add(self.text(x0 + w / 2, y0 - 30, title, text_anchor="middle", font_size="15",
                           font_weight="bold", class_="panel-title"))
        values = [v for _, points in series for v in points if v is not None]
        if values:
            low, high = min(values + [0.0]), max(values + [0.0])
        else:
            low, high = 0.0, 1.0
        ticks = self.ticks(low, high)
        low, high = ticks[0], ticks[-1]

        def sx(i):
            if len(self.years) == 1:
                return x0 + w / 2
            return x0 + w * i / (len(self.years) - 1)

        def sy(v):
            return y0 + h - (v - low) / (high - low) * h

        self.add('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fafafa" '
                 'stroke="#cccccc"/>' % (x0, y0, w, h))
        for t in ticks:
            self.add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>'
                     % (x0, sy(t), x0 + w, sy(t)))
            label = ("%g%%" % (t * 100)) if percent else "{:,.0f}".format(t) \
                if abs(t) >= 1 or t == 0 else "%g" % t
            self.add(self.text(x0 - 6, sy(t) + 4, label, text_anchor="end", font_size="10"))
        if low < 0 < high:
            self.add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555555" '
                     'stroke-dasharray="4 3"/>' % (x0, sy(0), x0 + w, sy(0)))
        self.add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333333"/>'
                 % (x0, y0 + h, x0 + w, y0 + h))
        self.add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333333"/>'
                 % (x0, y0, x0, y0 + h))
        label_every = max(1, math.ceil(len(self.years) / 10))  # about ten labels at most
        for i, year in enumerate(self.years):
            if i % label_every and i != len(self.years) - 1:
                continue
            self.add(self.text(sx(i), y0 + h + 16, str(year), text_anchor="middle",
                               font_size="10"))
        self.add(self.text(x0 + w / 2, y0 + h + 36, "Fiscal year", text_anchor="middle",
                           font_size="11", class_="axis-label"))
        self.add(self.text(x0 - 62, y0 + h / 2, y_label, text_anchor="middle", font_size="11",
                           transform="rotate(-90 %.1f %.1f)" % (x0 - 62, y0 + h / 2),
                           class_="axis-label"))
        if not values:
            self.add(self.text(x0 + w / 2, y0 + h / 2, "no data for this panel",
                               text_anchor="middle", font_size="12", fill="#777777"))
        for k, (name, points) in enumerate(series):
            color = self.COLORS[k % len(self.COLORS)]
            segment = []
            segments = [segment]
            for i, v in enumerate(points):
                if v is None:
                    segment = []
                    segments.append(segment)
                else:
                    segment.append((sx(i), sy(v)))
            for seg in segments:
                if len(seg) > 1:
                    self.add('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                             % (color, " ".join("%.1f,%.1f" % p for p in seg)))
            for i, v in enumerate(points):
                if v is not None:
                    self.add('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s</title>'
                             '</circle>' % (sx(i), sy(v), color, xml_escape(
                                 "%s %s: %s" % (name, self.years[i],
                                                fmt_pct(v) if percent else fmt_amount(v)))))
            lx = x0 + 8 + k * (w / max(1, len(series)))
            ly = y0 - 12
            self.add('<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/>'
                     % (lx, ly - 9, color))
            self.add(self.text(lx + 14, ly, name, font_size="10", class_="legend"))
        self.add("</g>")

    def render(self, values, metrics):
        # Sampled evenly (first and last year included) so that the SVG stays small however
        # many years the file has; the subtitle says so.
        shown = sample_indices(len(self.years))
        all_years = len(self.years)
        self.years = [self.years[i] for i in shown]
        values = [values[i] for i in shown]
        metrics = [metrics[i] for i in shown]
        self.add('<?xml version="1.0" encoding="UTF-8"?>')
        self.add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
                 'viewBox="0 0 %d %d" font-family="sans-serif" role="img">'
                 % (self.WIDTH, self.HEIGHT, self.WIDTH, self.HEIGHT))
        span = (str(self.years[0]) if len(self.years) == 1
                else "%s-%s" % (self.years[0], self.years[-1]))
        title = "Financial trends, %s (%s)" % (self.source, span)
        self.add("<title>%s</title>" % xml_escape(title))
        self.add('<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>'
                 % (self.WIDTH, self.HEIGHT))
        self.add(self.text(self.WIDTH / 2, 24, title, text_anchor="middle", font_size="18",
                           font_weight="bold"))
        if len(shown) < all_years:
            self.add(self.text(self.WIDTH / 2, 42, "%d of %d years plotted, evenly spaced (first "
                               "and last included); every year is in %s" % (
                                   len(shown), all_years, METRICS_NAME),
                               text_anchor="middle", font_size="11", class_="sampling-note"))
        col = lambda key: [m[key] for m in metrics]
        raw = lambda key: [v.get(key) for v in values]
        self.panel(0, 0, "Revenue and net income", "Amount (file units)",
                   [("revenue", raw("revenue")), ("net_income", raw("net_income"))], False)
        self.panel(1, 0, "Gross, operating and net margins", "Margin (% of revenue)",
                   [("gross_margin", col("gross_margin")),
                    ("operating_margin", col("operating_margin")),
                    ("net_margin", col("net_margin"))], True)
        self.panel(0, 1, "Operating cash flow, capex and free cash flow", "Amount (file units)",
                   [("operating_cash_flow", raw("operating_cash_flow")),
                    ("capex", [abs(v) for v in raw("capital_expenditures")]),
                    ("free_cash_flow", col("free_cash_flow"))], False)
        self.panel(1, 1, "Receivables growth vs revenue growth", "Year-over-year growth (%)",
                   [("receivables_growth", col("receivables_growth")),
                    ("revenue_growth", col("revenue_growth"))], True)
        self.add("</svg>")
        return "\n".join(self.parts) + "\n"


# ---------------------------------------------------------------------------------------
# Main


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Analyse yearly financial statements (sandgate financial-analyst "
                    "reference program).")
    parser.add_argument("input", help="CSV of yearly statements, one row per fiscal year")
    parser.add_argument("--out-dir", default=".", help="where to write the six artifacts "
                        "(default: current directory)")
    return parser.parse_args(argv)


def run(argv):
    args = parse_args(argv)
    out_dir = os.path.abspath(args.out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as error:
        print("fatal: cannot create output directory %s: %s" % (out_dir, error), file=sys.stderr,
              flush=True)
        return EXIT_FATAL
    problems = Problems()
    try:
        table = read_table(args.input, problems)
    except FatalInput as error:
        print("fatal: %s" % error, file=sys.stderr, flush=True)
        return EXIT_FATAL
    if table is not None:
        say("read %s: %d column(s), %d data row(s)" % (os.path.basename(args.input),
                                                     len(table.header), table.rows))
    results = validate(table, problems)
    for is_fatal, message in problems:
        if not is_fatal:
            warn(message)
    if problems.fatal:
        rows = table.rows if table is not None else 0
        years = [y for y in table.years if y is not None] if table is not None else []
        write_atomic(os.path.join(out_dir, MANIFEST_NAME),
                     manifest(args.input, rows, years, results, [MANIFEST_NAME], out_dir))
        for is_fatal, message in problems:
            if is_fatal:
                print("fatal: " + message, file=sys.stderr, flush=True)
        say("validation failed; wrote %s with the failing validation_results" % MANIFEST_NAME)
        return EXIT_FATAL
    years = table.years
    say("validated %d rows, years %d-%d%s" % (
        len(years), years[0], years[-1],
        "" if results["years_ordered"] else " (sorted by year)"))

    names, values = build_values(table)
    metrics = compute_metrics(values)
    hits = HitSummary(years[-1])
    source = os.path.basename(args.input)

    copy_self(out_dir)
    say("wrote %s (copy of this program)" % SCRIPT_NAME)
    write_metrics(os.path.join(out_dir, METRICS_NAME), metrics)
    say("wrote %s (%d rows)" % (METRICS_NAME, len(metrics)))
    write_movements(os.path.join(out_dir, MOVEMENTS_NAME),
                    find_movements(names, values, metrics), hits)
    say("wrote %s (%d rows)" % (MOVEMENTS_NAME, hits.total))
    memo = Memo(source, names, values, metrics, hits, results, table).write()
    write_atomic(os.path.join(out_dir, MEMO_NAME), memo)
    say("wrote %s (%d sections)" % (MEMO_NAME, len(MEMO_HEADINGS)))
    write_atomic(os.path.join(out_dir, CHART_NAME), Chart(source, years).render(values, metrics))
    say("wrote %s (4 panels)" % CHART_NAME)
    write_atomic(os.path.join(out_dir, MANIFEST_NAME),
                 manifest(args.input, len(values), years, results, GENERATED, out_dir))
    say("wrote %s" % MANIFEST_NAME)
    warnings = problems.warnings
    last = metrics[-1]
    say("done: %d years %d-%d, %d unusual movement(s), %d warning(s); %d revenue_growth %s, "
        "operating_margin %s, free_cash_flow %s; output in %s" % (
            len(years), years[0], years[-1], hits.total, warnings, last["year"],
            fmt_signed_pct(last["revenue_growth"]), fmt_pct(last["operating_margin"]),
            fmt_amount(last["free_cash_flow"]), out_dir))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
