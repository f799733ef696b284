#!/usr/bin/env python3
"""Independent cross-check of three latest-year metrics of the financial-analyst playbook.

Usage: python3 recompute_metrics.py INPUT.csv

Deliberately shares no code with analyze_financials.py: it reads the input CSV with its own
parser, takes the latest year (after sorting by year) and the one before it, and computes

    revenue_growth   = (revenue_t - revenue_p) / abs(revenue_p)   (blank: one year or p == 0)
    operating_margin = operating_income_t / revenue_t               (blank: revenue_t == 0)
    free_cash_flow   = operating_cash_flow_t - abs(capital_expenditures_t)

It prints one line `year=2025 revenue_growth=0.137750238 operating_margin=... free_cash_flow=...`
and, when calculated_metrics.csv exists in the current directory, compares that file's row
for the same year (within 1e-6 relative or 1e-9 absolute; blank must match blank) and prints
`match` or one `MISMATCH <metric>: ...` line per difference.

Exit status: 0 recomputed (and matched, or nothing to compare); 1 mismatch (or the year is
missing from calculated_metrics.csv); 2 unusable input.
"""

import csv
import math
import os
import sys

NEEDED = ["year", "revenue", "operating_income", "operating_cash_flow", "capital_expenditures"]
CHECKED = ["revenue_growth", "operating_margin", "free_cash_flow"]
METRICS_FILE = "calculated_metrics.csv"


def load(path):
    """{year: entry} for the latest two years, streaming the file (it may be 64 MiB): every
    year is checked, only two are kept."""
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = (row for row in csv.reader(handle) if any(cell.strip() for cell in row))
        header = next(rows, None)
        if header is None:
            raise ValueError("%s is empty" % path)
        names = [cell.strip() for cell in header]
        missing = [name for name in NEEDED if name not in names]
        if missing:
            raise ValueError("%s lacks column(s): %s" % (path, ", ".join(missing)))
        where = {name: names.index(name) for name in NEEDED}
        seen = set()
        latest = {}
        for line_number, row in enumerate(rows, start=2):
            entry = {}
            for name, position in where.items():
                text = row[position].strip() if position < len(row) else ""
                try:
                    number = float(text)
                except ValueError:
                    raise ValueError("%s line %d: column %s is not a number: %r"
                                     % (path, line_number, name, text))
                if not math.isfinite(number):
                    raise ValueError("%s line %d: column %s is not finite: %r"
                                     % (path, line_number, name, text))
                entry[name] = number
            year = int(entry["year"])
            if year in seen:
                raise ValueError("%s: year %d appears twice" % (path, year))
            seen.add(year)
            latest[year] = entry
            if len(latest) > 2:
                del latest[min(latest)]
    if not latest:
        raise ValueError("%s has no data rows" % path)
    return latest


def recompute(years):
    ordered = sorted(years)
    latest = years[ordered[-1]]
    before = years[ordered[-2]] if len(ordered) > 1 else None
    result = {"year": ordered[-1]}
    if before is None or before["revenue"] == 0:
        result["revenue_growth"] = None
    else:
        result["revenue_growth"] = (latest["revenue"] - before["revenue"]) / abs(before["revenue"])
    if latest["revenue"] == 0:
        result["operating_margin"] = None
    else:
        result["operating_margin"] = latest["operating_income"] / latest["revenue"]
    result["free_cash_flow"] = latest["operating_cash_flow"] - abs(latest["capital_expenditures"])
    return result


def show(value):
    return "" if value is None else "%.10g" % value


def close(a, b):
    return abs(a - b) <= max(1e-9, 1e-6 * max(abs(a), abs(b)))


def compare(result, path):
    with open(path, encoding="utf-8-sig", newline="") as handle:
        row = next((row for row in csv.DictReader(handle)
                    if (row.get("year") or "").strip() == str(result["year"])), None)
    if row is None:
        return ["MISMATCH year: %d has no row in %s" % (result["year"], path)]
    problems = []
    for name in CHECKED:
        text = (row.get(name) or "").strip()
        mine = result[name]
        if mine is None or not text:
            if (mine is None) != (not text):
                problems.append("MISMATCH %s: recomputed %r vs file %r"
                                % (name, show(mine), text))
            continue
        try:
            theirs = float(text)
        except ValueError:
            problems.append("MISMATCH %s: file holds a non-number %r" % (name, text))
            continue
        if not close(mine, theirs):
            problems.append("MISMATCH %s: recomputed %s vs file %s" % (name, show(mine), text))
    return problems


def main(argv):
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print("usage: python3 recompute_metrics.py INPUT.csv", file=sys.stderr)
        return 2
    try:
        result = recompute(load(argv[0]))
    except (OSError, ValueError, UnicodeDecodeError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 2
    print("year=%d %s" % (result["year"], " ".join(
        "%s=%s" % (name, show(result[name])) for name in CHECKED)), flush=True)
    if not os.path.exists(METRICS_FILE):
        print("no %s in the current directory; nothing compared" % METRICS_FILE)
        return 0
    try:
        problems = compare(result, METRICS_FILE)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        print("MISMATCH: cannot read %s: %s" % (METRICS_FILE, error))
        return 1
    if problems:
        for line in problems:
            print(line)
        return 1
    print("match")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
