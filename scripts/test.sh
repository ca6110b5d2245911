#!/usr/bin/env bash
# The test command: installs what is missing, checks the layout of the sources (.clang-format),
# builds every target (one configuration), starts
# private PostgreSQL and Redis under var/test (ports 55433 and 56380, never the run command's),
# applies migrations to an empty database, and runs every test. Extra arguments go to ctest,
# e.g. `scripts/test.sh -L ledger` or `scripts/test.sh -R e2e`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
# The layout first: a file that differs from .clang-format fails the run before any build.
bash scripts/format.sh --check
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build

var_dir=${WALLET_TEST_VAR_DIR:-var/test}
bash scripts/services.sh start "$var_dir" "${WALLET_TEST_PG_PORT:-55433}" "${WALLET_TEST_REDIS_PORT:-56380}" --fast
trap 'bash scripts/services.sh stop "$var_dir"' EXIT
bash scripts/services.sh reset-db "$var_dir"
set -a
# shellcheck disable=SC1091
source "$var_dir/services.env"
set +a
if [[ -x build/tools/admin/wallet-admin ]]; then
  build/tools/admin/wallet-admin migrate
fi

ctest --test-dir build --output-on-failure --timeout 600 "$@"
