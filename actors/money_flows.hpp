#pragma once

// The money-moving requests: each resolves the accounts it names, runs in the single flight of its
// Idempotency-Key, and is answered only after its writer committed (or with the refusal and the
// stored receipt that decide it). A debit of a user account always goes through that account's
// actor, so two requests can never spend the same money.

#include <functional>
#include <string>

#include "actors/commands.hpp"
#include "actors/single_flight.hpp"

namespace actors {

struct service_core;
class account_cache;

class money_flows {
 public:
  money_flows(service_core& core, account_cache& accounts);

  // payer → payee, through the payer's actor.
  void transfer(transfer_command command, std::function<void(money_result)> done);
  // clearing:<currency> → the account, straight to a writer (a credit needs no actor).
  void deposit(deposit_command command, std::function<void(money_result)> done);

  std::size_t flights_in_progress() const { return flights_.size(); }

 private:
  // Joins the single flight of an Idempotency-Key. True for the caller that must execute the
  // request; a duplicate waits for its answer, and a different request under the same key is
  // refused at once.
  bool begin_flight(const std::string& key, const std::string& hash, std::function<void(money_result)>& done);
  // A refusal decided before the database was asked may hide a committed replay of the same
  // key (the funds were spent by the original): look the key up before answering.
  void settle(ledger::principal_id principal, std::string key, std::string hash, money_result result,
              std::function<void(money_result)> done);

  service_core& core_;
  account_cache& accounts_;
  single_flight flights_;
};

}  // namespace actors
