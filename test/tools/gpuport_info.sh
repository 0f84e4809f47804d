#!/bin/sh
# gpuport_info: its -c --markdown rows are exactly docs/GUIDE.md's variable
# table (the guide's table is generated from, and checked against, the
# library's configuration table); a bad GPUPORT_* value is reported once, naming it,
# with exit 1, in every view; -c --env lines read back by a shell give the
# same configuration; -c --json and --json are valid JSON with the fields
# gpuport_info(1) lists, and agree with the text views (python3; those
# checks are skipped without it); --version, --help and bad options; on
# the committed synthetic topologies it finds the GPUs and places every
# local rank's threads on distinct PUs; -m registers malloc and
# gpuport_mem_alloc memory and shows each transport's verdict (the same as
# docs/GUIDE.md's memory table), and lists the GPU kinds it could not make.
info=${top_builddir:-.}/tools/gpuport_info
src=${top_srcdir:-.}
fail=0
tmp=${TMPDIR:-/tmp}/gpuport_info.$$
trap 'rm -f "$tmp".*' EXIT

check() { # check NAME CONDITION-COMMAND...
    name=$1
    shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fail=1; fi
}

"$info" -c --markdown >"$tmp.rows" || fail=1
grep '^| `GPUPORT_' "$src/docs/GUIDE.md" >"$tmp.readme"
check "docs/GUIDE.md table equals gpuport_info -c --markdown" diff -u "$tmp.readme" "$tmp.rows"

GPUPORT_FIFO_SIZE=1000 "$info" -c >"$tmp.bad" 2>&1
rc=$?
check "a bad value exits 1" test "$rc" -eq 1
check "the error names the variable and what it accepts" \
    grep -q 'GPUPORT_FIFO_SIZE="1000" is not valid: expected a power of two' "$tmp.bad"

# --version: this program's version, the library's, the licence
"$info" --version >"$tmp.version" 2>&1
check "--version exits 0" test $? -eq 0
version=$(sed -n 's/^gpuport_info (gpuport) \([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)$/\1/p' "$tmp.version")
check "--version names this program's version first" sh -c \
    "test -n '$version' && head -n 1 '$tmp.version' | grep -qx 'gpuport_info (gpuport) $version'"
check "--version names the library's version" grep -qx "library: gpuport $version" "$tmp.version"
check "--version names the licence" grep -qx 'licence: BSD-3-Clause' "$tmp.version"
"$info" -v >"$tmp.v" 2>&1
check "-v is --version" cmp -s "$tmp.v" "$tmp.version"
if test -f "$src/LICENSE"; then
    check "LICENSE is the BSD 3-clause licence gpuport_info names" sh -c \
        "grep -q 'Redistribution and use in source and binary forms' '$src/LICENSE' &&
         grep -q 'Neither the name of' '$src/LICENSE'"
fi

# --help: every option, on stdout, exit 0
"$info" --help >"$tmp.help" 2>"$tmp.help.err"
check "--help exits 0, nothing on stderr" sh -c "test $? -eq 0 && test ! -s '$tmp.help.err'"
missing=
for opt in -c --markdown --env --json --man -t -n --xml -m --memory -v --version -h --help; do
    grep -q -- "[ ,]$opt\( \|,\|\$\)" "$tmp.help" || missing="$missing $opt"
done
check "--help lists every option" test -z "$missing"
test -z "$missing" || echo "  not listed:$missing"

# bad usage: exit 2, one line saying what was wrong, one pointing to --help
usage_error() { # usage_error NAME TEXT ARGS...: the line says TEXT
    name=$1 text=$2
    shift 2
    "$info" "$@" >"$tmp.use" 2>"$tmp.use.err"
    rc=$?
    check "$name: exit 2, two lines on stderr, nothing on stdout" sh -c \
        "test $rc -eq 2 && test \$(wc -l <'$tmp.use.err') -eq 2 && test ! -s '$tmp.use'"
    check "$name: says '$text'" grep -qF -- "$text" "$tmp.use.err"
}
usage_error "unknown option" "unknown option '--bogus'" --bogus
usage_error "--env without -c" "--env is a form of -c and needs it" --env
usage_error "two forms of -c" "--env and --man: choose one form of -c" -c --env --man
usage_error "-c with --json and a form" "--markdown and --json: choose one form of -c" \
    -c --markdown --json
usage_error "-n without a value" "-n needs a value" -n
usage_error "-n out of range" "-n needs a rank count 1..4096, not '0'" -n 0
usage_error "-m with -c" "-m shows the memory kinds only" -m -c

"$info" -m >"$tmp.mem" 2>"$tmp.mem.err"
check "-m: exit 0, nothing on stderr" sh -c "test $? -eq 0 && test ! -s '$tmp.mem.err'"
# ib's column: yes where ib is built (a kind alone never stops it), no where not
check "-m: malloc is host memory, shm and tcp carry it, cuda_ipc does not" \
    grep -q '^  malloc  *host  *host  *yes  *no  *\(yes\|no\)  *yes *$' "$tmp.mem"
check "-m: gpuport_mem_alloc is host-shared memory" \
    grep -q '^  gpuport_mem_alloc  *host-shared  *host  *yes ' "$tmp.mem"
check "-m: cuda_ipc's refusal of host memory says why (or that it is not built)" \
    grep -q '^  malloc, cuda_ipc: \(cuda_ipc moves GPU memory to GPU memory, and this is host memory\|this gpuport was built without CUDA\)' \
    "$tmp.mem"
check "-m: every GPU kind listed, made or not tried with why" sh -c \
    "test \$(grep -c '^  \(cudaHostAlloc\|cudaHostRegister\|cudaMallocManaged\|cudaMalloc \|gpuport_mem_alloc_device\|cudaMallocAsync\|exportable pool\)' '$tmp.mem') -eq 7"
if command -v python3 >/dev/null 2>&1; then
    "$info" -m --json >"$tmp.memjson"
    check "-m --json: valid JSON, malloc's verdicts as in the text" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
m = [x for x in d['memory'] if x['allocation'] == 'malloc'][0]
t = {x['name']: x for x in m['transports']}
assert m['kind'] == 'host' and m['device'] == -1
assert t['shm']['source'] and t['shm']['destination'] and t['tcp']['source']
assert all(x['tried'] or x['why'] for x in d['memory'])
" "$tmp.memjson"
fi
usage_error "-c with -t" "-t, -n and --xml are for the report" -c -t

# Each bad value is reported once, whatever the view; exit 1 in each.
once() { # once NAME PATTERN ENV-ASSIGNMENT ARGS...
    name=$1 pattern=$2 assign=$3
    shift 3
    env "$assign" "$info" "$@" >"$tmp.once" 2>&1
    rc=$?
    n=$(grep -cF -- "$pattern" "$tmp.once")
    check "$name: reported once (seen $n times), exit 1 (got $rc)" \
        sh -c "test $n -eq 1 && test $rc -eq 1"
}
for args in "" "-c" "-c --env" "-c --json" "--json"; do
    # shellcheck disable=SC2086  # words meant to split
    once "bad GPUPORT_FIFO_SIZE, gpuport_info $args" 'GPUPORT_FIFO_SIZE="abc" is not valid' \
        GPUPORT_FIFO_SIZE=abc $args
done
once "a cpu list too short for 3 ranks" 'GPUPORT_PROXY_CPUS="0" is not valid' \
    GPUPORT_PROXY_CPUS=0 -n 3
GPUPORT_BOGUS_NAME=1 "$info" >"$tmp.typo" 2>&1
check "an unknown GPUPORT_* name: warned about once, exit 0" sh -c \
    "test $? -eq 0 && test \$(grep -c 'GPUPORT_BOGUS_NAME is not a gpuport variable' '$tmp.typo') -eq 1"
GPUPORT_BOGUS_NAME=1 "$info" -c >"$tmp.typo" 2>&1
check "an unknown GPUPORT_* name under -c: warned about once" \
    test "$(grep -c 'GPUPORT_BOGUS_NAME is not a gpuport variable' "$tmp.typo")" -eq 1

# a number written with a suffix or in hex: -c shows the value in effect
GPUPORT_FIFO_SIZE=2k GPUPORT_SHM_ASYNC_MIN=0x10 "$info" -c >"$tmp.num" 2>&1
check "-c shows 2k as 2048 and 0x10 as 16, the values in effect" sh -c \
    "grep -Eq '^GPUPORT_FIFO_SIZE +1024 +2048 ' '$tmp.num' &&
     grep -Eq '^GPUPORT_SHM_ASYNC_MIN +256k +16 ' '$tmp.num'"
GPUPORT_FIFO_SIZE=2k "$info" -c --env >"$tmp.num" 2>&1
check "-c --env writes GPUPORT_FIFO_SIZE=2048 for 2k" grep -qx 'GPUPORT_FIFO_SIZE=2048' "$tmp.num"

# -c --env: one NAME=value line per variable, the value in effect,
# quoted where a shell needs it; a shell that reads the lines has the same
# configuration
nvars=$(grep -c '^| `GPUPORT_' "$tmp.readme")
"$info" -c --env >"$tmp.env" 2>"$tmp.env.err"
check "-c --env: exit 0 and nothing on stderr without GPUPORT_* values" \
    sh -c "test $? -eq 0 && test ! -s '$tmp.env.err'"
check "-c --env: $nvars lines, each GPUPORT_X=value" \
    sh -c "test \$(grep -c '^GPUPORT_[A-Z0-9_]*=' '$tmp.env') -eq $nvars &&
           test \$(wc -l <'$tmp.env') -eq $nvars"
check "-c --env: defaults, an empty one as ''" sh -c \
    "grep -qx 'GPUPORT_FIFO_SIZE=1024' '$tmp.env' && grep -qx \"GPUPORT_PROXY_CPUS=''\" '$tmp.env'"
GPUPORT_FIFO_SIZE=64 GPUPORT_SOCKET_IFNAME='^docker,lo' GPUPORT_MAX_CHANNELS=abc \
    GPUPORT_TRANSPORT=TCP "$info" -c --env >"$tmp.env2" 2>"$tmp.env2.err"
check "-c --env with an invalid value: exit 1" test $? -eq 1
check "-c --env: the environment's values, quoted where needed, the default for an invalid one" \
    sh -c "grep -qx 'GPUPORT_FIFO_SIZE=64' '$tmp.env2' &&
           grep -qx \"GPUPORT_SOCKET_IFNAME='^docker,lo'\" '$tmp.env2' &&
           grep -qx 'GPUPORT_MAX_CHANNELS=1024' '$tmp.env2' &&
           grep -qx 'GPUPORT_TRANSPORT=TCP' '$tmp.env2'"
check "-c --env: the invalid value is named on stderr" \
    grep -q 'GPUPORT_MAX_CHANNELS="abc" is not valid' "$tmp.env2.err"
# read back by sh, in an environment with no other GPUPORT_* variable
env -i PATH="$PATH" sh -c "set -a; . '$tmp.env2'; exec '$info' -c --env" >"$tmp.env3" 2>&1
check "-c --env read back by sh gives the same lines, without an error" cmp -s "$tmp.env2" "$tmp.env3"

"$info" >"$tmp.plain" 2>&1
check "runs on this machine" test $? -eq 0
check "names every transport" sh -c "grep -c '^  \(shm\|cuda_ipc\|ib\|tcp\) ' '$tmp.plain' | grep -qx 4"

# -c --json and --json: parsed by python3, fields checked against the
# other views
if command -v python3 >/dev/null 2>&1; then
    GPUPORT_FIFO_SIZE=64 GPUPORT_MAX_CHANNELS=abc GPUPORT_HOST_ID="$(printf '\377"\\')" \
        "$info" -c --json >"$tmp.json" 2>/dev/null
    check "-c --json with an invalid value: exit 1" test $? -eq 1
    "$info" -c --markdown >"$tmp.md"
    check "-c --json: valid JSON whose variables agree with -c --markdown and -c --env" \
        python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
rows = [l.rstrip("\n") for l in open(sys.argv[2])]
env = [l.split("=", 1)[0] for l in open(sys.argv[3])]
v = d["variables"]
keys = {"name", "default", "value", "source", "accepted", "meaning", "rejected"}
assert isinstance(d["gpuport"], str) and d["gpuport"], d
assert [x["name"] for x in v] == env, "names differ from -c --env"
for x, row in zip(v, rows):
    assert set(x) == keys, x
    assert row == "| `%s` | `%s` | %s |" % (x["name"], x["default"], x["meaning"]), (x, row)
    assert x["accepted"], x
    assert x["source"] in ("default", "environment"), x
by = {x["name"]: x for x in v}
f, m, h, t = (by["GPUPORT_" + n] for n in ("FIFO_SIZE", "MAX_CHANNELS", "HOST_ID", "TRANSPORT"))
assert (f["value"], f["source"], f["default"], f["rejected"]) == ("64", "environment", "1024", None), f
assert (m["value"], m["source"], m["rejected"]) == ("1024", "default", "abc"), m
assert (h["value"], h["source"], h["rejected"]) == ("0", "default", "\ufffd\"\\"), h
assert (t["value"], t["source"], t["rejected"]) == ("auto", "default", None), t
assert f["accepted"].startswith("a power of two"), f
' "$tmp.json" "$tmp.md" "$tmp.env"

    topo=$src/test/topo/dual-socket-8gpu.xml
    "$info" --json --xml "$topo" -t -n 8 >"$tmp.rjson" 2>/dev/null
    check "--json: exit 0" test $? -eq 0
    "$info" --xml "$topo" -t -n 8 >"$tmp.rtext" 2>/dev/null
    check "--json: valid JSON that says what the text report says" python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
assert d["licence"] == "BSD-3-Clause" and d["config_valid"] is True, d
assert text.startswith("gpuport %s, licence: BSD-3-Clause\n" % d["gpuport"]), text[:80]
assert set(d["build"]) == {"cuda", "mpi", "hwloc", "ibverbs"}, d["build"]
c = d["cuda"]
assert c["usable"] == (c["why"] is None) and len(c["devices"]) <= c["device_count"], c
assert [t["name"] for t in d["transports"]] == ["shm", "cuda_ipc", "ib", "tcp"], d["transports"]
for t in d["transports"]:
    assert "  %-9s %s\n" % (t["name"], t["detail"]) in text, t
topo = d["topology"]
assert topo["readable"] and topo["source"] == sys.argv[3] and topo["description"] in text, topo
p = d["placement"]
assert p["decided"] and p["local_ranks"] == 8 and len(p["ranks"]) == 8 and "failed_rank" not in p, p
lines = re.findall(r"^  local rank (\d+): proxy PU (-?\d+), flusher PU (-?\d+) \((\w+), GPU (\S+)\)", text, re.M)
assert len(lines) == 8, lines
for r, l in zip(p["ranks"], lines):
    assert (str(r["local_rank"]), str(r["proxy_pu"]), str(r["flusher_pu"]), r["level"], r["gpu"] or "none") == l, (r, l)
    assert r["gpu"] is not None, r
' "$tmp.rjson" "$tmp.rtext" "$topo"

    GPUPORT_PROXY_CPUS=0 "$info" --json -n 3 >"$tmp.rbad" 2>/dev/null
    check "--json, a rank that cannot be placed: exit 1, valid JSON that says which" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["placement"]
assert p["decided"] is False and p["failed_rank"] == 0 and p["ranks"] == [], p
' "$tmp.rbad"
else
    echo "SKIP JSON checks: python3 is not installed"
fi

# tcp's interface choice (GPUPORT_SOCKET_IFNAME): loopback by name (alone and
# as the second prefix of a list), an exclusion that leaves nothing, and a
# name that matches nothing
if ip -o -4 addr show dev lo 2>/dev/null | grep -q '127\.0\.0\.1'; then
    GPUPORT_SOCKET_IFNAME=lo "$info" >"$tmp.lo" 2>&1
    check "tcp listens on lo when asked" grep -q '^  tcp .*interface lo, address 127\.0\.0\.1 (GPUPORT_SOCKET_IFNAME)' "$tmp.lo"
    GPUPORT_SOCKET_IFNAME=nosuchif0,lo "$info" >"$tmp.lo2" 2>&1
    check "tcp takes an interface the list's second prefix names" \
        grep -q '^  tcp .*interface lo, address 127\.0\.0\.1 (GPUPORT_SOCKET_IFNAME)' "$tmp.lo2"
    GPUPORT_SOCKET_IFNAME=nosuchif0 "$info" >"$tmp.noif" 2>&1
    check "tcp says no interface matches, and names those up" \
        grep -q '^  tcp .*GPUPORT_SOCKET_IFNAME=nosuchif0 matches no interface.*up here: .*lo' "$tmp.noif"
else
    echo "SKIP tcp interface checks: no lo with 127.0.0.1 here"
fi
GPUPORT_SOCKET_IFNAME='eth 0' "$info" -c >"$tmp.badif" 2>&1
check "a bad GPUPORT_SOCKET_IFNAME is reported" \
    grep -q 'GPUPORT_SOCKET_IFNAME="eth 0" is not valid' "$tmp.badif"

"$info" --xml "$src/test/topo/dual-socket-8gpu.xml" -t >"$tmp.near" 2>&1
check "dual-socket-8gpu: GPUs 0-3 nearest mlx5_0, 4-7 nearest mlx5_1" sh -c \
    "grep -c '^GPU 0000:\(1b\|43\|52\|61\):.*nearest RDMA device mlx5_0\$' '$tmp.near' | grep -qx 4 &&
     grep -c '^GPU 0000:\(9d\|c3\|d1\|df\):.*nearest RDMA device mlx5_1\$' '$tmp.near' | grep -qx 4"

for topo in dual-socket-8gpu:8 single-socket-4gpu:4; do
    file=$src/test/topo/${topo%%:*}.xml
    n=${topo##*:}
    "$info" --xml "$file" -t -n "$n" >"$tmp.topo" 2>&1
    check "$topo: exit 0" test $? -eq 0
    check "$topo: $n placements" sh -c "grep -c '^  local rank ' '$tmp.topo' | grep -qx $n"
    check "$topo: every rank near its own GPU" \
        sh -c "grep -c '^  local rank .*(device, GPU ' '$tmp.topo' | grep -qx $n"
    check "$topo: $n GPUs described" sh -c "grep -c '^GPU ' '$tmp.topo' | grep -qx $n"
    # every proxy and flusher PU differs from every other
    pus=$(sed -n 's/^  local rank [0-9]*: proxy PU \([0-9-]*\), flusher PU \([0-9-]*\).*/\1 \2/p' "$tmp.topo" | tr ' ' '\n' | sort -n)
    check "$topo: $((2 * n)) distinct PUs" sh -c "test \$(echo '$pus' | sort -u | grep -c .) -eq $((2 * n))"
done

exit $fail
