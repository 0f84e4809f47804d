#!/usr/bin/env python3
"""Plots gpuport_bench --csv files: latency and bandwidth against message size.

usage: plot-bench.py [-o DIR] [--prefix NAME] [--only REGEX] CSV [CSV ...]

Writes DIR/NAME-latency.png and DIR/NAME-bandwidth.png (without --prefix:
latency.png and bandwidth.png), log-log. Every measurement of every file is
one line, gpuport's solid and its baseline's dashed in the same colour;
latency lines are the median with a band from the minimum to the 99th
percentile where the file has them. Each legend entry names the file's
machine, commit and date. Rows without a message size (rates of the FIFO, CPU
use) and the idle-proxy rows are not plotted; --only REGEX plots only the
measurements whose names match.

Needs matplotlib (Debian: python3-matplotlib); draws with the Agg backend,
no display. Exit status 0, or 2 with a message naming the file and line for a
missing or malformed CSV, or 3 without matplotlib.
"""

import argparse
import csv
import os
import re
import sys

REQUIRED = ("kind", "measurement", "size_bytes", "metric", "unit", "value", "min", "p99",
            "baseline", "baseline_value", "baseline_min", "baseline_p99", "memory",
            "transport", "host", "commit", "date")
PLOTTED = {"latency": "latency.png", "bandwidth": "bandwidth.png"}


class CsvError(Exception):
    pass


def number(path, line, col, text, required):
    """The float in `text`, None for an empty field that may be empty."""
    if text is None or text == "":
        if required:
            raise CsvError(f"{path}:{line}: column {col} is empty")
        return None
    try:
        v = float(text)
    except ValueError:
        raise CsvError(f"{path}:{line}: column {col}: {text!r} is not a number") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise CsvError(f"{path}:{line}: column {col}: {text!r} is not a finite number")
    return v


def read_rows(path):
    """The file's rows as dicts, numbers converted; raises CsvError."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise CsvError(f"{path}: cannot read: {e.strerror}") from None
    with f:
        reader = csv.DictReader(f)
        if not reader.fieldnames:
            raise CsvError(f"{path}: empty: no header line")
        missing = [c for c in REQUIRED if c not in reader.fieldnames]
        if missing:
            raise CsvError(f"{path}: not a gpuport_bench CSV: no column {', '.join(missing)} "
                           f"(header: {','.join(reader.fieldnames)[:120]})")
        rows = []
        try:
            for r in reader:
                line = reader.line_num
                if None in r:
                    raise CsvError(f"{path}:{line}: more fields than the header has")
                if any(r[c] is None for c in REQUIRED):
                    raise CsvError(f"{path}:{line}: fewer fields than the header has")
                r["line"] = line
                for col in ("size_bytes", "value", "min", "p99", "baseline_value",
                            "baseline_min", "baseline_p99"):
                    r[col] = number(path, line, col, r[col], False)
                rows.append(r)
        except csv.Error as e:
            raise CsvError(f"{path}:{reader.line_num}: {e}") from None
    if not rows:
        raise CsvError(f"{path}: a header but no rows")
    return rows


def file_label(rows):
    """host, commit, date of a file (as its first row gives them)."""
    r = rows[0]
    return f"{r['host']}, {r['commit']}, {r['date'][:10]}"


def size_text(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:g} {unit}"
        b /= 1024
    return f"{b:g}"


def series_of(files, metric, only):
    """[(label, points, band, is_baseline, colour index)] for one metric: one
    gpuport line per (file, measurement, memory, transport), one baseline line
    per (file, measurement, baseline)."""
    lines = {}
    order = []
    for fi, (path, rows) in enumerate(files):
        tag = file_label(rows)
        for r in rows:
            m = r["measurement"]
            if r["metric"] != metric or not r["size_bytes"] or m.startswith("idle_"):
                continue
            if only and not only.search(m):
                continue
            mem = f" [{r['memory']}]" if r["memory"] and r["kind"] == "gpu" else ""
            gkey = (fi, m, r["memory"], r["transport"])
            if gkey not in lines:
                lines[gkey] = (f"gpuport {m}{mem} ({r['transport']}) - {tag}", [], [], False,
                               (fi, m))
                order.append(gkey)
            if r["value"]:
                lines[gkey][1].append((r["size_bytes"], r["value"]))
                if r["min"] and r["p99"]:
                    lines[gkey][2].append((r["size_bytes"], r["min"], r["p99"]))
            if r["baseline"] and r["baseline_value"]:
                bkey = (fi, m, r["baseline"])
                if bkey not in lines:
                    lines[bkey] = (f"{r['baseline']} - {tag}", [], [], True, (fi, m))
                    order.append(bkey)
                pts = lines[bkey][1]
                if all(p[0] != r["size_bytes"] for p in pts):  # --mem both: one baseline
                    pts.append((r["size_bytes"], r["baseline_value"]))
                    if r["baseline_min"] and r["baseline_p99"]:
                        lines[bkey][2].append((r["size_bytes"], r["baseline_min"],
                                               r["baseline_p99"]))
    # a colour per gpuport line; a baseline takes its measurement's first one
    out = []
    first = {}
    n = 0
    for k in order:
        label, pts, band, base, ckey = lines[k]
        if not pts:
            continue
        if base and ckey in first:
            ci = first[ckey]
        else:
            ci = n
            n += 1
            first.setdefault(ckey, ci)
        out.append((label, sorted(pts), sorted(band), base, ci))
    return out


def plot(plt, ticker, files, metric, path, only):
    series = series_of(files, metric, only)
    if not series:
        return False
    unit = "us" if metric == "latency" else "GB/s (1e9 B/s)"
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
    cmap = plt.get_cmap("tab20")  # pairs: gpuport dark, its baseline light
    lo = min(p[0] for s in series for p in s[1])
    hi = max(p[0] for s in series for p in s[1])
    for label, pts, band, base, ci in series:
        colour = cmap((2 * ci + (1 if base else 0)) % 20)
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        ax.plot(xs, ys, linestyle="--" if base else "-", marker="s" if base else "o",
                markersize=3.5, linewidth=1.4, color=colour, label=label)
        if len(band) > 1:
            ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band],
                            color=colour, alpha=0.12, linewidth=0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    step = 1
    while (hi / lo) ** (1 / step) > 2 ** 12 and step < 8:  # at most about 12 ticks
        step += 1
    ticks = []
    t = lo
    while t <= hi:
        ticks.append(t)
        t *= 2 ** step
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: size_text(v)))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xlabel("message size")
    if metric == "latency":
        ax.set_ylabel(f"latency, {unit} (median; band: min to p99)")
        ax.set_title("gpuport_bench latency against size (ping-pong: half the round trip)")
    else:
        ax.set_ylabel(f"bandwidth, {unit}")
        ax.set_title("gpuport_bench bandwidth against size")
    ax.grid(True, which="major", linewidth=0.4, alpha=0.6)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return True


def main(argv):
    ap = argparse.ArgumentParser(
        prog="plot-bench.py",
        description="Plots gpuport_bench --csv files: latency and bandwidth against size.")
    ap.add_argument("csv", nargs="+", help="gpuport_bench --csv output")
    ap.add_argument("-o", "--output", default=".", metavar="DIR",
                    help="directory for the PNG files (made if missing; default .)")
    ap.add_argument("--prefix", default="", metavar="NAME",
                    help="file names NAME-latency.png and NAME-bandwidth.png")
    ap.add_argument("--only", default=None, metavar="REGEX",
                    help="plot only measurements whose names match")
    a = ap.parse_args(argv)
    try:
        only = re.compile(a.only) if a.only else None
    except re.error as e:
        print(f"plot-bench: --only {a.only!r}: {e}", file=sys.stderr)
        return 2
    try:
        files = [(p, read_rows(p)) for p in a.csv]
    except CsvError as e:
        print(f"plot-bench: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError as e:
        print(f"plot-bench: matplotlib is missing for {sys.executable} ({e}); on Debian: "
              "apt-get install python3-matplotlib, and run with /usr/bin/python3",
              file=sys.stderr)
        return 3
    try:
        os.makedirs(a.output, exist_ok=True)
    except OSError as e:
        print(f"plot-bench: -o {a.output}: {e.strerror}", file=sys.stderr)
        return 2
    wrote = 0
    for metric, name in PLOTTED.items():
        path = os.path.join(a.output, f"{a.prefix}-{name}" if a.prefix else name)
        if plot(plt, ticker, files, metric, path, only):
            print(path)
            wrote += 1
        else:
            print(f"plot-bench: no {metric} rows with a message size: {path} not written",
                  file=sys.stderr)
    if not wrote:
        print("plot-bench: nothing to plot", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
