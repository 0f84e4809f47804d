#!/bin/sh
# No committed file names a path of the machine it was made on: every file
# make distdir copies (make print-distfiles) and everything under docs/
# (records and plots included) is searched for absolute paths under the
# folders such machines keep their work in (/work, /home, /root, /Users,
# /scratch, /mnt). A record that names its own files does so relative to the
# run (OUT/run.csv, tools/gpuport_bench). Binary files are skipped. Each hit
# is named with its file and line.
build=${top_builddir:-.}
src=${top_srcdir:-.}
tmp=${TMPDIR:-/tmp}/gpuport_machine_paths.$$
trap 'rm -f "$tmp".*' EXIT

# MAKEFLAGS cleared: no jobserver of the make running this test is expected
if ! MAKEFLAGS='' MFLAGS='' MAKELEVEL='' ${MAKE:-make} -s -C "$build" print-distfiles \
    >"$tmp.out" 2>"$tmp.err"; then
    echo "FAIL: make print-distfiles in $build:"
    cat "$tmp.err"
    exit 1
fi
sed -n 's/^distfile: //p' "$tmp.out" >"$tmp.list"
if ! grep -qx 'README.md' "$tmp.list"; then
    echo "FAIL: make print-distfiles lists no README.md; its output does not look like DISTFILES"
    exit 1
fi
(cd "$src" && find docs -type f) >>"$tmp.list"

# this script names the folders itself
pattern='(^|[^A-Za-z0-9_.~-])/(work|home|root|Users|scratch|mnt)/'
n=0
bad=0
sort -u "$tmp.list" | while IFS= read -r f; do
    p=$src/$f
    if test -d "$p"; then
        find "$p" -type f
    elif test -f "$p"; then
        echo "$p"
    fi
done >"$tmp.files"
while IFS= read -r p; do
    case $p in */test/tools/machine_paths.sh) continue ;; esac
    n=$((n + 1))
    # -I: binary files (plots) never match
    if grep -InE "$pattern" "$p" >"$tmp.hit" 2>/dev/null; then
        sed "s|^|FAIL: ${p#"$src"/}:|" "$tmp.hit" | cut -c1-200
        bad=1
    fi
done <"$tmp.files"
if test "$bad" -ne 0; then
    echo "FAIL: machine paths in committed files (write them relative to the run or the tree)"
    exit 1
fi
echo "PASS: $n files name no machine path"
