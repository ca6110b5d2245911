#pragma once

// PostgreSQL and Redis processes of a test's own, for the tests that stop, pause or kill them:
// the shared test services that every suite uses are never touched.
//
// - redis_process: a redis-server child on a port of the test's choosing.
// - private_services: a PostgreSQL and a Redis started, reset and stopped with scripts/services.sh
//   (the same script as the test command's), under their own directory and on free ports, and
//   migrated with wallet-admin.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>

namespace test_support {

// True when something on 127.0.0.1:port answers "PING" with "+PONG" within `timeout`.
bool redis_answers(int port, std::chrono::milliseconds timeout = std::chrono::milliseconds(500));

// A redis-server child on 127.0.0.1:port, without persistence. The destructor kills it (SIGKILL
// also ends a paused one, so a failed test never leaves one behind).
class redis_process {
 public:
  explicit redis_process(int port);
  ~redis_process();
  redis_process(const redis_process&) = delete;
  redis_process& operator=(const redis_process&) = delete;

  // Starts it and waits (at most 10 s) until it answers PING; throws std::runtime_error otherwise.
  void start();
  // SIGKILL and reap: the port closes at once.
  void kill();
  // SIGSTOP / SIGCONT: connections stay open (new ones even complete their handshake) but
  // nothing answers: a hung Redis rather than a dead one. Each throws when it is not running.
  void pause();
  void resume();
  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string url() const;

 private:
  int port_;
  pid_t pid_ = -1;
};

class private_services {
 public:
  // Stops whatever a killed earlier run left under `dir`, starts both services on free ports,
  // empties the database and applies the migrations. Throws std::runtime_error on failure.
  explicit private_services(std::string dir);
  // Stops both, whatever state the test left them in.
  ~private_services();
  private_services(const private_services&) = delete;
  private_services& operator=(const private_services&) = delete;

  int pg_port() const { return pg_port_; }
  int redis_port() const { return redis_port_; }
  // The WALLET_DATABASE_URL, WALLET_DATABASE_OWNER_URL and WALLET_REDIS_URL of these services.
  const std::map<std::string, std::string>& env() const { return env_; }
  std::string database_url() const { return env_.at("WALLET_DATABASE_URL"); }
  std::string owner_url() const { return env_.at("WALLET_DATABASE_OWNER_URL"); }
  std::string redis_url() const { return env_.at("WALLET_REDIS_URL"); }

  // `pg_ctl stop -m immediate` as the postgres user: every backend dies at once, nothing is
  // flushed or finished, and the next start runs crash recovery. Returns once it has stopped.
  void stop_postgres_immediately();
  // SIGKILL to redis-server; returns once its port no longer answers.
  void kill_redis();
  // Starts whichever of the two is down (scripts/services.sh start); returns once both answer.
  void start();
  // `wallet-admin reconcile` on this database: true when every invariant holds.
  bool reconcile_clean(std::string& report) const;

 private:
  void services_script(const std::string& command, bool with_ports) const;

  std::string dir_;
  int pg_port_ = 0;
  int redis_port_ = 0;
  std::map<std::string, std::string> env_;
};

}  // namespace test_support
