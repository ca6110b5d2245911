// The ledger vocabulary: currency codes, the text forms of enums, stable error codes and receipts.

#include <gtest/gtest.h>

#include "ledger/errors.hpp"
#include "ledger/receipt.hpp"
#include "ledger/types.hpp"

namespace ledger {
namespace {

TEST(currency, exactly_three_upper_case_ascii_letters) {
  // ISO 4217 shape: three letters A-Z; anything shorter, longer, lower-case or non-letter is refused.
  for (const char* ok : {"EUR", "USD", "JPY", "AAA", "ZZZ"}) EXPECT_TRUE(is_valid_currency(ok)) << ok;
  for (const char* bad : {"", "E", "EU", "EURO", "eur", "Eur", "EUr", "E1R", "123", "EU ", " EU", "E-R", "@UR", "[UR",
                          "\xc3\x84U" /* ÄU */}) {
    EXPECT_FALSE(is_valid_currency(bad)) << "\"" << bad << "\"";
  }
  EXPECT_FALSE(is_valid_currency(std::string_view("EU\0", 3)));
}

TEST(types, text_forms_round_trip) {
  // Every enum value prints the name the database and the API use, and parses back to itself.
  for (role r : {role::user, role::merchant, role::operator_role}) EXPECT_EQ(parse_role(to_string(r)), r);
  for (account_status s : {account_status::active, account_status::frozen, account_status::closed}) {
    EXPECT_EQ(parse_account_status(to_string(s)), s);
  }
  for (account_kind k : {account_kind::user, account_kind::system, account_kind::shard}) {
    EXPECT_EQ(parse_account_kind(to_string(k)), k);
  }
  EXPECT_EQ(to_string(role::operator_role), "operator");
  EXPECT_EQ(to_string(transaction_type::deposit), "DEPOSIT");
  EXPECT_EQ(to_string(transaction_type::transfer), "TRANSFER");
  EXPECT_EQ(to_string(transaction_type::sweep), "SWEEP");
  EXPECT_EQ(parse_role("Operator"), std::nullopt);
  EXPECT_EQ(parse_role("admin"), std::nullopt);
  EXPECT_EQ(parse_account_status("ACTIVE"), std::nullopt);
  EXPECT_EQ(parse_account_kind(""), std::nullopt);
}

TEST(errors, codes_have_stable_names) {
  // The problem+json `code` of each outcome is part of the API contract (docs/design.md §6).
  EXPECT_EQ(to_string(error_code::ok), "ok");
  EXPECT_EQ(to_string(error_code::invalid_request), "invalid_request");
  EXPECT_EQ(to_string(error_code::not_found), "not_found");
  EXPECT_EQ(to_string(error_code::insufficient_funds), "insufficient_funds");
  EXPECT_EQ(to_string(error_code::account_inactive), "account_inactive");
  EXPECT_EQ(to_string(error_code::currency_mismatch), "currency_mismatch");
  EXPECT_EQ(to_string(error_code::same_account), "same_account");
  EXPECT_EQ(to_string(error_code::idempotency_key_reused), "idempotency_key_reused");
  EXPECT_EQ(to_string(error_code::internal), "internal");
}

TEST(receipt, transfer_carries_the_balance_after_as_a_string) {
  // A transfer receipt names fromBalanceAfter as digits in a string; other types leave it out.
  EXPECT_EQ(receipt_json(transaction_type::transfer, "0190-abc", 49000),
            R"({"transactionId":"0190-abc","status":"COMPLETED","fromBalanceAfter":"49000"})");
  EXPECT_EQ(receipt_json(transaction_type::deposit, "0190-abc", -5),
            R"({"transactionId":"0190-abc","status":"COMPLETED"})");
  EXPECT_EQ(receipt_status, 201);
}

TEST(types, provider_names_are_lower_case_slugs) {
  // Names end up in system roles ("clearing:<name>") and URLs: a short, plain alphabet only.
  EXPECT_TRUE(is_valid_provider_name("stripe"));
  EXPECT_TRUE(is_valid_provider_name("acme-2_eu"));
  EXPECT_TRUE(is_valid_provider_name(std::string(40, 'a')));
  EXPECT_FALSE(is_valid_provider_name(""));
  EXPECT_FALSE(is_valid_provider_name(std::string(41, 'a')));
  EXPECT_FALSE(is_valid_provider_name("Stripe"));
  EXPECT_FALSE(is_valid_provider_name("-stripe"));
  EXPECT_FALSE(is_valid_provider_name("str ipe"));
  EXPECT_FALSE(is_valid_provider_name("a:b"));
}

TEST(types, every_transaction_type_reads_back_from_its_text) {
  // The database stores the text; reading it back must give the same type for every one.
  for (auto t : {transaction_type::deposit, transaction_type::transfer, transaction_type::sweep,
                 transaction_type::withdrawal, transaction_type::payout, transaction_type::payout_failed,
                 transaction_type::deposit_refund, transaction_type::chargeback, transaction_type::refund}) {
    EXPECT_EQ(parse_transaction_type(to_string(t)), t);
  }
  EXPECT_FALSE(parse_transaction_type("PAYMENT_REFUND"));
  EXPECT_EQ(parse_role("provider"), role::provider);
}

}  // namespace
}  // namespace ledger
