#!/bin/sh
# README.md quotes the examples instead of fragments of its own: each fenced
# block after a line "<!-- excerpt: FILE -->" must consist of lines of FILE,
# in the file's order (blanks around a line ignored; a line "..." leaves
# lines out, blank lines are skipped). Both examples must be quoted.
src=${top_srcdir:-.}
awk -v src="$src" '
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t\r]+$/, "", s); return s }
function load(f,    l, path) {
    nl = 0
    path = src "/" f
    while ((getline l < path) > 0)
        lines[++nl] = trim(l)
    close(path)
    if (nl == 0) { printf "FAIL: README.md quotes %s, which is missing or empty\n", f; bad = blockbad = 1 }
}
/^<!-- excerpt: [^ ]+ -->$/ { file = $3; want = 1; next }
want && /^```/ { want = 0; inblock = 1; blockbad = 0; load(file); pos = 0; quoted[file] = 0; next }
inblock && /^```$/ {
    inblock = 0
    printf "%s: README.md quotes %d lines of %s\n", blockbad ? "FAIL" : "PASS", quoted[file], file
    next
}
inblock {
    line = trim($0)
    if (line == "" || line == "...")
        next
    for (i = pos + 1; i <= nl; i++)
        if (lines[i] == line)
            break
    if (i > nl) {
        printf "FAIL: README.md line %d is not a line of %s after its line %d: %s\n", NR, file, pos, $0
        bad = blockbad = 1
    } else {
        pos = i
        quoted[file]++
    }
}
END {
    split("examples/host_channels.c examples/device_channels.cu", need, " ")
    for (k in need)
        if (!(need[k] in quoted) || quoted[need[k]] == 0) {
            printf "FAIL: README.md has no excerpt of %s\n", need[k]
            bad = 1
        }
    exit bad
}' "$src/README.md"
