#pragma once

// The one posting path: commit a batch of postings in ONE database transaction.
//
// In order: lock every account row of the batch in ascending id order (so two writers never
// deadlock); look up idempotency keys already committed; plan the postings against the locked rows
// (ledger::plan_posting); insert journal rows with their receipts, the entries with
// balance_after, the balance caches aggregated per row, and the outbox rows; COMMIT.
//
// A batch of plain postings (no flow rows, no holds) is first tried without the row locks: its
// rows are read as they are, and the writes update each row only at the version read and lock the
// rows read but not changed at theirs. If a row moved in between, or a posting would be refused,
// that attempt is rolled back and the batch redone with the locks (docs/design.md, §3).
//
// A posting the database refuses (a constraint) is isolated: the batch is retried posting by
// posting, so only the offender fails. Connection failures propagate as pqxx exceptions; the
// caller decides between "not committed" and "outcome unknown".

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ledger/errors.hpp"
#include "ledger/posting.hpp"
#include "persistence/audit.hpp"

#include "persistence/pqxx_fwd.hpp"

namespace persistence {

// The rows a money flow writes in its posting's own transaction (migration 005), and the rows it
// checks under their lock before the posting is planned. docs/money-flows.md says which flow
// writes which.
struct flow_rows {
  // A provider event that posts: its provider_event row.
  struct provider_event {
    std::int64_t provider_id = 0;
    std::string event_id;
    std::string type;
    std::string payment_id;  // empty: none
    std::string payload_json;
  };
  // A deposit: its deposit_payment row (the credited account, amount and currency are the posting's).
  struct deposit {
    std::int64_t provider_id = 0;
    std::string payment_id;  // empty: none (a manual deposit without a reference)
  };
  // A refund or the chargeback of a deposit: checked and added to the deposit's row under its lock.
  struct deposit_claim {
    std::string deposit_transaction_id;
    bool chargeback = false;
    // No amount was asked: the claim is all that is left of the deposit, as its row stands under
    // the lock (another refund may have committed since the flow read it). The posting's amount is
    // then only an upper bound, and the receipt's amount is added here.
    bool rest = false;
  };
  // A refund of a payment (a TRANSFER; migration 007): checked against and added to the payment's
  // payment_refund_total row under its lock (the first refund makes it), and its payment_refund row.
  struct payment_refund {
    std::string payment_transaction_id;
    ledger::account_id payee = 0;  // the payment's payee: the account the refund debits
    ledger::account_id payer = 0;
    ledger::amount_minor payment_amount = 0;
    // No amount was asked: the refund is all that is left of the payment, as its total row stands
    // under the lock (as deposit_claim::rest).
    bool rest = false;
  };
  // A withdrawal request: its withdrawal row (PENDING).
  struct withdrawal {
    std::string id;
    std::int64_t provider_id = 0;
    ledger::principal_id principal = 0;
    ledger::amount_minor amount = 0;
    ledger::amount_minor fee = 0;
    std::string destination;  // empty: none
  };
  // A withdrawal's settlement: PENDING becomes PAID or FAILED, once.
  struct withdrawal_settle {
    std::string withdrawal_id;
    bool paid = false;
    std::string provider_payment_id;  // empty: none
  };

  // Corrections and currencies (docs/corrections.md, migration 012).
  // A reversal: its transaction_reversal row, once per original (a second one is refused under the
  // lock, and by the primary key). A reversed payment or deposit has nothing left to refund: a
  // payment's payment_refund_total row is made with all of it refunded (none may exist: a payment
  // with refunds is not reversed), a deposit's deposit_payment row gets refunded = amount (it may
  // have had no refund nor chargeback).
  struct reversal {
    std::string original_id;
    ledger::principal_id principal = 0;
    std::string reason;
    std::optional<payment_refund> payment;  // the original is a TRANSFER
    bool deposit = false;                   // the original is a DEPOSIT (its deposit_payment row)
  };
  // An adjustment's approval: PENDING_APPROVAL becomes APPROVED with its transaction, once, and
  // never by the operator who requested it.
  struct adjustment_approval {
    std::string adjustment_id;
    ledger::principal_id approver = 0;
  };
  // An exchange: its quote is used once (`conflict` once used), before it expires (the database's
  // clock).
  struct quote_use {
    std::string quote_id;
  };
  std::optional<reversal> reversal_of;
  std::optional<adjustment_approval> approval;
  std::optional<quote_use> quote;

  std::optional<provider_event> event;
  std::optional<deposit> deposit_payment;
  std::optional<deposit_claim> claim;
  std::optional<withdrawal> withdrawal_request;
  std::optional<withdrawal_settle> settle;
  std::optional<payment_refund> refund;
  // A hold (migration 011; docs/money-flows.md, "Holds"). Placing and voiding one are postings
  // that make no journal row: the writer changes the payer's held money and the hold row, under
  // the payer's row lock. A capture is a CAPTURE posting that settles the hold row it names.
  struct hold_change {
    enum class kind : std::uint8_t { place, capture, void_ };
    kind what = kind::place;
    std::string hold_id;
    // place: the payee, and how long the hold lives (from the database's clock).
    ledger::account_id payee = 0;
    std::int64_t expires_in_seconds = 0;
  };
  std::optional<hold_change> hold;
  // An operator's flow (a deposit, its refund or chargeback, a withdrawal's settlement): its
  // audit_log row (migration 009), written only when the posting commits, with the transaction
  // id and the amount posted added to its detail.
  std::optional<audit_entry> audit;

  // A claim or a refund of all that is left: the posting's amount is only an upper bound, the
  // writer takes what is left under the lock and adds the amount to the receipt.
  bool takes_the_rest() const { return (claim && claim->rest) || (refund && refund->rest); }
};

// Several nodes on one ledger (docs/scaling.md): the lease under which a node's account actor
// decided a debit. The writer commits the posting only if, in its transaction, the partition's
// lease row (locked FOR SHARE) still names this node at this epoch.
struct lease_fence {
  int partition = 0;
  std::int64_t epoch = 0;
  std::string node_id;
};

struct posting_request {
  ledger::posting posting;
  std::string transaction_id;  // a UUID made by the server
  std::optional<ledger::principal_id> principal;
  std::string idempotency_key;
  std::string request_hash;
  std::string metadata_json = "{}";
  // JSON members the receipt carries after transactionId and status (see ledger/receipt.hpp).
  std::string receipt_fields;
  // Null for the plain flows (transfers, deposits by the hot path, sweeps): they write no rows
  // beyond the journal, the entries and the balances.
  std::shared_ptr<const flow_rows> rows;
  // Set on debits in cluster mode only.
  std::optional<lease_fence> fence;
  // A transfer of a batch (POST /v1/transfers/batch). Any other posting that makes a journal row is
  // refused (idempotency_key_reused) when its key is a stored batch's, whose first transfer may
  // have left no journal row under it (it was refused); every one, batch transfers included, when
  // its key is a hold's.
  bool batch_item = false;
};

// The committed state of one account row after the batch.
struct row_state {
  ledger::account_id id = 0;
  ledger::amount_minor balance = 0;
  std::int64_t version = 0;
  ledger::account_id parent_id = 0;
  // What the account's active holds keep, and how often that changed (a main row only; migration
  // 011): held changes without an entry, so an actor keeps the highest held_version it hears of.
  ledger::amount_minor held = 0;
  std::int64_t held_version = 0;
};

struct posting_outcome {
  ledger::error_code outcome = ledger::error_code::ok;
  std::string transaction_id;
  ledger::amount_minor amount = 0;
  ledger::amount_minor debit_balance_after = 0;
  // Set when the idempotency key was already committed: the stored answer is returned as is.
  bool replayed = false;
  int response_status = 0;
  std::string response_body;
  std::vector<ledger::entry_line> entries;
  // Committed state, at the end of the batch, of every row this posting wrote.
  std::vector<row_state> rows_after;
  // account_inactive: which account may not take part (ledger::posting_plan), when known.
  ledger::account_id inactive_account = 0;
};

struct batch_result {
  std::vector<posting_outcome> outcomes;  // one per request, in request order
  std::vector<row_state> rows;            // every row written, after COMMIT
  int attempts = 0;                       // database transactions used
  int fenced = 0;                         // postings refused because their node lost the lease
  // Attempts that read the account rows unlocked and gave way to a locked one (a row had moved, or
  // a posting was to be refused): counted in `attempts` too.
  int relocked = 0;
  // The connection broke while postings were isolated one by one: `outcomes` says what became
  // of each (committed, not committed, or unknown), and the caller must reconnect.
  bool connection_lost = false;
  // commit_atomic only: the first posting that could not be planned. Nothing of the batch was
  // committed then, and only outcomes[*refused_at] says why.
  std::optional<std::size_t> refused_at;
};

// The batch hit lock_timeout or statement_timeout: it was rolled back, nothing of it committed.
struct database_timeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Prepares the statements of the posting path on a connection and makes the connection keep
// generic plans for its prepared statements (plan_cache_mode) that find rows by their keys, never by
// reading a table whole (enable_seqscan); call once per connection, which then serves postings only.
void prepare_posting_statements(pqxx::connection& conn);

// Commits the batch. While nothing of it can have committed, a connection loss throws
// pqxx::broken_connection or pqxx::in_doubt_error and a timeout throws database_timeout; once
// postings are isolated one by one, every posting is answered in `outcomes` instead.
batch_result commit_batch(pqxx::connection& conn, const std::vector<posting_request>& requests);

// Commits every posting of `requests` in ONE transaction, or none of them (an atomic batch of
// transfers, POST /v1/transfers/batch): the first posting refused by its plan or its flow rows
// rolls everything back (`refused_at`), and a refusal by the database is no one posting's fault,
// so it is not isolated: every outcome is `internal` then. Connection loss and timeouts throw as
// from commit_batch.
batch_result commit_atomic(pqxx::connection& conn, const std::vector<posting_request>& requests);

}  // namespace persistence
