#pragma once

// The money-moving requests (docs/money-flows.md). Each runs in the single flight of its
// Idempotency-Key (or its provider event id), resolves the accounts it names, and is answered
// only after its writer committed, or with the refusal and the stored receipt that decide it.
// Every debit of a user account goes through that account's actor, so a transfer, a withdrawal
// and a refund can never spend the same money; postings that debit only system accounts go
// straight to the writer of the debited account.
//
// The flows share the machinery of money_flows.cpp; each flow is a file of its own:
// flow_transfer.cpp, flow_deposit.cpp, flow_withdrawal.cpp, flow_deposit_claim.cpp,
// flow_provider_event.cpp, flow_payment_refund.cpp, flow_holds.cpp.

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "actors/commands.hpp"
#include "actors/corrections.hpp"
#include "actors/query_result.hpp"
#include "actors/directory.hpp"
#include "actors/single_flight.hpp"
#include "config/settings.hpp"
#include "persistence/batch.hpp"
#include "persistence/corrections.hpp"
#include "persistence/flows.hpp"
#include "persistence/holds.hpp"
#include "persistence/payments.hpp"

namespace actors {

struct service_core;
class account_cache;

class money_flows {
 public:
  using finish_fn = std::function<void(money_result)>;

  money_flows(const config::settings& settings, service_core& core, account_cache& accounts);

  // payer → payee (and the payee's fee to fee_revenue), through the payer's actor.
  void transfer(transfer_command command, finish_fn done);
  // A batch of transfers out of the principal's accounts (flow_transfer_batch.cpp): each payer's
  // items through its actor in one run, committed together by a writer.
  void transfer_batch(transfer_batch_command command, finish_fn done);
  // payee → payer: a refund of a payment, through the payee's actor; never more than the payment,
  // less what was already refunded.
  void refund_payment(payment_refund_command command, finish_fn done);
  // clearing:<provider> → the account, straight to a writer (a credit needs no actor).
  void deposit(deposit_command command, finish_fn done);
  // wallet → pending_withdrawal (amount) and fee_revenue (fee), through the wallet's actor.
  void withdraw(withdrawal_command command, finish_fn done);
  // pending_withdrawal → clearing:<provider> (paid) or back to the wallet (failed), once.
  void settle_withdrawal(settle_command command, finish_fn done);
  // wallet → clearing:<provider>: a refund, or a chargeback that books what the wallet lacks to
  // chargeback_loss. Never more than the deposit, less what was already refunded or charged back.
  void claim_deposit(deposit_claim_command command, finish_fn done);
  // A verified provider event, posted once per (provider, event id).
  void provider_event(provider_event_command command, finish_fn done);
  // Holds (flow_holds.cpp): a hold on the payer's money through its actor; its capture (CAPTURE,
  // through the payer's actor) or its void (to the payer's writer), each decided under the
  // payer's row lock and the hold's.
  void place_hold(hold_command command, finish_fn done);
  void capture_hold(hold_capture_command command, finish_fn done);
  void void_hold(hold_void_command command, finish_fn done);

  // Corrections and currencies (docs/corrections.md): flow_reversal.cpp, flow_adjustment.cpp,
  // flow_exchange.cpp.
  // The mirror of a transaction's entries, once; a debit of a user account goes through its actor.
  void reverse(reversal_command command, finish_fn done);
  // A PENDING_APPROVAL adjustment; a second operator approves (posts) or rejects it, once.
  void request_adjustment(adjustment_request_command command, query_callback<adjustment_created_view> done);
  void approve_adjustment(adjustment_decision_command command, finish_fn done);
  void reject_adjustment(adjustment_decision_command command, query_callback<std::optional<adjustment_view>> done);
  void find_adjustment(std::string id, query_callback<std::optional<adjustment_view>> done);
  void set_fx_rate(fx_rate_command command, query_callback<fx_rate_view> done);
  // A quote of the rate from the `from` account's currency to the `to` account's, for the owner of both.
  void quote_fx(fx_quote_command command, query_callback<fx_quote_view> done);
  // wallet A → fx A, fx B → wallet B, at a quote's rate, once per quote, before it expires.
  void exchange(exchange_command command, finish_fn done);

  // A provider by name; nullopt when there is none. Cached once read, for auth.key_cache_ttl_ms:
  // a secret rotated on another server is known here within that time.
  void provider(const std::string& name,
                std::function<void(ledger::error_code, std::optional<persistence::provider_record>)> done);
  void remember_provider(const persistence::provider_record& p);
  // The provider as cached, when it was read within auth.key_cache_ttl_ms; no database read.
  std::optional<persistence::provider_record> cached_provider(const std::string& name);
  // A provider a request names: `next` gets it, or `finish` gets why not (the database, or 400
  // for a provider nobody created). `next` gets it as an optional that is always set, so that it
  // can move it on.
  void known_provider(const std::string& name, finish_fn finish,
                      std::function<void(std::optional<persistence::provider_record>)> next);

  std::size_t flights_in_progress() const { return flights_.size(); }

 private:
  // Runs `execute` in the single flight of (principal, key): a duplicate waits for the first
  // one's answer, and a different request under the same key is refused at once. A refusal
  // decided before the writer is settled against the stored receipt before anyone is answered.
  void in_flight(ledger::principal_id principal, const std::string& key, const std::string& hash, finish_fn done,
                 std::function<void(finish_fn)> execute);
  void settle(ledger::principal_id principal, const std::string& key, const std::string& hash, money_result result,
              finish_fn done);
  // A debit of a user account, through its actor; `owner` 0 when an operator or provider acts.
  void debit(ledger::principal_id owner, persistence::posting_request posting, std::optional<account_facts> payer,
             finish_fn finish);
  // A posting that debits no user account, to the writer of its debited account.
  void post(persistence::posting_request posting, finish_fn finish);
  // The system accounts named by `roles` in `currency`, in that order.
  void system_accounts(const std::string& currency, std::vector<std::pair<std::string, bool>> roles,
                       std::function<void(ledger::error_code, std::vector<ledger::account_id>)> done);
  // The row of fee_revenue in `currency` that a posting committed by writer `writer` credits:
  // fee_revenue is hot (docs/money-flows.md), so it is a shard of that writer. Its shards (one per
  // writer at least) are made on first use.
  void fee_revenue_row(const std::string& currency, std::size_t writer,
                       std::function<void(ledger::error_code, ledger::account_id)> done);
  struct resolving {
    std::string currency;
    std::vector<std::pair<std::string, bool>> roles;
    std::vector<ledger::account_id> ids;
    std::function<void(ledger::error_code, std::vector<ledger::account_id>)> done;
  };
  void resolve(std::shared_ptr<resolving> state);
  // A user account's facts; answers `finish` itself when it cannot continue (database down, or
  // no such user account: `missing` is the answer then).
  void user_account(ledger::account_id id, money_result missing, finish_fn finish,
                    std::function<void(account_facts)> next);

  // The flows' steps that run after their lookups.
  // A payment, with a fee leg to fee_revenue when `with_fee`; `rebuilt` once it was refused for
  // an outdated fee schedule (it is not built a third time).
  void pay(transfer_command command, account_facts payer, account_facts payee, bool with_fee, bool rebuilt,
           finish_fn finish);
  void send_payment(transfer_command command, account_facts payer, account_facts payee, ledger::account_id fee_revenue,
                    bool rebuilt, finish_fn finish);
  void refund_to(payment_refund_command command, persistence::payment_record payment, account_facts payer,
                 finish_fn finish);
  void deposit_to(deposit_command command, persistence::provider_record provider, account_facts target,
                  std::shared_ptr<persistence::flow_rows> rows, finish_fn finish);
  void claim(deposit_claim_command command, persistence::deposit_record deposit,
             std::shared_ptr<persistence::flow_rows> rows, finish_fn finish);
  // `payee_status`: the payee's status as read with the placement's key (nullopt: not read).
  void hold_on(hold_command command, account_facts payer, account_facts payee,
               std::optional<ledger::account_status> payee_status, finish_fn finish);
  void capture_from(hold_capture_command command, persistence::hold_record hold, finish_fn finish);
  void settle_to(settle_command command, persistence::withdrawal_record withdrawal,
                 std::shared_ptr<persistence::flow_rows> rows, finish_fn finish);
  // Runs `run` once no other run under `key` is in progress in this server (the reversal of one
  // transaction, the approval of one adjustment, the exchange of one quote), handing it the
  // function that starts the next: the second of two racing requests then sees what the first did
  // (reversed, decided, used) instead of meeting its reservation of the same money.
  void one_at_a_time(const std::string& key, std::function<void(std::function<void()>)> run);
  void launch_serial(const std::string& key, std::function<void(std::function<void()>)> run);
  void send_exchange(exchange_command command, persistence::fx_quote_record quote, account_facts from, account_facts to,
                     ledger::account_id fx_from, ledger::account_id fx_to, finish_fn finish);

  friend class transfer_batch_flow;  // flow_transfer_batch.cpp

  const config::settings& settings_;
  service_core& core_;
  account_cache& accounts_;
  single_flight flights_;
  struct provider_entry {
    persistence::provider_record record;
    std::chrono::steady_clock::time_point read_at;
  };
  std::mutex providers_mutex_;
  std::unordered_map<std::string, provider_entry> providers_;
  // one_at_a_time: the runs waiting behind the one in progress, by key (a key is here while one runs).
  std::mutex serial_mutex_;
  std::unordered_map<std::string, std::deque<std::function<void(std::function<void()>)>>> serial_;
};

money_result database_unavailable(ledger::error_code code);

// A refusal a flow decided from what it read before the posting (a withdrawal already settled, a
// deposit already charged back): a retry of a request that committed meets it too, so the flight
// looks the key's stored receipt up before answering with it.
money_result decided_early(ledger::error_code code, std::string detail);

// A JSON object of the non-empty (name, text) pairs: a journal transaction's metadata, or the
// members of a receipt when `members_only` (without the braces).
std::string json_members(std::initializer_list<std::pair<const char*, std::string>> fields, bool members_only = false);

}  // namespace actors
