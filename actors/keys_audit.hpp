#pragma once

// API keys that rotate and revoke, the audit log, and balances as of a time, behind the facade
// (actors/ledger_service.hpp): reads and administrative writes on the reader pool, each key change
// with its audit row in its own transaction, and a revoked key forgotten by this server's key
// cache as soon as its revocation has committed. docs/keys-and-audit.md says what each promises.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "actors/commands.hpp"
#include "actors/key_cache.hpp"
#include "actors/query_result.hpp"
#include "actors/reader_pool.hpp"
#include "actors/views.hpp"
#include "config/settings.hpp"
#include "persistence/audit.hpp"

namespace actors {

// The audit row of an action that `origin` asks for; `target` and `detail_json` may be left for
// the writer of the row to fill in (a new row's id).
persistence::audit_entry audit_entry_for(const request_origin& origin, std::string action, std::string target = {},
                                         std::string detail_json = "{}");

class keys_audit {
 public:
  keys_audit(const config::settings& settings, std::shared_ptr<reader_pool> readers, key_cache& keys);

  // A new key for `principal`, whose SHA-256 and last four characters the caller made.
  void create_key(request_origin origin, ledger::principal_id principal, std::string key_hash_hex, std::string hint,
                  query_callback<key_change_view> done);
  // Revokes key `key_id` of `principal`; a principal revoking its own key may not revoke its last
  // active one. This server refuses the key from the moment the answer is given.
  void revoke_key(request_origin origin, ledger::principal_id principal, std::int64_t key_id,
                  query_callback<key_change_view> done);
  // Revokes every active key of `principal` at once (an operator locking it out).
  void revoke_all_keys(request_origin origin, ledger::principal_id principal, query_callback<keys_revoked_view> done);
  // nullopt: no such principal.
  void list_keys(ledger::principal_id principal, std::int64_t after, int limit,
                 query_callback<std::optional<api_keys_view>> done);

  void list_audit(std::int64_t after, int limit, query_callback<audit_page_view> done);
  // Records an action that committed in a transaction of its own elsewhere (a sweep, the start of
  // a reconciliation run).
  void record(persistence::audit_entry entry, query_callback<bool> done);

  // `as_of_us`: microseconds since the Unix epoch; nullopt: now.
  void balance_as_of(ledger::account_id id, std::optional<std::int64_t> as_of_us, query_callback<balance_view> done);

 private:
  const config::settings& settings_;
  std::shared_ptr<reader_pool> readers_;
  key_cache& keys_;
};

}  // namespace actors
