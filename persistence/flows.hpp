#pragma once

// The reads and administrative writes of the money flows (migration 005): providers, the system
// accounts the flows post to, deposits with what was refunded and charged back of them, and
// withdrawals. The flows' money moves only through persistence/batch.hpp; each function here runs
// its own short transaction on the connection it is given.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/types.hpp"
#include "persistence/audit.hpp"
#include "persistence/pqxx_fwd.hpp"
#include "persistence/replays.hpp"

namespace persistence {

// The system account with role `system_role` in `currency` (e.g. "clearing:stripe",
// "pending_withdrawal", "fee_revenue", "chargeback_loss"), made on first use.
ledger::account_id ensure_system_account(pqxx::connection& conn, const std::string& currency,
                                         const std::string& system_role, bool allow_negative);

struct provider_record {
  std::int64_t id = 0;
  std::string name;
  ledger::principal_id principal_id = 0;
  std::string signing_secret;  // empty: the provider sends no events
  std::string created_at;
  // The secret the last rotation replaced, while it still verifies (as of the read); empty: none.
  std::string previous_signing_secret;
  std::int64_t previous_secret_expires_unix = 0;  // until then (unix seconds); 0 with no previous secret
  std::string previous_secret_expires_at;         // the same as a timestamp; empty with no previous secret
  std::string secret_rotated_at;                  // empty: never rotated
};

// Creates a provider and its principal; nullopt when the name is taken. `audit`, when given, is
// recorded in the same transaction (never with the secret). Made with a request's key
// (`caller_key_hash_hex`), it throws caller_key_revoked (persistence/api_keys.hpp) when that key was
// revoked meanwhile: a key revoked on one server makes no signing secret on another.
std::optional<provider_record> create_provider(pqxx::connection& conn, const std::string& name,
                                               const std::string& signing_secret, const audit_entry* audit = nullptr,
                                               const std::string& caller_key_hash_hex = {});
std::optional<provider_record> find_provider(pqxx::connection& conn, const std::string& name);

enum class provider_rotation_outcome : std::uint8_t {
  rotated,
  no_provider,  // no provider of that name
  no_secret,    // it sends no events (the 'manual' provider)
};
struct provider_rotation {
  provider_rotation_outcome outcome = provider_rotation_outcome::rotated;
  provider_record provider;  // when rotated: as it is now, with the new secret
};
// Replaces the provider's signing secret by `new_secret`; the one replaced goes on verifying its
// events for `previous_valid_s` seconds (0: not at all), and a previous secret still verifying is
// dropped. `audit` and the answer under `replay` (when not null) are recorded in the same
// transaction (the audit never with a secret); when the request's Idempotency-Key was taken already,
// nothing is done and `replay->stored` is set. The request's key is checked as by create_provider.
provider_rotation rotate_provider_secret(pqxx::connection& conn, const std::string& name, const std::string& new_secret,
                                         std::int64_t previous_valid_s, const audit_entry* audit,
                                         replayable<provider_record>* replay = nullptr,
                                         const std::string& caller_key_hash_hex = {});
std::vector<provider_record> list_providers(pqxx::connection& conn);

struct deposit_record {
  std::string transaction_id;
  ledger::account_id account_id = 0;
  std::int64_t provider_id = 0;
  std::string provider;
  std::string payment_id;  // empty: none
  std::string currency;
  ledger::amount_minor amount = 0;
  ledger::amount_minor refunded = 0;
  ledger::amount_minor charged_back = 0;
  std::string chargeback_transaction_id;  // empty: none
};

std::optional<deposit_record> find_deposit(pqxx::connection& conn, const std::string& transaction_id);
std::optional<deposit_record> find_deposit_by_payment(pqxx::connection& conn, std::int64_t provider_id,
                                                      const std::string& payment_id);

struct withdrawal_record {
  std::string id;
  ledger::account_id account_id = 0;
  ledger::principal_id principal_id = 0;
  std::int64_t provider_id = 0;
  std::string provider;
  std::string currency;
  ledger::amount_minor amount = 0;
  ledger::amount_minor fee = 0;
  std::string destination;  // empty: none
  std::string status;       // PENDING, PAID, FAILED
  std::string transaction_id;
  std::string settled_transaction_id;  // empty while PENDING
  std::string provider_payment_id;     // empty: none
  std::string created_at;
  std::string settled_at;  // empty while PENDING
};

std::optional<withdrawal_record> find_withdrawal(pqxx::connection& conn, const std::string& id);

}  // namespace persistence
