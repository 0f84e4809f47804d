#!/bin/sh
# The public headers are the API's reference, in one style a doc generator
# reads: doxygen over include/gpuport/*.h (the CUDA part included) must warn
# of nothing undocumented (every public function and its parameters where
# any is named, type, member, macro and enum value), and must have found the
# calls (a run that read nothing would pass). The gpuport_dev_* functions of
# gpuport_device.h are the device calls' implementation, not API: not
# required. Skips (77) without doxygen.
src=$(cd "${top_srcdir:-.}" && pwd)
build=${top_builddir:-.}

if ! command -v doxygen >/dev/null 2>&1; then
    echo "SKIP: doxygen is not installed"
    exit 77
fi
out=$build/test/tools/header_docs.out
rm -rf "$out"
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
cat >"$out/Doxyfile" <<_DOXYFILE
INPUT = $src/include/gpuport
FILE_PATTERNS = *.h
OUTPUT_DIRECTORY = $out
GENERATE_HTML = NO
GENERATE_LATEX = NO
GENERATE_XML = YES
EXTRACT_STATIC = YES
JAVADOC_AUTOBRIEF = YES
WARN_IF_UNDOCUMENTED = YES
WARN_IF_DOC_ERROR = YES
WARN_LOGFILE = $out/warnings
QUIET = YES
ENABLE_PREPROCESSING = YES
MACRO_EXPANSION = YES
EXPAND_ONLY_PREDEF = YES
PREDEFINED = __CUDACC__ __GNUC__ "__attribute__(x)=" "GPUPORT_API="
EXCLUDE_SYMBOLS = gpuport_dev_*
_DOXYFILE
if ! doxygen "$out/Doxyfile" >"$out/log" 2>&1; then
    cat "$out/log"
    echo "FAIL: doxygen failed"
    exit 1
fi
fail=0
if test -s "$out/warnings"; then
    sed "s|$src/include/gpuport/||" "$out/warnings"
    echo "FAIL: $(grep -c 'warning:' "$out/warnings") doxygen warning(s) in the public headers"
    fail=1
fi
for call in gpuport_comm_create gpuport_comm_destroy gpuport_channel_put gpuport_channel_device \
    gpuport_put gpuport_poll gpuport_trigger_pushable gpuport_bootstrap_mpi_v; do
    if ! grep -q "<name>$call</name>" "$out"/xml/*.xml; then
        echo "FAIL: doxygen did not find $call"
        fail=1
    fi
done
test $fail = 0 && echo "PASS: every public declaration of include/gpuport/*.h is documented"
exit $fail
