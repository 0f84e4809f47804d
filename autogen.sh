#!/bin/sh
# Generates configure and Makefile.in from configure.ac, Makefile.am and m4/.
set -e
cd "$(dirname "$0")"
autoreconf -fi
