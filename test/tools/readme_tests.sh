#!/bin/sh
# docs/TESTING.md, the testing guide (the whole file: its list of the tests
# under "## The tests" and the scripts of its other sections), and the test
# suite agree:
#   - every test that make check runs here (make print-tests: $(TESTS) of
#     this configuration) is named there by its file name (test_idle,
#     channels_np2.sh), or by its path where two tests share a file name
#     (test/mpi/stress_np4.sh, test/net/stress_np4.sh);
#   - every test program (test_NAME), fuzz harness (fuzz_NAME) and script
#     (NAME.sh) named anywhere in it exists: test/*/test_NAME.c or .cu,
#     test/fuzz/fuzz_NAME.c, and the script (or its .in) at the path given,
#     else under test/ or scripts/ by that name.
# Each disagreement is named.
build=${top_builddir:-.}
src=${top_srcdir:-.}
guide=$src/docs/TESTING.md
tmp=${TMPDIR:-/tmp}/gpuport_readme_tests.$$
trap 'rm -f "$tmp".*' EXIT

cat "$guide" >"$tmp.guide" 2>/dev/null
if ! grep -qx '## The tests' "$tmp.guide"; then
    echo "FAIL: $guide is missing or has no section \"## The tests\""
    exit 1
fi

# MAKEFLAGS cleared: no jobserver of the make running this test is expected
if ! MAKEFLAGS='' MFLAGS='' MAKELEVEL='' ${MAKE:-make} -s -C "$build" print-tests \
    >"$tmp.tests" 2>"$tmp.err"; then
    echo "FAIL: make print-tests in $build:"
    cat "$tmp.err"
    exit 1
fi
sed -n 's/^tests: //p' "$tmp.tests" | tr ' ' '\n' | sed '/^$/d' >"$tmp.list"
if ! grep -q '^test/unit/' "$tmp.list"; then
    echo "FAIL: make print-tests lists no unit test; its output does not look like TESTS:"
    head -c 300 "$tmp.tests"
    exit 1
fi

# the guide's words: runs of name characters, so `a`, (a) and a/b/c.sh split
tr -c 'A-Za-z0-9_./-' '\n' <"$tmp.guide" | sed -e 's/[.]*$//' -e '/^$/d' | sort -u >"$tmp.words"

named() {
    grep -qxF "$1" "$tmp.words"
}

fail=0
ntests=0
while read -r t; do
    ntests=$((ntests + 1))
    base=${t##*/}
    if test "$(grep -c -e "/$base\$" "$tmp.list")" -gt 1; then
        named "$t" || {
            echo "FAIL: make check runs $t, which docs/TESTING.md does not name by its path (another test is also called $base)"
            fail=1
        }
    elif ! named "$base" && ! named "$t"; then
        echo "FAIL: make check runs $t, which docs/TESTING.md does not name ($base)"
        fail=1
    fi
done <"$tmp.list"

exists_under() {
    for d in "$src/test" "$src/scripts"; do
        test -n "$(find "$d" \( -name "$1" -o -name "$1.in" \) -print 2>/dev/null | head -n 1)" &&
            return 0
    done
    return 1
}

nnamed=0
while read -r w; do
    case $w in
    test_[a-z0-9]*)
        case $w in */* | *.*) continue ;; esac
        nnamed=$((nnamed + 1))
        set -- "$src"/test/*/"$w".c "$src"/test/*/"$w".cu
        found=0
        for f in "$@"; do test -f "$f" && found=1; done
        test $found -eq 1 || {
            echo "FAIL: docs/TESTING.md names $w, which is no test/*/$w.c or .cu"
            fail=1
        }
        ;;
    fuzz_[a-z0-9]*)
        case $w in */* | *.*) continue ;; esac
        nnamed=$((nnamed + 1))
        test -f "$src/test/fuzz/$w.c" || {
            echo "FAIL: docs/TESTING.md names $w, which is no test/fuzz/$w.c"
            fail=1
        }
        ;;
    *.sh)
        nnamed=$((nnamed + 1))
        case $w in
        */*) test -f "$src/$w" || test -f "$src/$w.in" || {
                echo "FAIL: docs/TESTING.md names $w, which is not in the source tree"
                fail=1
            } ;;
        *) exists_under "$w" || {
                echo "FAIL: docs/TESTING.md names $w, which is nowhere under test/ or scripts/"
                fail=1
            } ;;
        esac
        ;;
    esac
done <"$tmp.words"

if test $fail -eq 0; then
    echo "PASS: docs/TESTING.md names the $ntests tests of make check here, and the $nnamed tests and scripts it names exist"
fi
exit $fail
