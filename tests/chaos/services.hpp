#pragma once

// A private PostgreSQL and Redis for the chaos suite, which stops and kills them: the shared test
// services that every other suite uses are never touched. They are started, reset and stopped
// with scripts/services.sh (the same script as the test command's), under their own directory
// and on free ports, and migrated with wallet-admin.

#include <map>
#include <string>

namespace chaos {

class private_services {
 public:
  // Stops whatever a killed earlier run left under `dir`, starts both services on free ports,
  // empties the database and applies the migrations. Throws std::runtime_error on failure.
  explicit private_services(std::string dir);
  // Stops both, whatever state the scenarios left them in.
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

}  // namespace chaos
