#pragma once

// What every handler uses: the settings and the service, the problem answers, the checked body
// and Idempotency-Key of a request, the principal's allowance of lookups of accounts that do not
// exist, and the client address's allowance of database reads made for requests without a valid
// credential. One object per server, shared by the pipeline and the handlers of every resource.

#include <functional>
#include <optional>
#include <string>

#include "actors/ledger_service.hpp"
#include "config/settings.hpp"
#include "http/exchange.hpp"
#include "http/json_input.hpp"
#include "http/metrics.hpp"
#include "http/token_buckets.hpp"

namespace api {

using principal = actors::principal_view;

class handler_support {
 public:
  handler_support(const config::settings& settings, actors::ledger_service& service, metrics& stats);

  const config::settings& settings;
  actors::ledger_service& service;
  metrics& stats;

  void fail(const exchange_ptr& ex, const problem& p) const;
  void fail(const exchange_ptr& ex, ledger::error_code code, std::string detail, std::int64_t retry_after_s = 0) const;
  void invalid(const exchange_ptr& ex, std::string detail) const;
  // A read or administrative call that failed (the database, a bound): 503 and when to retry; or
  // 401, caller_revoked, when the change found the request's key revoked.
  void unavailable(const exchange_ptr& ex, ledger::error_code code, std::string detail) const;
  // The key the request came with was revoked, though this server still knew it: 401, as for a
  // key nobody has.
  void caller_revoked(const exchange_ptr& ex) const;

  // The JSON body of a POST: the media type and a strict parse. nullopt: answered already.
  std::optional<json_fields> body(const exchange_ptr& ex) const;
  // The request's Idempotency-Key, required and checked. nullopt: answered already.
  std::optional<std::string> idempotency_key(const exchange_ptr& ex) const;

  // Whether the principal may still name accounts this server has to look up; a principal that
  // named too many accounts that do not exist (or are not its own) waits (429, answered here).
  bool within_lookup_allowance(const exchange_ptr& ex, const principal& who);
  // A lookup by the request's principal `by` found no account (or not its own).
  void count_unknown_account(const exchange_ptr& ex, ledger::principal_id by);

  // Whether the client address may still make the server read the database for a request without
  // a credential it knows (an API key it has not seen, a provider it has not read lately): takes
  // one of the address's allowance (auth.unauthenticated_per_second), or answers 429 here.
  bool within_unauthenticated_allowance(const exchange_ptr& ex);

  // Loads an account the principal may see: its own, or any for an operator; otherwise 404.
  void visible_account(const exchange_ptr& ex, const principal& who, ledger::account_id id,
                       std::function<void(const actors::account_view&)> next);

  // The answer to a money-moving request: its stored receipt, or its problem.
  // `by`: the principal who asked (for the unknown-account allowance).
  void answer_money(const exchange_ptr& ex, ledger::principal_id by, actors::money_result r);
  // The answer stored under a management request's Idempotency-Key (persistence/replays.hpp): the
  // same request gets it again (Idempotent-Replayed: true), another 422 idempotency_key_reused.
  void answer_replayed(const exchange_ptr& ex, const actors::replayed_answer& a) const;
  // Cluster mode: whether `r` refused a debit this node does not hold the partition of, and `ex`
  // may go to the node that does (it did not come from another node).
  bool forwardable(const exchange_ptr& ex, const actors::money_result& r) const;
  // Cluster mode: answers `ex` with what the node holding the refused debit's partition answers.
  // The request goes as it came: its Authorization or Wallet-Signature, its Idempotency-Key.
  void forward(const exchange_ptr& ex, const actors::money_result& refusal);

 private:
  // Lookups of accounts that turned out not to exist (or not to be the caller's), per principal.
  token_buckets unknown_accounts_;
  // Reads for requests without a known credential, per client address.
  token_buckets unauthenticated_;
};

// Client addresses and principals tracked by the in-process guards at most.
inline constexpr std::size_t k_guarded_keys_max = 100'000;

}  // namespace api
