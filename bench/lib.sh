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
# One cat and one awk read every /proc/<pid>/stat in about a tenth of a second even on a saturated
# machine, so the span between two snapshots is the sleep between them. (A python3 process took
# 0.4-1.7 s there, most of it its own start: each snapshot's readings came late by as much, and a
# process about to exit, such as the load generator at the end of its run, could be missed.)
cpu_snapshot() {
  proc_ticks '/proc/[0-9]*/stat'
}

# The same for one process's threads, summed by thread name.
#   thread_snapshot PID
thread_snapshot() {
  proc_ticks "/proc/$1/task/[0-9]*/stat"
}

# The same for PostgreSQL's processes on PORT, summed by what each one is: the client's
# application_name (wallet-writer-0, wallet-reader, wallet-relay, ...) or the backend type
# (walwriter, checkpointer, autovacuum worker, ...). A process that exits between two snapshots
# (a parallel worker, an autovacuum worker) is only in the one taken while it ran.
#   pg_backend_snapshot PORT
pg_backend_snapshot() {
  local pid name
  psql -X -At -F' ' -h 127.0.0.1 -p "$1" -U postgres -d postgres -c \
    "SELECT pid, replace(coalesce(nullif(application_name, ''), backend_type), ' ', '_')
       FROM pg_stat_activity WHERE pid <> pg_backend_pid()" |
    while read -r pid name; do
      awk -v name="$name" '{ sub(/^.*\) /, ""); print name, $12 + $13 }' "/proc/$pid/stat" 2>/dev/null || true
    done | awk '{ ticks[$1] += $2 } END { for (name in ticks) print name, ticks[name] }' | sort
}

# Ticks of every /proc stat file matching the glob PATTERN, summed by the command name in it.
# A process that exits between the glob and the read is left out: cat's complaint is discarded,
# and so is its failing status, which would otherwise end a caller running with pipefail.
proc_ticks() {
  local files
  # shellcheck disable=SC2206  # the pattern is meant to expand here
  files=($1)
  { cat "${files[@]}" 2>/dev/null || true; } | awk '
    {
      # The command name is in parentheses and may hold spaces and parentheses; the fields after
      # the last ")" are split: the 12th and 13th are utime and stime.
      first = index($0, "(")
      for (last = length($0); last > first && substr($0, last, 1) != ")"; last--) {}
      name = substr($0, first + 1, last - first - 1)
      gsub(/ /, "_", name)
      split(substr($0, last + 2), f, " ")
      ticks[name] += f[12] + f[13]
    }
    END { for (name in ticks) print name, ticks[name] }' | sort
}

# CPU time per request, in µs, of each process between two snapshots taken SECONDS apart while
# RATE requests a second were sent: "name µs" lines, largest first, those under 1 µs left out.
#   cpu_per_request BEFORE AFTER SECONDS RATE
cpu_per_request() {
  join "$1" "$2" | awk -v s="$3" -v r="$4" -v hz="$(getconf CLK_TCK)" '
    { us = ($3 - $2) / hz / s / r * 1e6; if (us >= 1) printf "%s %.1f\n", $1, us }' | sort -k2 -nr
}
