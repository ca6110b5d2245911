// The in-process test double as a program, to exercise bench/run.sh and wallet-loadgen end to end
// without the real server: `loadgen-fake-wallet --http-port N` with WALLET_AUTH_BOOTSTRAP_KEY set,
// until SIGTERM or SIGINT. It answers like a correct server; it is not a benchmark subject.

#include "tests/loadgen/fake_wallet.hpp"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  int port = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--http-port") == 0) port = std::atoi(argv[i + 1]);
  }
  const char* key = std::getenv("WALLET_AUTH_BOOTSTRAP_KEY");
  if (port <= 0 || port > 65535 || !key || !*key) {
    std::cerr << "usage: WALLET_AUTH_BOOTSTRAP_KEY=... loadgen-fake-wallet --http-port N\n";
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // Blocked before the server's thread starts, so only sigwait below receives them.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  loadgen_test::fake_wallet server(key, {}, static_cast<std::uint16_t>(port));
  std::cerr << "loadgen-fake-wallet: listening on 127.0.0.1:" << server.port() << "\n";
  int received = 0;
  sigwait(&signals, &received);
  return 0;
}
