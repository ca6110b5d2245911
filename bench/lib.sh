# Shell functions the benchmark scripts share; sourced, not run. The caller sets `server_pid` when
# it starts a server, and `pg_port` before it calls psql_admin.

# Builds TARGETS in Release in BUILD_DIR, logging to LOG; on failure prints the log's tail and
# exits. GCC 12 at -O3 reports false -Wrestrict / -Wstringop-overflow errors inside std::string
# (GCC bugs 105329 and 105651) that -O2 builds never see; they stay warnings here so that a Release
# build of code that is clean at -O2 does not stop a benchmark.
#   build_release BUILD_DIR LOG TARGET...
build_release() {
  local build_dir=$1 log=$2
  shift 2
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS="-Wno-error=restrict -Wno-error=stringop-overflow" >/dev/null
  nice ninja -j2 -C "$build_dir" "$@" > "$log" 2>&1 || { tail -40 "$log" >&2; exit 1; }
}

# Stops the server started as $server_pid: TERM, up to 10 s to drain, then KILL.
server_pid=
stop_server() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$server_pid" 2>/dev/null && kill -KILL "$server_pid"
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
}

# Waits until the server on PORT answers /readyz; if it exits or is not ready within 30 s, prints
# the tail of its LOG and exits.
#   wait_until_ready PORT LOG
wait_until_ready() {
  local port=$1 log=$2
  for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench: the server did not become ready; its log:" >&2
  tail -30 "$log" >&2
  exit 1
}

# psql as the private instance's superuser, stopping at the first error.
psql_admin() { psql -X -q -h 127.0.0.1 -p "$pg_port" -U postgres -v ON_ERROR_STOP=1 "$@"; }

# CPU ticks (user + system) of every process on the machine, summed by command name, one
# "name ticks" line each, sorted by name: two snapshots joined give each process's share of a span.
# One python process reads every /proc/<pid>/stat in a few milliseconds, so the span between two
# snapshots is the sleep between them (a shell loop took a third of a second under load).
cpu_snapshot() {
  proc_ticks '/proc/[0-9]*/stat'
}

# The same for one process's threads, summed by thread name.
#   thread_snapshot PID
thread_snapshot() {
  proc_ticks "/proc/$1/task/[0-9]*/stat"
}

# Ticks of every /proc stat file matching GLOB, summed by the command name in it.
proc_ticks() {
  python3 - "$1" <<'PY' | sort
import glob, sys
ticks = {}
for path in glob.glob(sys.argv[1]):
    try:
        with open(path) as f:
            line = f.read()
    except OSError:
        continue
    # The command name is in parentheses and may hold spaces; the fields after it are split.
    name = line[line.index("(") + 1:line.rindex(")")].replace(" ", "_")
    fields = line[line.rindex(")") + 2:].split()
    ticks[name] = ticks.get(name, 0) + int(fields[11]) + int(fields[12])
for name in ticks:
    print(name, ticks[name])
PY
}

# CPU time per request, in µs, of each process between two snapshots taken SECONDS apart while
# RATE requests a second were sent: "name µs" lines, largest first, those under 1 µs left out.
#   cpu_per_request BEFORE AFTER SECONDS RATE
cpu_per_request() {
  join "$1" "$2" | awk -v s="$3" -v r="$4" -v hz="$(getconf CLK_TCK)" '
    { us = ($3 - $2) / hz / s / r * 1e6; if (us >= 1) printf "%s %.1f\n", $1, us }' | sort -k2 -nr
}
