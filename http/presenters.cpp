#include "http/presenters.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>

namespace api {
namespace json = boost::json;

namespace {

json::value text_or_null(const std::string& s) { return s.empty() ? json::value(nullptr) : json::value(s); }

template <typename T>
json::value or_null(const std::optional<T>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

}  // namespace

reply json_reply(int status, const json::object& body) {
  reply r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

json::object account_json(const actors::account_view& a, ledger::amount_minor reserved) {
  json::object o;
  o["id"] = a.id;
  o["ownerId"] = or_null(a.owner_id);
  o["currency"] = a.currency;
  o["kind"] = std::string(ledger::to_string(a.kind));
  o["status"] = std::string(ledger::to_string(a.status));
  o["balance"] = std::to_string(a.total_balance);
  // Available: the balance less what active holds keep and the debits in flight.
  o["available"] = std::to_string(a.total_balance - std::min(a.held + reserved, a.total_balance));
  o["held"] = std::to_string(a.held);
  o["hot"] = a.hot();
  if (a.hot()) {
    o["mainBalance"] = std::to_string(a.main_balance);
    json::array shards;
    for (const auto& s : a.shards) {
      json::object so;
      so["id"] = s.id;
      so["shardNo"] = s.shard_no;
      so["balance"] = std::to_string(s.balance);
      shards.push_back(std::move(so));
    }
    o["shards"] = std::move(shards);
  }
  if (a.parent_id != 0) o["parentId"] = a.parent_id;
  if (a.fees) {
    json::object fees;
    fees["feeBps"] = a.fees->bps;
    fees["feeFixed"] = std::to_string(a.fees->fixed);
    o["fees"] = std::move(fees);
  } else {
    o["fees"] = nullptr;
  }
  o["createdAt"] = a.created_at;
  return o;
}

json::object entry_json(const actors::entry_view& e, bool show_balance) {
  json::object o;
  o["id"] = e.id;
  o["transactionId"] = e.transaction_id;
  o["accountId"] = e.account_id;
  o["currency"] = e.currency;
  o["amount"] = std::to_string(e.amount);
  if (show_balance) o["balanceAfter"] = std::to_string(e.balance_after);
  if (!e.transaction_type.empty()) o["type"] = e.transaction_type;
  o["createdAt"] = e.created_at;
  return o;
}

json::object entries_page_json(const actors::entries_view& page) {
  json::array entries;
  for (const auto& e : page.entries) entries.push_back(entry_json(e));
  json::object o;
  o["entries"] = std::move(entries);
  o["next"] = page.next_after ? json::value(std::to_string(*page.next_after)) : json::value(nullptr);
  return o;
}

json::object transaction_json(const actors::transaction_view& t, ledger::principal_id who, ledger::role role) {
  json::object o;
  o["id"] = t.id;
  o["type"] = t.type;
  o["status"] = t.status;
  o["createdAt"] = t.created_at;
  if (t.principal_id) o["principalId"] = *t.principal_id;
  const bool is_operator = role == ledger::role::operator_role;
  json::array entries;
  for (const auto& e : t.entries) {
    entries.push_back(entry_json(e, is_operator || (e.account_owner && *e.account_owner == who)));
  }
  o["entries"] = std::move(entries);
  if (t.refunded_amount) {
    o["refundedAmount"] = std::to_string(*t.refunded_amount);
    json::array refunds;
    for (const auto& id : t.refunds) refunds.push_back(json::value(id));
    o["refunds"] = std::move(refunds);
  }
  if (!t.refunded_transfer.empty()) o["transferId"] = t.refunded_transfer;
  if (!t.reversed_by.empty()) o["reversedBy"] = t.reversed_by;
  if (!t.reverses.empty()) o["reverses"] = t.reverses;
  return o;
}

json::object new_principal_json(const actors::principal_view& p, const std::string& api_key) {
  json::object o;
  o["id"] = p.id;
  o["name"] = p.name;
  o["role"] = std::string(ledger::to_string(p.role));
  o["apiKey"] = api_key;
  return o;
}

json::object reconciliation_run_json(const actors::reconciliation_run_view& run) {
  json::object o;
  o["runId"] = run.id;
  o["kind"] = run.kind;
  o["status"] = run.status;
  o["phase"] = text_or_null(run.phase);
  o["requestedBy"] = run.requested_by;
  o["startedAt"] = run.started_at;
  o["finishedAt"] = text_or_null(run.finished_at);
  o["fromEntryId"] = or_null(run.from_entry_id);
  o["throughEntryId"] = or_null(run.through_entry_id);
  o["ok"] = or_null(run.ok);
  for (const auto& check : run.checks) o[check.name] = or_null(check.passed);
  json::array findings;
  for (const auto& f : run.findings) {
    json::object fo;
    fo["check"] = f.check;
    if (f.account_id) fo["accountId"] = *f.account_id;
    if (!f.transaction_id.empty()) fo["transactionId"] = f.transaction_id;
    if (!f.currency.empty()) fo["currency"] = f.currency;
    if (f.entry_id) fo["entryId"] = *f.entry_id;
    fo["detail"] = f.detail;
    findings.push_back(std::move(fo));
  }
  o["findings"] = std::move(findings);
  o["accountsChecked"] = run.accounts_checked;
  o["entriesChecked"] = run.entries_checked;
  o["transactionsChecked"] = run.transactions_checked;
  o["durationMs"] = run.duration_ms;
  o["error"] = text_or_null(run.error);
  return o;
}

json::object provider_json(const actors::provider_view& p, bool with_secret) {
  json::object o;
  o["id"] = p.id;
  o["name"] = p.name;
  if (with_secret) o["signingSecret"] = p.signing_secret;
  o["sendsEvents"] = !p.signing_secret.empty();
  o["createdAt"] = p.created_at;
  o["secretRotatedAt"] = p.secret_rotated_at.empty() ? json::value(nullptr) : json::value(p.secret_rotated_at);
  o["previousSecretExpiresAt"] =
      p.previous_secret_expires_at.empty() ? json::value(nullptr) : json::value(p.previous_secret_expires_at);
  return o;
}

json::object withdrawal_json(const actors::withdrawal_view& w) {
  json::object o;
  o["id"] = w.id;
  o["accountId"] = w.account_id;
  o["provider"] = w.provider;
  o["currency"] = w.currency;
  o["amount"] = std::to_string(w.amount);
  o["fee"] = std::to_string(w.fee);
  o["destination"] = text_or_null(w.destination);
  o["status"] = w.status;
  o["transactionId"] = w.transaction_id;
  o["settledTransactionId"] = text_or_null(w.settled_transaction_id);
  o["providerPaymentId"] = text_or_null(w.provider_payment_id);
  o["createdAt"] = w.created_at;
  o["settledAt"] = text_or_null(w.settled_at);
  return o;
}

}  // namespace api
