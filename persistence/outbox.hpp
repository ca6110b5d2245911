#pragma once

// The outbox as events (docs/events.md): every committed batch writes one outbox_event row naming
// its journal transactions; each of those transactions is one event. This file holds what the
// outbox relay (events/) does to the rows, one relay at a time, and the feed query that
// GET /v1/events serves:
//
// - sequence: give committed rows their feed position (feed_seq), in id order, above every
//   position given before (migration 008 says why ids alone are not a feed order);
// - claim: the sequenced rows still unpublished, in feed order, locked (FOR UPDATE SKIP LOCKED);
// - mark: those rows published, in the claim's own transaction;
// - expand: a row's transactions as events, each with the accounts it moved money on;
// - prune: the oldest rows, past events.feed_retention_days, deleted (migration 028).
//
// An event names public accounts only: an entry on a hot account's credit shard counts for the
// account itself, and one event's entries on one account are summed (a sweep moves 0 on it).

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ledger/money.hpp"
#include "ledger/types.hpp"

#include "persistence/pqxx_fwd.hpp"

namespace pqxx {
class transaction_base;
}

namespace persistence {

// An event's cursor is its feed position: its row's feed_seq, shifted left, plus its index among
// the row's transactions. A row holds at most one batch (writer.batch_postings_max <= 10,000).
inline constexpr int k_event_index_bits = 16;
inline constexpr std::int64_t k_events_per_row_max = std::int64_t{1} << k_event_index_bits;

constexpr std::int64_t event_cursor(std::int64_t feed_seq, std::int64_t index) {
  return (feed_seq << k_event_index_bits) | index;
}

// One public account an event moved money on.
struct event_leg {
  ledger::account_id account = 0;
  ledger::amount_minor amount = 0;  // the sum of the event's entries on it (and its shards)
  std::optional<ledger::principal_id> owner;
  std::string currency;  // the account's: an exchange's legs are in two currencies
};

struct event_record {
  std::int64_t outbox_id = 0;
  std::int64_t cursor = 0;
  std::string transaction_id;   // also the event's id: stable, so consumers deduplicate by it
  std::string type;             // the journal transaction's type (a ledger::transaction_type's text)
  std::string currency;         // the posting's: the account it debits (each leg names its own)
  std::string created_at;       // when its batch's transaction began: UTC, microseconds
  std::vector<event_leg> legs;  // in the order its entries first name them

  bool touches_owner(ledger::principal_id owner) const;
  bool touches_account(ledger::account_id account) const;
};

// What events say of the accounts their entries name: the public account (a shard's parent), its
// owner and its currency. The relay keeps one between rounds (they never change once an account is
// opened), so that a busy merchant's shards are read once.
struct account_label {
  std::optional<ledger::account_id> parent;
  std::optional<ledger::principal_id> owner;
  std::string currency;
};
struct account_labels {
  std::unordered_map<ledger::account_id, account_label> known;
};

// The relay's turn: true when this transaction holds the relay lock (a transaction-scoped
// advisory lock), so no other relay sequences or publishes until it ends.
bool try_relay_lock(pqxx::transaction_base& txn);

// Gives at most `rows_max` committed, unsequenced rows their feed positions, in id order; returns
// how many. Call under the relay lock.
std::int64_t sequence_outbox(pqxx::transaction_base& txn, std::int64_t rows_max);

// Locks at most `rows_max` sequenced, unpublished rows (FOR UPDATE SKIP LOCKED) and returns their
// ids in feed order. Call under the relay lock.
std::vector<std::int64_t> claim_outbox(pqxx::transaction_base& txn, std::int64_t rows_max);

// The events of the rows `ids`, in feed order, with the labels of their accounts from `labels`
// (those it lacks are read and added). A type the server does not know, or a payload it cannot
// read, throws unknown_value.
std::vector<event_record> outbox_events(pqxx::transaction_base& txn, const std::vector<std::int64_t>& ids,
                                        account_labels& labels);

// Marks the rows `ids` published (in the transaction that claimed them).
void mark_published(pqxx::transaction_base& txn, const std::vector<std::int64_t>& ids);

// How old the oldest unpublished row is, by the database's clock, in milliseconds; 0 when every
// row is published.
double outbox_lag_ms(pqxx::connection& conn);

// Who may see what in the feed: an operator everything, a principal the events that move money
// on its own accounts; either may name one account.
struct event_filter {
  std::optional<ledger::principal_id> owner;
  std::optional<ledger::account_id> account;
};

struct events_page {
  std::vector<event_record> events;
  std::int64_t next = 0;  // the `after` of the next call
  bool more = false;      // false: the feed ended here when it was read
  // The cursor of the last event deleted past the retention (0: none ever). When `after` was
  // below it (and not 0, the start), events after `after` were deleted unread: `expired` is set,
  // and the page holds what follows the gap.
  std::int64_t pruned_through = 0;
  bool expired = false;
};

// The events after the cursor `after` that pass `filter`, at most `limit` (> 0) of them, in feed
// order. At most `scan_max` events are looked at: a filter that matches few of them answers a
// short page whose `next` is past what was looked at, with `more` set. Whether `after` had
// expired is read after the rows, so a prune that made a gap in them is always seen.
events_page read_event_feed(pqxx::connection& conn, std::int64_t after, int limit, std::int64_t scan_max,
                            const event_filter& filter);

// What one prune statement did.
struct outbox_prune {
  std::int64_t rows = 0;            // outbox rows deleted
  std::int64_t through_cursor = 0;  // the cursor of the last event ever deleted (0: none)
};

// Deletes at most `limit` (> 0) of the rows at the head of the feed that are published, older
// than `retention_days` (> 0), below the position every enabled webhook endpoint was fanned out
// to, and not the feed's last row: always a prefix of the feed, recorded in outbox_pruned in the
// same transaction. Takes the relay lock; nullopt when another relay holds it (that one prunes).
std::optional<outbox_prune> prune_outbox(pqxx::connection& conn, std::int64_t retention_days, int limit);

// Defines this file's prepared statements on a connection (connect() calls it).
void prepare_outbox_statements(pqxx::connection& conn);

}  // namespace persistence
