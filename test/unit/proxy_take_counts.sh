#!/bin/sh
# bench_proxy_take --check: three short laps of each of its rows (signals
# on the device FIFO to one channel and to 64, signals on the host FIFO,
# put_value and 8-byte puts), each lap's counts at the mock transport and
# the FIFO's tail checked against what the lap wrote. It asserts no time:
# CI machines are loaded, and the table is for a person (bench_proxy_take
# without --check; docs/PERFORMANCE.md). Its exit status is the test's.
exec "${top_builddir:-.}/test/unit/bench_proxy_take" --check
