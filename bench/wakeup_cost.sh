#!/usr/bin/env bash
# What a wake-up costs on this machine, on one CPU and across two (bench/wakeup_cost.cpp): a
# property of the machine, not of the server, that decides what every hand-over between the
# server's threads, PostgreSQL and the clients costs (bench/PROFILE.md, twenty-sixth part).
#
#   bench/wakeup_cost.sh [ROUND_TRIPS]      (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/out
c++ -std=c++20 -O2 -pthread -o bench/out/wakeup_cost bench/wakeup_cost.cpp
bench/out/wakeup_cost "${1:-100000}"
