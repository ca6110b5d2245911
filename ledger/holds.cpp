#include "ledger/holds.hpp"

#include <algorithm>

namespace ledger::holds {

std::optional<amount_minor> available(const account_states& accounts, account_id account,
                                      const std::vector<account_id>& shards) {
  auto main = accounts.find(account);
  if (main == accounts.end()) return std::nullopt;
  amount_minor total = main->second.balance;
  for (account_id id : shards) {
    auto shard = accounts.find(id);
    if (shard == accounts.end() || shard->second.parent_id != account) return std::nullopt;
    auto next = checked_add(total, std::max<amount_minor>(shard->second.balance, 0));
    if (!next) return std::nullopt;
    total = *next;
  }
  return checked_sub(total, main->second.held);
}

error_code place(account_states& accounts, account_id payer, const std::vector<account_id>& shards, amount_minor amount,
                 const std::string& currency) {
  if (amount <= 0) return error_code::invalid_request;
  auto it = accounts.find(payer);
  if (it == accounts.end()) return error_code::not_found;
  auto& row = it->second;
  if (row.status != account_status::active) return error_code::account_inactive;
  if (row.currency != currency) return error_code::currency_mismatch;
  const auto free = available(accounts, payer, shards);
  if (!free) return error_code::invalid_request;
  // An account that may go negative has nothing to guard, but holds are for wallets: a hold is
  // never larger than what the payer holds, whoever it is.
  if (*free < amount) return error_code::hold_exceeds_available;
  row.held += amount;
  ++row.held_version;
  return error_code::ok;
}

error_code release(account_states& accounts, account_id payer, amount_minor amount) {
  auto it = accounts.find(payer);
  if (it == accounts.end()) return error_code::not_found;
  auto& row = it->second;
  if (amount <= 0 || amount > row.held) return error_code::internal;
  row.held -= amount;
  ++row.held_version;
  return error_code::ok;
}

std::string hold_json(const hold_facts& h) {
  // Every value is a UUID, a status word, digits, a currency code or a timestamp: none needs
  // escaping.
  std::string out = "{\"id\":\"" + h.id + "\",\"status\":\"" + h.status +
                    "\",\"fromAccountId\":" + std::to_string(h.payer) + ",\"toAccountId\":" + std::to_string(h.payee) +
                    ",\"currency\":\"" + h.currency + "\",\"amount\":\"" + std::to_string(h.amount) +
                    "\",\"capturedAmount\":\"" + std::to_string(h.captured) + "\",\"expiresAt\":\"" + h.expires_at +
                    "\",\"createdAt\":\"" + h.created_at + "\"";
  if (!h.capture_transaction_id.empty()) out += ",\"captureTransactionId\":\"" + h.capture_transaction_id + "\"";
  out += "}";
  return out;
}

}  // namespace ledger::holds
