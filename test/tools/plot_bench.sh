#!/bin/sh
# gpuport_bench's records and scripts/plot-bench.py: --version answers with
# and without mpirun; a record file that cannot be opened stops the run
# before any measurement, naming the path and errno; a real 2-rank run (host
# memory, 8 B to 4 KiB, few rounds) writes a CSV with the documented columns
# and one row per size of each measurement, and a JSON of the same rows;
# the plot script turns the CSV into PNG files and refuses missing and
# malformed CSVs. Skips (77) without gpuport_bench, and the plots (after the
# other checks) without matplotlib.
build=${top_builddir:-.}
src=${top_srcdir:-.}
bench=$build/tools/gpuport_bench
mpirun=$build/test/mpi/mpirun.sh
plot=$src/scripts/plot-bench.py
fail=0
tmp=${TMPDIR:-/tmp}/plot_bench.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME CONDITION-COMMAND...
    name=$1
    shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fail=1; fi
}

if ! test -x "$bench"; then
    echo "SKIP: $bench is not built (it needs MPI)"
    exit 77
fi
# the checks are python's standard library; the plots need matplotlib, which
# Debian installs for its own python (a python3 earlier on PATH may lack it)
py=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1; then py=$p; break; fi
done
if test -z "$py"; then
    echo "SKIP: no python3 to read the records with"
    exit 77
fi
plot_py=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import matplotlib' 2>/dev/null; then
        plot_py=$p
        break
    fi
done

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$build/build_config.h")
"$bench" --version >"$tmp/v1" 2>&1
check "--version exits 0 without mpirun" test $? -eq 0
check "--version prints 'gpuport_bench (gpuport) $version'" \
    test "$(cat "$tmp/v1")" = "gpuport_bench (gpuport) $version"
"$mpirun" 2 "$bench" -v >"$tmp/v2" 2>&1
check "-v exits 0 under mpirun -np 2" test $? -eq 0
check "-v under mpirun prints the version once" \
    test "$(grep -c "^gpuport_bench (gpuport) $version\$" "$tmp/v2")" -eq 1

"$mpirun" 2 "$bench" --host --max-size 4k --csv "$tmp/no/such/dir/b.csv" \
    >"$tmp/open.out" 2>"$tmp/open.err"
rc=$?
check "an unwritable --csv exits non-zero" test $rc -ne 0
check "its message names the path and errno" grep -q \
    -- "--csv $tmp/no/such/dir/b.csv: cannot open for writing: No such file or directory (errno 2)" \
    "$tmp/open.err"
check "nothing was measured" sh -c "! grep -q '^ *size |' '$tmp/open.out'"
"$mpirun" 2 "$bench" --host --max-size 4k --json "$tmp/no/such/dir/b.json" \
    >"$tmp/open2.out" 2>"$tmp/open2.err"
rc=$?
check "an unwritable --json exits non-zero, naming it" sh -c "test $rc -ne 0 &&
    grep -q -- '--json $tmp/no/such/dir/b.json: cannot open for writing' '$tmp/open2.err'"

"$mpirun" 2 "$bench" --host --min-size 8 --max-size 4k --iters 0.02 \
    --csv "$tmp/b.csv" --json "$tmp/b.json" >"$tmp/run.out" 2>&1
rc=$?
check "gpuport_bench --csv --json at 2 ranks exits 0" test $rc -eq 0
test $rc -eq 0 || cat "$tmp/run.out"

# The schema (tools/bench_out.h, docs/PERFORMANCE.md "Records and plots")
# and the rows: a pingpong and a put_bw row for each of the 10 sizes,
# figures that are there and ordered (min <= median <= p99), the context on
# every row, and the JSON's rows equal to the CSV's.
cat >"$tmp/check.py" <<'EOF'
import csv, json, re, sys

COLUMNS = ("kind,measurement,size_bytes,metric,unit,stat,value,min,median,mean,p99,samples,"
           "baseline,baseline_value,baseline_min,baseline_median,baseline_mean,baseline_p99,"
           "baseline_samples,ratio,verified,ranks,transport,memory,host,cpu,gpu,version,commit,"
           "date").split(",")
csv_path, json_path, version = sys.argv[1:4]
bad = []
with open(csv_path, newline="") as f:
    lines = list(csv.reader(f))
if lines[0] != COLUMNS:
    bad.append(f"header is {lines[0]}")
rows = [dict(zip(lines[0], l)) for l in lines[1:]]
if any(len(l) != len(COLUMNS) for l in lines[1:]):
    bad.append("a row has a different number of fields")
sizes = [8 << i for i in range(10)]
for m in ("pingpong", "put_bw"):
    got = sorted(int(r["size_bytes"]) for r in rows if r["measurement"] == m)
    if got != sizes:
        bad.append(f"{m}: sizes {got}, expected one row each of {sizes}")
for r in rows:
    where = f"{r['measurement']} {r['size_bytes']}"
    if (r["kind"], r["ranks"], r["version"]) != ("host", "2", version):
        bad.append(f"{where}: kind/ranks/version {r['kind']}/{r['ranks']}/{r['version']}")
    if not r["host"] or not r["cpu"] or not r["commit"] or not r["transport"]:
        bad.append(f"{where}: host, cpu, commit or transport empty")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["date"]):
        bad.append(f"{where}: date {r['date']!r} is not UTC ISO-8601")
    if r["measurement"] not in ("pingpong", "put_bw"):
        continue
    num = {k: float(r[k]) for k in ("value", "baseline_value", "ratio")}
    if min(num.values()) <= 0 or r["verified"] != "yes":
        bad.append(f"{where}: value, baseline, ratio {num}, verified {r['verified']}")
    if abs(num["ratio"] - num["value"] / num["baseline_value"]) > 1e-5 * num["ratio"]:
        bad.append(f"{where}: ratio {num['ratio']} is not value / baseline_value")
    if r["measurement"] == "pingpong":
        for p in ("", "baseline_"):
            lo, med, mean, hi = (float(r[p + k]) for k in ("min", "median", "mean", "p99"))
            if not (0 < lo <= med <= hi and lo <= mean) or float(r[p + "value"]) != med:
                bad.append(f"{where}: {p}min/median/mean/p99 {lo} {med} {mean} {hi}")
            if int(r[p + "samples"]) < 1:
                bad.append(f"{where}: {p}samples {r[p + 'samples']}")
with open(json_path) as f:
    doc = json.load(f)
h = doc.get("header", {})
if h.get("kind") != "host" or h.get("version") != version or h.get("ranks") != 2:
    bad.append(f"JSON header {h}")
if len(doc.get("rows", [])) != len(rows):
    bad.append(f"JSON has {len(doc.get('rows', []))} rows, the CSV {len(rows)}")
for jr, cr in zip(doc.get("rows", []), rows):
    for k in COLUMNS:
        v, c = jr.get(k), cr[k]
        same = (c == "" and v is None) or (isinstance(v, bool) and c == ("yes" if v else "no")) \
            or (isinstance(v, (int, float)) and not isinstance(v, bool) and float(c) == v) \
            or v == c
        if not same:
            bad.append(f"JSON row {cr['measurement']} {cr['size_bytes']}: {k} {v!r}, CSV {c!r}")
            break
for b in bad[:20]:
    print(b)
print(f"{len(rows)} rows checked")
sys.exit(1 if bad else 0)
EOF
if test -s "$tmp/b.csv" && test -s "$tmp/b.json"; then
    check "the CSV and JSON records are complete and agree" \
        "$py" "$tmp/check.py" "$tmp/b.csv" "$tmp/b.json" "$version"
else
    check "the CSV and JSON records were written" false
fi

if test -z "$plot_py"; then
    echo "SKIP plots: no python3 with matplotlib (Debian: python3-matplotlib)"
    test $fail -eq 0 && exit 77
    exit 1
fi

# a PNG: the signature, then an IHDR chunk of a plot's size
is_png() {
    "$plot_py" - "$1" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
ok = b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR" and len(b) > 10000
w, h = struct.unpack(">II", b[16:24]) if ok else (0, 0)
print(f"{sys.argv[1]}: {len(b)} bytes, {w} x {h}")
sys.exit(0 if ok and w >= 400 and h >= 300 else 1)
EOF
}
"$plot_py" "$plot" -o "$tmp/plots" --prefix t "$tmp/b.csv" >"$tmp/plot.out" 2>&1
check "plot-bench.py exits 0" test $? -eq 0
for p in latency bandwidth; do
    check "t-$p.png is a PNG of a plot" is_png "$tmp/plots/t-$p.png"
done

# refusals, each naming the file (and the line where there is one)
"$plot_py" "$plot" -o "$tmp/plots" "$tmp/missing.csv" >/dev/null 2>"$tmp/e1"
rc=$?
check "a missing CSV: exit 2, named" sh -c "test $rc -eq 2 && grep -q '$tmp/missing.csv: cannot read' '$tmp/e1'"
cut -d, -f1-5 "$tmp/b.csv" >"$tmp/cut.csv"
"$plot_py" "$plot" -o "$tmp/plots" "$tmp/cut.csv" >/dev/null 2>"$tmp/e2"
rc=$?
check "a CSV without the columns: exit 2, named" \
    sh -c "test $rc -eq 2 && grep -q '$tmp/cut.csv: not a gpuport_bench CSV: no column' '$tmp/e2'"
sed '3s/^\([^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,\)[^,]*/\1fast/' "$tmp/b.csv" >"$tmp/word.csv"
"$plot_py" "$plot" -o "$tmp/plots" "$tmp/word.csv" >/dev/null 2>"$tmp/e3"
rc=$?
check "a word where a number belongs: exit 2, file and line named" \
    sh -c "test $rc -eq 2 && grep -q \"$tmp/word.csv:3: column value: 'fast' is not a number\" '$tmp/e3'"
: >"$tmp/empty.csv"
"$plot_py" "$plot" -o "$tmp/plots" "$tmp/empty.csv" >/dev/null 2>"$tmp/e4"
rc=$?
check "an empty CSV: exit 2, named" sh -c "test $rc -eq 2 && grep -q '$tmp/empty.csv: empty' '$tmp/e4'"

exit $fail
