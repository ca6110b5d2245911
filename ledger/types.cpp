#include "ledger/types.hpp"

namespace ledger {

std::string_view to_string(role r) {
  switch (r) {
    case role::user: return "user";
    case role::merchant: return "merchant";
    case role::operator_role: return "operator";
    case role::provider: return "provider";
  }
  return "user";
}

std::string_view to_string(account_status s) {
  switch (s) {
    case account_status::active: return "active";
    case account_status::frozen: return "frozen";
    case account_status::closed: return "closed";
  }
  return "closed";
}

std::string_view to_string(account_kind k) {
  switch (k) {
    case account_kind::user: return "user";
    case account_kind::system: return "system";
    case account_kind::shard: return "shard";
  }
  return "user";
}

std::string_view to_string(transaction_type t) {
  switch (t) {
    case transaction_type::deposit: return "DEPOSIT";
    case transaction_type::transfer: return "TRANSFER";
    case transaction_type::sweep: return "SWEEP";
    case transaction_type::withdrawal: return "WITHDRAWAL";
    case transaction_type::payout: return "PAYOUT";
    case transaction_type::payout_failed: return "PAYOUT_FAILED";
    case transaction_type::deposit_refund: return "DEPOSIT_REFUND";
    case transaction_type::chargeback: return "CHARGEBACK";
    case transaction_type::refund: return "REFUND";
    case transaction_type::reversal: return "REVERSAL";
    case transaction_type::adjustment: return "ADJUSTMENT";
    case transaction_type::exchange: return "EXCHANGE";
    case transaction_type::capture: return "CAPTURE";
  }
  return "TRANSFER";
}

std::optional<role> parse_role(std::string_view text) {
  if (text == "user") return role::user;
  if (text == "merchant") return role::merchant;
  if (text == "operator") return role::operator_role;
  if (text == "provider") return role::provider;
  return std::nullopt;
}

std::optional<transaction_type> parse_transaction_type(std::string_view text) {
  for (auto t :
       {transaction_type::deposit, transaction_type::transfer, transaction_type::sweep, transaction_type::withdrawal,
        transaction_type::payout, transaction_type::payout_failed, transaction_type::deposit_refund,
        transaction_type::chargeback, transaction_type::refund, transaction_type::reversal,
        transaction_type::adjustment, transaction_type::exchange, transaction_type::capture}) {
    if (to_string(t) == text) return t;
  }
  return std::nullopt;
}

std::optional<account_status> parse_account_status(std::string_view text) {
  if (text == "active") return account_status::active;
  if (text == "frozen") return account_status::frozen;
  if (text == "closed") return account_status::closed;
  return std::nullopt;
}

std::optional<account_kind> parse_account_kind(std::string_view text) {
  if (text == "user") return account_kind::user;
  if (text == "system") return account_kind::system;
  if (text == "shard") return account_kind::shard;
  return std::nullopt;
}

bool is_valid_currency(std::string_view text) {
  if (text.size() != 3) return false;
  for (char c : text) {
    if (c < 'A' || c > 'Z') return false;
  }
  return true;
}

bool is_valid_provider_name(std::string_view name) {
  constexpr std::size_t k_max = 40;
  if (name.empty() || name.size() > k_max) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '-'))) return false;
  }
  return true;
}

}  // namespace ledger
