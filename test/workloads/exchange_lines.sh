#!/bin/sh
# workloads/README.md's table of the exchanges' lines is what
# scripts/count-exchange-lines.sh counts in the sources now, so that the
# table cannot drift from the code.
src=${top_srcdir:-.}
exec sh "$src/scripts/count-exchange-lines.sh" --check "$src/workloads/README.md"
