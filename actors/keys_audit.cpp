#include "actors/keys_audit.hpp"

#include <pqxx/pqxx>

#include "persistence/api_keys.hpp"
#include "persistence/history.hpp"

namespace actors {
namespace {

api_key_view to_key_view(const persistence::api_key_record& k) {
  return api_key_view{k.id, k.principal_id, k.hint, k.created_at, k.created_by, k.revoked_at, k.revoked_by};
}

key_change_outcome to_outcome(persistence::key_change c) {
  switch (c) {
    case persistence::key_change::done: return key_change_outcome::done;
    case persistence::key_change::no_principal: return key_change_outcome::no_principal;
    case persistence::key_change::provider_principal: return key_change_outcome::provider_principal;
    case persistence::key_change::another_operator: return key_change_outcome::another_operator;
    case persistence::key_change::too_many_keys: return key_change_outcome::too_many_keys;
    case persistence::key_change::no_key: return key_change_outcome::no_key;
    case persistence::key_change::last_active_key: return key_change_outcome::last_active_key;
    case persistence::key_change::caller_revoked: return key_change_outcome::caller_revoked;
  }
  return key_change_outcome::no_key;
}

}  // namespace

persistence::audit_entry audit_entry_for(const request_origin& origin, std::string action, std::string target,
                                         std::string detail_json) {
  return persistence::audit_entry{origin.principal, std::move(action), std::move(target), std::move(detail_json),
                                  origin.request_id};
}

keys_audit::keys_audit(const config::settings& settings, std::shared_ptr<reader_pool> readers, key_cache& keys)
    : settings_(settings), readers_(std::move(readers)), keys_(keys) {}

void keys_audit::create_key(request_origin origin, ledger::principal_id principal, std::string key_hash_hex,
                            std::string hint, query_callback<key_change_view> done) {
  const auto active_max = settings_.auth.active_keys_max;
  readers_->read<key_change_view>(
      [this, origin = std::move(origin), principal, hash = std::move(key_hash_hex), hint = std::move(hint),
       active_max](pqxx::connection& conn) {
        auto r = persistence::create_key(conn, principal, hash, hint, active_max, audit_entry_for(origin, "key.create"),
                                         origin.key_hash_hex);
        key_change_view out{to_outcome(r.outcome), to_key_view(r.key), r.changed};
        // The new key is about to be used: its first request needs no read.
        if (r.changed && r.principal)
          keys_.remember(hash, principal_view{r.principal->id, r.principal->name, r.principal->role});
        return out;
      },
      std::move(done));
}

void keys_audit::revoke_key(request_origin origin, ledger::principal_id principal, std::int64_t key_id,
                            query_callback<key_change_view> done) {
  readers_->read<key_change_view>(
      [this, origin = std::move(origin), principal, key_id](pqxx::connection& conn) {
        const bool own_key = origin.principal == principal;
        auto r = persistence::revoke_key(conn, principal, key_id, own_key, audit_entry_for(origin, "key.revoke"),
                                         origin.key_hash_hex);
        // Committed: from here on this server refuses the key, before the caller hears of it.
        if (r.changed) keys_.revoke(r.key_hash_hex);
        return key_change_view{to_outcome(r.outcome), to_key_view(r.key), r.changed};
      },
      std::move(done));
}

void keys_audit::revoke_all_keys(request_origin origin, ledger::principal_id principal,
                                 query_callback<keys_revoked_view> done) {
  readers_->read<keys_revoked_view>(
      [this, origin = std::move(origin), principal](pqxx::connection& conn) {
        auto r = persistence::revoke_all_keys(conn, principal, audit_entry_for(origin, "key.revoke_all"),
                                              origin.key_hash_hex);
        // Committed: from here on this server refuses every one of them.
        for (const auto& hash : r.key_hashes_hex) keys_.revoke(hash);
        return keys_revoked_view{to_outcome(r.outcome), static_cast<std::int64_t>(r.key_hashes_hex.size())};
      },
      std::move(done));
}

void keys_audit::list_keys(ledger::principal_id principal, std::int64_t after, int limit,
                           query_callback<std::optional<api_keys_view>> done) {
  readers_->read<std::optional<api_keys_view>>(
      [principal, after, limit](pqxx::connection& conn) -> std::optional<api_keys_view> {
        auto page = persistence::list_keys(conn, principal, after, limit);
        if (!page) return std::nullopt;
        api_keys_view out;
        for (const auto& k : page->keys) out.keys.push_back(to_key_view(k));
        out.next_after = page->next_after;
        return out;
      },
      std::move(done));
}

void keys_audit::list_audit(std::int64_t after, int limit, query_callback<audit_page_view> done) {
  readers_->read<audit_page_view>(
      [after, limit](pqxx::connection& conn) {
        auto page = persistence::list_audit(conn, after, limit);
        audit_page_view out;
        for (auto& a : page.entries) {
          out.entries.push_back(audit_view{a.id, a.principal, std::move(a.action), std::move(a.target),
                                           std::move(a.detail_json), std::move(a.request_id), std::move(a.created_at)});
        }
        out.next_after = page.next_after;
        return out;
      },
      std::move(done));
}

void keys_audit::record(persistence::audit_entry entry, query_callback<bool> done) {
  readers_->read<bool>(
      [entry = std::move(entry)](pqxx::connection& conn) {
        persistence::append_audit(conn, entry);
        return true;
      },
      std::move(done));
}

void keys_audit::balance_as_of(ledger::account_id id, std::optional<std::int64_t> as_of_us,
                               query_callback<balance_view> done) {
  readers_->read<balance_view>(
      [id, as_of_us](pqxx::connection& conn) {
        auto r = persistence::balance_as_of(conn, id, as_of_us);
        return balance_view{r.balance, std::move(r.as_of)};
      },
      std::move(done));
}

}  // namespace actors
