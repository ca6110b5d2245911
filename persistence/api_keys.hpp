#pragma once

// API keys that rotate and revoke (migration 009): a principal's keys, made, listed and revoked,
// each change with its audit_log row in the same transaction; and the keys revoked lately, which
// every server reads to drop them from its key cache (actors/key_revocations.hpp). A key is
// stored as its SHA-256 only; nothing here ever returns a key, and the hash of a key only to the
// cache that must forget it.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ledger/types.hpp"
#include "persistence/audit.hpp"
#include "persistence/pqxx_fwd.hpp"
#include "persistence/principals.hpp"

namespace pqxx {
class transaction_base;
}

namespace persistence {

struct api_key_record {
  std::int64_t id = 0;
  ledger::principal_id principal_id = 0;
  std::string hint;  // the key's last four characters; empty for keys made before migration 009
  std::string created_at;
  std::optional<ledger::principal_id> created_by;  // none: made at the start (bootstrap) or by wallet-admin
  std::string revoked_at;                          // empty: active
  std::optional<ledger::principal_id> revoked_by;
};

enum class key_change : std::uint8_t {
  done,
  no_principal,        // the principal does not exist
  provider_principal,  // a payment provider signs its events and has no API keys
  another_operator,    // an operator's keys are made by that operator only
  too_many_keys,       // the principal has `active_max` active keys already
  no_key,              // the principal has no key with this id
  last_active_key,     // a principal may not revoke its own last active key
  caller_revoked,      // the key the request came with was revoked (another server still knew it)
};

struct key_change_result {
  key_change outcome = key_change::done;
  api_key_record key;
  // A revocation: false when the key was revoked already (nothing changed, no audit row).
  bool changed = false;
  // A revocation that changed something: the hash of the key, for the caches to forget.
  std::string key_hash_hex;
  // A key made: its principal, for the cache that is about to see the key.
  std::optional<principal_record> principal;
};

// Every change below takes the principal's key lock, then checks that the key the request came
// with (`caller_key_hash_hex`, the SHA-256 in hex; empty: not a request's, e.g. wallet-admin) is
// still active: a server's key cache may know a revoked key for up to auth.key_cache_ttl_ms, and a
// revoked key that could still make a key would never be locked out (outcome caller_revoked).

// Adds a key to `principal`, unless it has `active_max` active keys already. `audit` is recorded
// with the key as its target.
key_change_result create_key(pqxx::connection& conn, ledger::principal_id principal, const std::string& key_hash_hex,
                             const std::string& hint, std::int64_t active_max, const audit_entry& audit,
                             const std::string& caller_key_hash_hex = {});

// Revokes key `key_id` of `principal`. With `keep_last_active` (the principal revokes its own
// key) the last active key of the principal is refused. Revoking a revoked key changes nothing.
key_change_result revoke_key(pqxx::connection& conn, ledger::principal_id principal, std::int64_t key_id,
                             bool keep_last_active, const audit_entry& audit,
                             const std::string& caller_key_hash_hex = {});

struct keys_revoked {
  key_change outcome = key_change::done;
  std::vector<std::string> key_hashes_hex;  // of the keys this revoked, for the caches to forget
};

// Revokes every active key of `principal` in one transaction (an operator locking a principal
// out): no key of it made meanwhile survives, since a key change waits for the same lock and then
// finds the key it came with revoked. One audit row, `audit`, with the count.
keys_revoked revoke_all_keys(pqxx::connection& conn, ledger::principal_id principal, const audit_entry& audit,
                             const std::string& caller_key_hash_hex = {});

struct api_key_page {
  std::vector<api_key_record> keys;
  std::optional<std::int64_t> next_after;  // pass as `after` for the next page
};
// The principal's keys after the key id `after`, by id; at most `limit` (> 0). nullopt: no such
// principal.
std::optional<api_key_page> list_keys(pqxx::connection& conn, ledger::principal_id principal, std::int64_t after,
                                      int limit);

// The SHA-256 (hex) of the keys revoked in the last `window_ms`, by the database's clock; at most
// `limit` of them (a result of `limit` keys may be missing some: the caller then forgets all).
std::vector<std::string> recently_revoked_keys(pqxx::connection& conn, std::int64_t window_ms, int limit);

// Defines this file's prepared statements on a connection. connect() calls it for every
// connection it opens; libpqxx registers each statement with the server on its first use.
void prepare_api_key_statements(pqxx::connection& conn);

// What a change made with a request's API key throws when that key was revoked before the change
// could commit (another server still trusted it, within auth.key_cache_ttl_ms): the transaction
// rolls back and nothing changed. The reader pool answers it 401 (actors/reader_pool.cpp).
struct caller_key_revoked : std::runtime_error {
  caller_key_revoked() : std::runtime_error("the API key of this request was revoked") {}
};

// Whether the key a request came with (its SHA-256 in hex) is still active, its row locked FOR
// SHARE until `txn` ends, so that a revocation commits wholly before this check or after `txn`.
// Empty: a change that came with no key (wallet-admin, the bootstrap): true.
bool caller_key_active(pqxx::transaction_base& txn, const std::string& caller_key_hash_hex);
// The same, throwing caller_key_revoked when it is not.
void require_caller_key(pqxx::transaction_base& txn, const std::string& caller_key_hash_hex);

}  // namespace persistence
