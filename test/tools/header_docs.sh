#!/bin/sh
# The public headers are the API's reference, in one style a doc generator
# reads: doxygen over include/gpuport/*.h (the CUDA part included), with
# make doc's configuration (docs/Doxyfile.in: README.md the front page),
# must warn of nothing (every public function and its parameters where any
# is named, type, member, macro and enum value documented; no markup
# error), must write the HTML reference, and must have found the calls (a
# run that read nothing would pass). The gpuport_dev_* and gpuport_mdev_*
# functions of gpuport_device_impl.h are the device calls' implementation, not
# API: not required. Skips (77) without doxygen.
src=$(cd "${top_srcdir:-.}" && pwd)
build=${top_builddir:-.}

if ! command -v doxygen >/dev/null 2>&1; then
    echo "SKIP: doxygen is not installed"
    exit 77
fi
out=$(mkdir -p "$build/test/tools" && cd "$build/test/tools" && pwd)/header_docs.out
rm -rf "$out"
mkdir -p "$out/doc"
trap 'rm -rf "$out"' EXIT
# make doc's configuration, its output here, XML added for the checks below
sed -e "s|@abs_top_srcdir@|$src|g" -e "s|@abs_top_builddir@|$out|g" \
    -e 's|@PACKAGE_VERSION@|check|g' "$src/docs/Doxyfile.in" >"$out/Doxyfile"
echo 'GENERATE_XML = YES' >>"$out/Doxyfile"
if ! doxygen "$out/Doxyfile" >"$out/log" 2>&1; then
    cat "$out/log"
    echo "FAIL: doxygen failed"
    exit 1
fi
fail=0
if test -s "$out/doc/doxygen.warnings"; then
    sed "s|$src/||" "$out/doc/doxygen.warnings"
    echo "FAIL: $(grep -c 'warning:' "$out/doc/doxygen.warnings") doxygen warning(s) in the public headers or README.md"
    fail=1
fi
if ! test -s "$out/doc/html/index.html"; then
    echo "FAIL: doxygen wrote no doc/html/index.html"
    fail=1
fi
for call in gpuport_comm_create gpuport_comm_destroy gpuport_channel_put gpuport_channel_device \
    gpuport_put gpuport_poll gpuport_trigger_pushable gpuport_bootstrap_mpi_v; do
    if ! grep -q "<name>$call</name>" "$out"/doc/xml/*.xml; then
        echo "FAIL: doxygen did not find $call"
        fail=1
    fi
done
test $fail = 0 && echo "PASS: every public declaration of include/gpuport/*.h is documented"
exit $fail
