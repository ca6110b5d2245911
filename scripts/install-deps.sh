#!/usr/bin/env bash
# Installs the Debian packages the wallet server needs to build, test and run.
# Idempotent: when every package is present it only runs dpkg-query and exits.
set -euo pipefail

# Extra packages a caller needs on top (e.g. scripts/fuzz.sh: clang-14 libfuzzer-14-dev); the
# server, its tests and its container image need none of them.
extra=("$@")
packages=(
  build-essential cmake ninja-build ccache pkg-config git curl procps
  libcaf-dev
  libboost1.81-dev libboost-json1.81-dev libboost-program-options1.81-dev
  libpqxx-dev libpq-dev postgresql postgresql-client
  libhiredis-dev redis-server redis-tools
  libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev
  libjemalloc-dev
  clang-format-14
  wrk docker-compose
  haproxy
)

missing=()
for p in "${packages[@]}" "${extra[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
