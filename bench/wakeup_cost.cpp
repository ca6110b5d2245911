// What one thread waking another costs on this machine: two threads pass a byte back and forth
// through two pipes, each blocking in read() until the other writes, first both pinned to one
// CPU (every wake-up is a switch on that CPU), then pinned to two (every wake-up crosses CPUs, and
// finds the other CPU idle, since its only thread is waiting). Prints the wall time and the
// process's CPU time per round trip (two wake-ups) for each. Built and run by
// bench/wakeup_cost.sh; bench/PROFILE.md (twenty-sixth part) says why it matters to the server.

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <thread>

namespace {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) throw std::runtime_error("cannot pin to a CPU");
}

struct result {
  double wall_us;
  double cpu_us;
};

result ping_pong(int cpu_a, int cpu_b, int round_trips) {
  int there[2];
  int back[2];
  if (pipe(there) != 0 || pipe(back) != 0) throw std::runtime_error("pipe failed");
  std::thread echo([&] {
    pin(cpu_b);
    char c = 0;
    for (int i = 0; i < round_trips; ++i) {
      if (read(there[0], &c, 1) != 1 || write(back[1], &c, 1) != 1) std::abort();
    }
  });
  pin(cpu_a);
  char c = 1;
  // A few round trips first, so that both threads sit where they were pinned.
  const int warmup = round_trips / 100;
  auto wall_start = std::chrono::steady_clock::now();
  double cpu_start = process_cpu_seconds();
  for (int i = 0; i < round_trips; ++i) {
    if (i == warmup) {
      wall_start = std::chrono::steady_clock::now();
      cpu_start = process_cpu_seconds();
    }
    if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) std::abort();
  }
  const double cpu = process_cpu_seconds() - cpu_start;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  echo.join();
  for (int fd : {there[0], there[1], back[0], back[1]}) close(fd);
  const double measured = round_trips - warmup;
  return {wall / measured * 1e6, cpu / measured * 1e6};
}

}  // namespace

int main(int argc, char** argv) {
  const int round_trips = argc > 1 ? std::atoi(argv[1]) : 100000;
  if (std::thread::hardware_concurrency() < 2) {
    std::fprintf(stderr, "wakeup_cost: needs two CPUs\n");
    return 2;
  }
  const result same = ping_pong(0, 0, round_trips);
  const result cross = ping_pong(0, 1, round_trips);
  std::printf("round trip (two wake-ups), %d each\n", round_trips);
  std::printf("  one CPU:  %6.2f us wall, %6.2f us CPU\n", same.wall_us, same.cpu_us);
  std::printf("  two CPUs: %6.2f us wall, %6.2f us CPU\n", cross.wall_us, cross.cpu_us);
  std::printf("  CPU per wake-up across CPUs / on one CPU: %.1f\n", cross.cpu_us / same.cpu_us);
  return 0;
}
