#!/bin/sh
# README.md's "What works where" table stays honest where a script can tell:
#   - the section is there, each row has three cells (part, state, where it
#     has run) and a state of the fixed words: working, written (exists,
#     not run where it matters: the row must then say where it has not
#     run: "never", "not yet" or "mock"), or missing;
#   - every transport this build has (gpuport_info's "transports:" list)
#     has a row that names it (`shm`, `tcp`, ...);
#   - the README carries no measured figure outside code blocks (a number
#     with µs, ms, ns, GB/s, MB/s, M/s or %, or a ratio such as 1.2×; "2 × H200"
#     is a machine): figures age, and their
#     place is docs/PERFORMANCE.md beside their baselines and dates.
# Each disagreement is named with its line.
build=${top_builddir:-.}
src=${top_srcdir:-.}
readme=$src/README.md
info=$build/tools/gpuport_info
tmp=${TMPDIR:-/tmp}/gpuport_readme_status.$$
trap 'rm -f "$tmp".*' EXIT
bad=0

if ! grep -qx '## What works where' "$readme"; then
    echo "FAIL: $readme has no section \"## What works where\""
    exit 1
fi
awk '/^## / { on = ($0 == "## What works where") } on && /^\|/ { print NR ": " $0 }' "$readme" \
    >"$tmp.rows"
# header and separator rows first
sed -n '3,$p' "$tmp.rows" >"$tmp.body"
if ! test -s "$tmp.body"; then
    echo "FAIL: the table of \"## What works where\" has no rows"
    exit 1
fi
awk -F'|' '
{
    line = $1; sub(/:.*/, "", line)
    if (NF != 5) { printf "FAIL: README.md:%s: %d cells, want 3\n", line, NF - 2; bad = 1; next }
    state = $3; gsub(/^ +| +$/, "", state)
    where = $4
    if (state != "working" && state != "written" && state != "missing") {
        printf "FAIL: README.md:%s: state \"%s\" is none of working, written, missing\n", line, state
        bad = 1
    }
    if (state == "written" && where !~ /never|not yet|mock/) {
        printf "FAIL: README.md:%s: a part only written must say where it has not run\n", line
        bad = 1
    }
}
END { exit bad }' "$tmp.body" || bad=1
n=$(wc -l <"$tmp.body")

if test -x "$info"; then
    "$info" 2>/dev/null | awk '/^transports:/ { on = 1; next } on && /^  [a-z_]+ / { print $1; next } on { exit }' \
        >"$tmp.tl"
    if ! test -s "$tmp.tl"; then
        echo "FAIL: $info lists no transports"
        bad=1
    fi
    while read -r t; do
        if ! grep -q "\`$t\`" "$tmp.body"; then
            echo "FAIL: transport $t (gpuport_info) has no row in README.md's \"What works where\""
            bad=1
        fi
    done <"$tmp.tl"
    tls=$(tr '\n' ' ' <"$tmp.tl")
else
    echo "SKIP part: $info not built; transports not compared"
fi

# figures: outside fenced code blocks
awk '/^```/ { code = !code; next }
     !code && (/[0-9][0-9.,]* ?(µs|us|ms|ns|GB\/s|MB\/s|M\/s|%)([^A-Za-z0-9]|$)/ ||
               /[0-9]\.[0-9]+ ?×/) {
         printf "FAIL: README.md:%d: a measured figure (its place is docs/PERFORMANCE.md): %s\n", NR, $0
         bad = 1
     }
     END { exit bad }' "$readme" || bad=1

test "$bad" -eq 0 || exit 1
echo "PASS: README.md's table: $n rows, states checked${tls:+, every transport of this build (${tls% }) has a row}; no figures"
