#pragma once

// The commands the HTTP layer hands to the actor system, and their results. Plain structs,
// free of CAF, so that http/ compiles without the actor headers.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/errors.hpp"
#include "ledger/types.hpp"

namespace actors {

// Who asks for an administrative change (a principal, a key, an account, a provider, a sweep, a
// reconciliation run): recorded as the change's audit_log row.
struct request_origin {
  ledger::principal_id principal = 0;
  std::string request_id;
  // The SHA-256 (hex) of the API key the request came with, where a change must check that the
  // key is still active as it commits (changes that make credentials: keys, principals, provider
  // secrets); empty elsewhere.
  std::string key_hash_hex;
};

struct transfer_command {
  ledger::principal_id principal = 0;
  ledger::account_id from = 0;
  ledger::account_id to = 0;
  ledger::amount_minor amount = 0;
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

struct deposit_command {
  ledger::principal_id principal = 0;
  ledger::account_id account = 0;
  ledger::amount_minor amount = 0;
  std::string provider = "manual";  // whose clearing account the money comes from
  std::string provider_payment_id;  // empty: none
  std::string external_ref;         // empty: none
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

// A request to pay money out of a wallet: its amount and the currency's fee leave at once, and the
// withdrawal is PENDING until it settles.
struct withdrawal_command {
  ledger::principal_id principal = 0;
  ledger::account_id account = 0;
  ledger::amount_minor amount = 0;
  std::string provider = "manual";
  std::string destination;  // empty: none
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

// A withdrawal's settlement, by an operator or by its provider's event.
struct settle_command {
  ledger::principal_id principal = 0;
  std::string withdrawal_id;
  bool paid = false;
  std::string provider_payment_id;  // empty: none
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

// A refund (partial or full) or the chargeback of a deposit.
struct deposit_claim_command {
  ledger::principal_id principal = 0;
  std::string deposit_transaction_id;
  std::optional<ledger::amount_minor> amount;  // none: all that is left of the deposit
  bool chargeback = false;
  // Reported by the provider (payment.refunded): the card was paid back already, so the refund is
  // booked whatever the wallet holds or its status, the rest to refund_shortfall. An operator's
  // refund is a decision and is refused instead.
  bool reported_by_provider = false;
  std::string reason;  // empty: none
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

// A refund (partial or full) of a payment (a TRANSFER), by the owner of its payee or an operator.
struct payment_refund_command {
  ledger::principal_id principal = 0;
  bool by_operator = false;
  std::string transfer_id;
  std::optional<ledger::amount_minor> amount;  // none: all that is left of the payment
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

// A batch of transfers (POST /v1/transfers/batch) out of the principal's own accounts: all in one
// transaction or none (`atomic`), or each on its own. Item i is idempotent by the batch's key and i.
struct transfer_batch_item {
  ledger::account_id from = 0;
  ledger::account_id to = 0;
  ledger::amount_minor amount = 0;
  std::string reference;  // empty: none
};
struct transfer_batch_command {
  ledger::principal_id principal = 0;
  bool atomic = false;
  std::vector<transfer_batch_item> items;
  std::string idempotency_key;
  // What the items' keys are made of: the batch's key, or its digest when that key is too long
  // to carry an index and stay within 255 characters.
  std::string item_key_base;
  std::string request_hash;
  std::string request_id;
};

// A provider's event whose signature verified: what it says, and its body as received.
struct provider_event_command {
  std::string provider;
  std::string event_id;
  std::string type;  // payment.succeeded, payment.refunded, payout.paid, payout.failed, chargeback.created
  std::string payment_id;
  std::optional<ledger::account_id> account;
  std::string withdrawal_id;
  std::optional<ledger::amount_minor> amount;
  std::string currency;
  std::string payload_json;
  std::string request_hash;
  std::string request_id;
};

// Holds (docs/money-flows.md, "Holds"): placed by the owner of the payer, captured by the owner of
// the payee or an operator, voided by either party or an operator.
struct hold_command {
  ledger::principal_id principal = 0;
  ledger::account_id from = 0;
  ledger::account_id to = 0;
  ledger::amount_minor amount = 0;
  std::int64_t expires_in_seconds = 0;
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

struct hold_capture_command {
  ledger::principal_id principal = 0;
  bool by_operator = false;
  std::string hold_id;
  std::optional<ledger::amount_minor> amount;  // none: all of the hold
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

struct hold_void_command {
  ledger::principal_id principal = 0;
  bool by_operator = false;
  std::string hold_id;
  std::string request_id;
};

// The answer to a money-moving command. On success (or a replay) `status` and `body` are the
// receipt exactly as stored with the journal row.
struct money_result {
  ledger::error_code outcome = ledger::error_code::ok;
  bool replayed = false;
  int status = 0;
  std::string body;
  std::string detail;              // a sentence for the problem body when outcome != ok
  std::int64_t retry_after_s = 0;  // for 503 answers
  // Refused by the account actor before any database work; a replay of an already committed
  // Idempotency-Key must still get its stored answer, so the caller checks for one.
  bool decided_before_writer = false;
  // not_partition_owner (cluster mode): the partition of the debited account, whose holder may
  // serve the request instead.
  int partition = -1;
  // A batch of transfers refused as a whole: the item that decided it.
  std::optional<std::size_t> item_index;
};

}  // namespace actors
