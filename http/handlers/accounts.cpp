// Accounts: create one, read one with its balance and what is available, page through its
// entries, read its balance as of a time, close it (its owner or an operator), and (operators)
// make it hot, freeze it, unfreeze it.

#include <boost/json/serialize.hpp>

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/timestamps.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

// The entries page size when the request names none.
constexpr std::int64_t k_entries_page_default = 100;

void create_account(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"ownerId", "currency", "hot", "shards"});
  const auto owner = f.id("ownerId");
  const auto currency = f.string("currency", 3);
  const auto hot = f.optional_bool("hot");
  const auto shards = f.optional_int("shards", 1, s.settings.ledger.hot_shards_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  if (!ledger::is_valid_currency(currency)) {
    return s.invalid(ex, "field \"currency\" must be three upper-case letters (ISO 4217), e.g. EUR");
  }
  if (shards && !hot.value_or(false)) return s.invalid(ex, "field \"shards\" needs \"hot\": true");
  const bool is_operator = who.role == ledger::role::operator_role;
  if (!is_operator && owner != who.id) {
    return s.fail(ex, ledger::error_code::not_found, "principal " + std::to_string(owner) + " was not found");
  }
  if (hot.value_or(false) && !is_operator) {
    return s.fail(ex, ledger::error_code::forbidden, "only an operator makes an account hot");
  }
  const int shard_count =
      hot.value_or(false) ? static_cast<int>(shards.value_or(s.settings.ledger.hot_shards_default)) : 0;
  // With an Idempotency-Key, a retry of a lost answer gets it again instead of a second account.
  std::optional<actors::replay_ticket<actors::account_view>> replay;
  if (ex->has_idempotency_key) {
    const auto key = s.idempotency_key(ex);
    if (!key) return;
    replay = actors::replay_ticket<actors::account_view>{
        *key,
        sha256_hex("account.create\n" + std::to_string(owner) + "\n" + currency + "\n" + std::to_string(shard_count)),
        [](const actors::account_view& a) { return boost::json::serialize(account_json(a)); }};
  }
  s.service.create_account({who.id, ex->request_id}, owner, currency, shard_count, std::move(replay),
                           [&s, ex, owner](actors::query_result<actors::account_create_view> r) {
                             if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                             if (r.value.replayed) return s.answer_replayed(ex, *r.value.replayed);
                             if (!r.value.account) {
                               return s.fail(ex, ledger::error_code::not_found,
                                             "principal " + std::to_string(owner) + " (ownerId) was not found");
                             }
                             ex->respond(json_reply(201, account_json(*r.value.account)));
                           });
}

// The debits in flight are asked before the balance is read, so that a debit in flight at the
// first and committed by the second is counted in both (the answer is lower than the truth for a
// moment), never in neither. What starts or commits after the first is as stale as any read.
// Asking for an account that is not the caller's costs a lookup in the live actors, which spawns
// none, and its answer is not used.
void get_account(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::account_id id) {
  s.service.reserved(id, [&s, ex, who, id](ledger::amount_minor reserved) {
    s.visible_account(ex, who, id, [ex, reserved](const actors::account_view& a) {
      ex->respond(json_reply(200, account_json(a, reserved)));
    });
  });
}

void list_entries(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::account_id id) {
  std::int64_t limit = k_entries_page_default;
  std::int64_t after = 0;
  if (auto text = query_param(ex->query, "limit")) {
    auto v = ledger::parse_digits(*text);
    if (!v || *v < 1 || *v > s.settings.ledger.entries_page_max) {
      return s.invalid(ex, "query parameter \"limit\" must be an integer from 1 to " +
                               std::to_string(s.settings.ledger.entries_page_max));
    }
    limit = *v;
  }
  if (auto text = query_param(ex->query, "after")) {
    auto v = ledger::parse_digits(*text);
    if (!v) return s.invalid(ex, "query parameter \"after\" must be an entry id (the \"next\" of the previous page)");
    after = *v;
  }
  s.visible_account(ex, who, id, [&s, ex, id, after, limit](const actors::account_view&) {
    s.service.list_entries(id, after, static_cast<int>(limit), [&s, ex](actors::query_result<actors::entries_view> r) {
      if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
      ex->respond(json_reply(200, entries_page_json(r.value)));
    });
  });
}

// The answer of a change to an account: the account as it is now, 404, or why it was refused.
actors::query_callback<std::optional<actors::account_view>> changed_account(handler_support& s, const exchange_ptr& ex,
                                                                            ledger::account_id id) {
  return [&s, ex, id](actors::query_result<std::optional<actors::account_view>> r) {
    if (r.outcome == ledger::error_code::account_closed || r.outcome == ledger::error_code::account_not_empty ||
        r.outcome == ledger::error_code::forbidden) {
      return s.fail(ex, r.outcome, r.detail);
    }
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    if (!r.value) return s.fail(ex, ledger::error_code::not_found, "account " + std::to_string(id) + " was not found");
    ex->respond(json_reply(200, account_json(*r.value)));
  };
}

void make_hot(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::account_id id) {
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"shards"});
  auto shards = f.optional_int("shards", 1, s.settings.ledger.hot_shards_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  const int count = static_cast<int>(shards.value_or(s.settings.ledger.hot_shards_default));
  s.service.make_hot({who.id, ex->request_id}, id, count, changed_account(s, ex, id));
}

// Closes an account for good: its owner or an operator, once it holds nothing (persistence::
// close_account says what else it must not have). Asked again, it answers the closed account.
void close_account(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::account_id id) {
  s.visible_account(ex, who, id, [&s, ex, who, id](const actors::account_view&) {
    s.service.close_account({who.id, ex->request_id}, id, who.role, changed_account(s, ex, id));
  });
}

// The balance (main + shards) as of ?asOf=<RFC 3339>, from the balance_after of the entries made
// at or before it; without asOf, or for a time still to come, as of now (docs/keys-and-audit.md).
void balance_as_of(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::account_id id) {
  std::optional<std::int64_t> as_of_us;
  if (auto text = query_param(ex->query, "asOf")) {
    const auto decoded = percent_decode(*text);
    as_of_us = decoded ? parse_rfc3339_us(*decoded) : std::nullopt;
    if (!as_of_us) {
      return s.invalid(ex,
                       "query parameter \"asOf\" must be an RFC 3339 date-time with an offset, e.g. "
                       "2026-11-30T01:59:00Z or 2026-11-30T02:59:00.123456+01:00 (send '+' as is or as %2B)");
    }
  }
  s.visible_account(ex, who, id, [&s, ex, id, as_of_us](const actors::account_view& a) {
    s.service.balance_as_of(id, as_of_us, [&s, ex, a](actors::query_result<actors::balance_view> r) {
      if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
      boost::json::object o;
      o["accountId"] = a.id;
      o["currency"] = a.currency;
      o["balance"] = std::to_string(r.value.balance);
      o["asOf"] = r.value.as_of;
      ex->respond(json_reply(200, o));
    });
  });
}

}  // namespace

void add_account_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/accounts", access::principal, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { create_account(s, ex, who); }});
  r.add({"GET", "/v1/accounts/{id}", access::principal, rate_class::read, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { get_account(s, ex, who, p.id); }});
  r.add({"GET", "/v1/accounts/{id}/entries", access::principal, rate_class::read, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { list_entries(s, ex, who, p.id); }});
  r.add({"POST", "/v1/accounts/{id}/hot", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { make_hot(s, ex, who, p.id); }});
  r.add({"POST", "/v1/accounts/{id}/freeze", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           s.service.set_status({who.id, ex->request_id}, p.id, ledger::account_status::frozen,
                                changed_account(s, ex, p.id));
         }});
  r.add({"POST", "/v1/accounts/{id}/unfreeze", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           s.service.set_status({who.id, ex->request_id}, p.id, ledger::account_status::active,
                                changed_account(s, ex, p.id));
         }});
  r.add(
      {"POST", "/v1/accounts/{id}/close", access::principal, rate_class::write, param_kind::integer, true,
       [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { close_account(s, ex, who, p.id); }});
  r.add(
      {"GET", "/v1/accounts/{id}/balance", access::principal, rate_class::read, param_kind::integer, true,
       [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { balance_as_of(s, ex, who, p.id); }});
}

}  // namespace api::handlers
