#pragma once

// The posting rule of each money flow (docs/money-flows.md): which account pays, which accounts
// are paid and how much, as a posting for plan_posting(). The HTTP-facing flows (actors/flow_*.cpp)
// resolve the accounts and call these; tests/ledger/flow_rules_tests.cpp checks each rule as a
// table (event → entries).
//
//   event                        debit (−)                            credit (+)                            type
//   provider payment succeeded   clearing:<provider>                  wallet                                DEPOSIT
//   withdrawal requested         wallet: amount + fee                 pending_withdrawal: amount;           WITHDRAWAL
//                                                                     fee_revenue: fee
//   payout confirmed             pending_withdrawal                   clearing:<provider>                   PAYOUT
//   payout failed                pending_withdrawal                   wallet (the fee is kept)              PAYOUT_FAILED
//   refund of a deposit          wallet                               clearing:<provider>                   DEPOSIT_REFUND
//   chargeback of a deposit      wallet: what it holds, up to the     clearing:<provider>                   CHARGEBACK
//                                amount; chargeback_loss: the rest
//   payment / transfer           payer: amount                        payee: amount − fee;                  TRANSFER
//                                                                     fee_revenue: fee
//   refund of a payment          payee (merchant)                     payer (the fee is not returned)       REFUND
//   reversal of a transaction    its entries mirrored (a credit is taken back from the account, main row and
//                                shards; a debit is given back to the row it left)                     REVERSAL
//   approved adjustment          adjustment (or the account)          the account (or adjustment)           ADJUSTMENT
//   exchange A → B               wallet A: amount; fx B: converted    fx A: amount; wallet B: converted     EXCHANGE
//   capture of a hold            payer: amount (its hold released)    payee: amount − fee;                  CAPTURE
//                                                                     fee_revenue: fee

#include <optional>
#include <string>
#include <vector>

#include "ledger/fees.hpp"
#include "ledger/posting.hpp"

namespace ledger::flows {

// `credit_row` is the row the credit lands on (a shard of a hot account, or the account itself),
// `credit_account` the account the payee sees.
posting deposit(account_id clearing, account_id credit_row, account_id credit_account, amount_minor amount,
                std::string currency);

// A payee's fee on a payment: the row of fee_revenue the fee lands on, and the payee's schedule.
struct payee_fee {
  account_id fee_revenue = 0;
  fee_schedule schedule;
};
// A payment. With `fee`, the fee is an extra credit to fee_revenue and the payee gets the rest
// (a zero fee makes no entry, the fee leg stays so that the writer may price it).
posting transfer(account_id payer, account_id credit_row, account_id payee, amount_minor amount, std::string currency,
                 std::optional<payee_fee> fee = std::nullopt);
// A hold's capture: a payment of `amount` (at most `hold_amount`) that releases the whole hold of
// `hold_amount` from the payer's held money, in the same posting (ledger/holds.hpp).
posting capture(account_id payer, account_id credit_row, account_id payee, amount_minor amount, std::string currency,
                amount_minor hold_amount, std::optional<payee_fee> fee = std::nullopt);
// Whether postings of `type` pay their payee's fee: payments and captures of holds.
inline bool pays_payee_fee(transaction_type type) {
  return type == transaction_type::transfer || type == transaction_type::capture;
}
// Prices a payment's fee by `schedule`: the payee's, as the ledger writer read it under the credit
// row's lock (migration 007). A payment with a fee leg gets its fee from `schedule`. One without a
// fee leg (its flow knew of no fee) stays as it is when `schedule` charges nothing for it, and
// otherwise is refused (false): its flow decided on an outdated schedule and builds it again.
bool price_payee_fee(posting& p, const fee_schedule& schedule);
// The fee a payment posting pays (its fee leg; 0 without one).
amount_minor payee_fee_of(const posting& p);
// A refund of a payment: the payee pays `amount` back to the payer (`credit_row`: the payer, or a
// shard of a hot payer). The payment's fee stays with fee_revenue.
posting refund(account_id payee, account_id credit_row, account_id payer, amount_minor amount, std::string currency);
// nullopt when amount + fee does not fit in int64.
std::optional<posting> withdrawal(account_id wallet, account_id pending_withdrawal, account_id fee_revenue,
                                  amount_minor amount, amount_minor fee, std::string currency);
posting payout(account_id pending_withdrawal, account_id clearing, amount_minor amount, std::string currency);
posting payout_failed(account_id pending_withdrawal, account_id credit_row, account_id wallet, amount_minor amount,
                      std::string currency);
posting deposit_refund(account_id wallet, account_id clearing, amount_minor amount, std::string currency);
posting chargeback(account_id wallet, account_id clearing, account_id chargeback_loss, amount_minor amount,
                   std::string currency);

// Corrections and currencies (docs/corrections.md).

// The types a reversal may undo. A reversal, a sweep (it moves money within one account) and the
// flows that carry state of their own (a withdrawal and its settlement, refunds and chargebacks)
// are not reversed: each has its own way back. A hold's capture is a payment like a TRANSFER and is
// reversed like one; its hold stays CAPTURED (docs/corrections.md).
bool is_reversible(transaction_type type);

// An entry of the transaction a reversal undoes, with what the rule needs to know of its account.
struct reversed_entry {
  account_id row = 0;      // the row the entry is on (a shard of a hot account, or the account)
  account_id account = 0;  // the account the row belongs to (the shard's parent, or the row)
  amount_minor amount = 0;
  std::string currency;
  bool user_account = false;       // a user account: its debit goes through its actor
  std::vector<account_id> shards;  // the account's credit shards (drawn on after its main row)
};
// The mirror of `entries` as one REVERSAL posting: a credit is taken back from the account it
// credited (its main row, then its shards: a sweep may have moved it), a debit is given back to the
// row it left. The posting's debit_account is the one user account it debits (its actor decides
// it), or else the first account it debits. nullopt when the entries are not a transaction that
// can be mirrored as one posting: no debit and credit, or more than one user account debited.
std::optional<posting> reversal(const std::vector<reversed_entry>& entries);

// An approved adjustment of `amount` (signed, never 0): positive, `adjustment` pays the account
// (landing on `credit_row`, the account or a shard of it); negative, the account pays `adjustment`.
posting adjustment(account_id adjustment_account, account_id account, account_id credit_row, amount_minor amount,
                   std::string currency);

// An exchange: wallet A pays `from_amount` to fx A; fx B pays `to_amount` to wallet B (landing on
// `credit_row`, wallet B or a shard of it). Each currency sums to zero on its own.
posting exchange(account_id wallet_from, account_id fx_from, amount_minor from_amount, std::string from_currency,
                 account_id fx_to, account_id credit_row, account_id wallet_to, amount_minor to_amount,
                 std::string to_currency);

}  // namespace ledger::flows
