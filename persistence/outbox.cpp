#include "persistence/outbox.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <set>

#include "base/assert.hpp"
#include "persistence/database.hpp"

namespace persistence {
namespace {

// An arbitrary, fixed key for pg_try_advisory_xact_lock: "wallet relay".
constexpr std::int64_t k_relay_lock_key = 0x77616c6c6574'72;

constexpr const char* k_relay_lock = "outbox_relay_lock";
constexpr const char* k_relay_lock_sql = "SELECT pg_try_advisory_xact_lock($1)";

// Positions follow the highest one given so far: the relay lock makes this the only statement
// giving positions while it runs, and the lock is released only after its COMMIT is visible.
// Rows still uncommitted are invisible here and get a higher position in a later round.
constexpr const char* k_sequence = "outbox_sequence";
constexpr const char* k_sequence_sql =
    "WITH top AS (SELECT COALESCE((SELECT feed_seq FROM outbox_event WHERE feed_seq IS NOT NULL"
    "                              ORDER BY feed_seq DESC LIMIT 1), 0) AS seq),"
    "     batch AS (SELECT id FROM outbox_event WHERE feed_seq IS NULL ORDER BY id LIMIT $1 FOR UPDATE),"
    "     numbered AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM batch)"
    " UPDATE outbox_event o SET feed_seq = top.seq + numbered.n FROM top, numbered WHERE o.id = numbered.id";

constexpr const char* k_claim = "outbox_claim";
constexpr const char* k_claim_sql =
    "SELECT id FROM outbox_event WHERE published_at IS NULL AND feed_seq IS NOT NULL"
    " ORDER BY feed_seq LIMIT $1 FOR UPDATE SKIP LOCKED";

constexpr const char* k_mark = "outbox_mark_published";
constexpr const char* k_mark_sql = "UPDATE outbox_event SET published_at = now() WHERE id = ANY($1::bigint[])";

// The age of the oldest unpublished row: the oldest row still to be sequenced or the first sequenced
// row still to be published, each the head of its own partial index (migration 008), so that the
// rows need no third index on `published_at` alone (migration 016 dropped it).
constexpr const char* k_lag = "outbox_lag";
constexpr const char* k_lag_sql =
    "SELECT COALESCE((SELECT extract(epoch FROM clock_timestamp() - min(oldest.created_at)) * 1000 FROM ("
    "    (SELECT created_at FROM outbox_event WHERE feed_seq IS NULL ORDER BY id LIMIT 1)"
    "    UNION ALL"
    "    (SELECT created_at FROM outbox_event WHERE published_at IS NULL AND feed_seq IS NOT NULL"
    "      ORDER BY feed_seq LIMIT 1)) AS oldest), 0)::float8";

// A row's transactions: the batch payload of migration 003, or the single transaction of a row
// written before it. `row` is the alias of outbox_event in the statement.
std::string row_transactions_sql(const std::string& row) {
  return "(CASE WHEN " + row + ".transaction_ids IS NULL THEN jsonb_build_array(" + row + ".payload) ELSE " + row +
         ".payload->'transactions' END)";
}

// One result row per entry of each event (an event without entries still gives one, with NULLs),
// with the public account of the entry, its owner and its currency (a shard's is its parent's; an
// entry naming no account the database knows, which only a hand-written row can, gets the
// event's). The columns read_events reads, in order, of the outbox rows `rows_where` chooses;
// `events_where` filters the events.
//
// The planner takes each jsonb_array_elements for 100 rows, so it expects thousands of entries for
// a few rows. Left to itself it then hashed the whole account table for every call, and sorted
// the guess out of a parallel scan of the whole outbox: 12 ms for 64 rows at 10,000 accounts and
// 8,000 outbox rows (JIT off; bench/PROFILE.md), growing with both tables. Here the rows are
// chosen on their own (MATERIALIZED: by the primary key or the feed's index) and each entry's
// account is one primary-key probe (OFFSET 0 keeps the lateral lookup from being turned back into
// a join): 2.3 ms for the same rows, whatever the sizes of the tables. The transactions and their
// entries are read as records (jsonb_to_recordset) rather than member by member from each element:
// 17.5 → 12.5 ms for three batches of 1,000 payments (bench/PROFILE.md).
std::string event_rows_sql(const std::string& rows_where, const std::string& events_where) {
  return "WITH o AS MATERIALIZED (SELECT id, feed_seq, created_at, transaction_ids, payload FROM outbox_event"
         " WHERE " +
         rows_where +
         ")"
         " SELECT o.id, o.feed_seq, t.ord - 1, t.transaction_id, t.type, t.currency,"
         " to_char(o.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),"
         " COALESCE(a.parent_id, x.account), x.amount, a.owner_id, COALESCE(a.currency, t.currency)"
         " FROM o CROSS JOIN LATERAL ROWS FROM (jsonb_to_recordset(" +
         row_transactions_sql("o") +
         ") AS (\"transactionId\" text, type text, currency text, entries jsonb))"
         " WITH ORDINALITY AS t(transaction_id, type, currency, entries, ord)"
         " LEFT JOIN LATERAL ROWS FROM (jsonb_to_recordset(t.entries) AS (\"accountId\" bigint, amount bigint))"
         " WITH ORDINALITY AS x(account, amount, n) ON true"
         " LEFT JOIN LATERAL (SELECT s.parent_id, s.owner_id, s.currency FROM account s WHERE s.id = x.account"
         "                    OFFSET 0) AS a ON true" +
         events_where + " ORDER BY o.feed_seq, t.ord, x.n";
}

constexpr const char* k_events_of_rows = "outbox_events_of_rows";
const std::string k_events_of_rows_sql = event_rows_sql("id = ANY($1::bigint[])", "");

// The events after the position ($1, $2) of the next $3 rows that still have any: the row of the
// cursor itself only when it holds transactions after index $2.
constexpr const char* k_feed = "outbox_feed";
const std::string k_feed_sql = event_rows_sql(
    "id IN (SELECT r.id FROM outbox_event r WHERE r.feed_seq >= $1"
    "          AND (r.feed_seq > $1 OR jsonb_array_length(" +
        row_transactions_sql("r") +
        ") > $2 + 1)"
        "        ORDER BY r.feed_seq LIMIT $3)",
    " WHERE o.feed_seq > $1 OR t.ord - 1 > $2");

// How many rows the feed reads in its first query; each further query of one call reads twice as
// many, up to the second bound, until the page is full or `scan_max` events were looked at.
constexpr std::int64_t k_feed_rows_first = 1;
constexpr std::int64_t k_feed_rows_max = 64;

// Groups the entry rows of `rows` into events. Rows come ordered by position, then entry.
std::vector<event_record> read_events(const pqxx::result& rows) {
  std::vector<event_record> events;
  for (const auto& row : rows) {
    const auto feed_seq = row[1].as<std::int64_t>();
    const auto index = row[2].as<std::int64_t>();
    WALLET_ASSERT(index >= 0 && index < k_events_per_row_max, "an outbox row holds one batch at most");
    const auto cursor = event_cursor(feed_seq, index);
    if (events.empty() || events.back().cursor != cursor) {
      event_record e;
      e.outbox_id = row[0].as<std::int64_t>();
      e.cursor = cursor;
      e.transaction_id = row[3].as<std::string>();
      e.type = ledger::to_string(
          parse_column(ledger::parse_transaction_type, row[4].as<std::string>(), "outbox_event.payload type"));
      e.currency = row[5].as<std::string>();
      e.created_at = row[6].as<std::string>();
      events.push_back(std::move(e));
    }
    if (row[7].is_null()) continue;  // an event without entries
    auto& legs = events.back().legs;
    const auto account = row[7].as<std::int64_t>();
    const auto amount = row[8].as<std::int64_t>();
    auto it = std::find_if(legs.begin(), legs.end(), [&](const event_leg& l) { return l.account == account; });
    if (it == legs.end()) {
      event_leg leg;
      leg.account = account;
      leg.amount = amount;
      if (!row[9].is_null()) leg.owner = row[9].as<std::int64_t>();
      leg.currency = row[10].as<std::string>();
      legs.push_back(leg);
    } else {
      const auto sum = ledger::checked_add(it->amount, amount);
      WALLET_ASSERT(sum.has_value(), "one transaction's entries on one account sum within int64");
      it->amount = *sum;
    }
  }
  return events;
}

bool passes(const event_record& e, const event_filter& filter) {
  if (filter.owner && !e.touches_owner(*filter.owner)) return false;
  if (filter.account && !e.touches_account(*filter.account)) return false;
  return true;
}

}  // namespace

bool event_record::touches_owner(ledger::principal_id who) const {
  return std::any_of(legs.begin(), legs.end(), [&](const event_leg& l) { return l.owner == who; });
}

bool event_record::touches_account(ledger::account_id id) const {
  return std::any_of(legs.begin(), legs.end(), [&](const event_leg& l) { return l.account == id; });
}

void prepare_outbox_statements(pqxx::connection& conn) {
  conn.prepare(k_relay_lock, k_relay_lock_sql);
  conn.prepare(k_sequence, k_sequence_sql);
  conn.prepare(k_claim, k_claim_sql);
  conn.prepare(k_mark, k_mark_sql);
  conn.prepare(k_lag, k_lag_sql);
  conn.prepare(k_events_of_rows, k_events_of_rows_sql);
  conn.prepare(k_feed, k_feed_sql);
}

bool try_relay_lock(pqxx::transaction_base& txn) {
  return txn.exec_prepared1(k_relay_lock, k_relay_lock_key)[0].as<bool>();
}

std::int64_t sequence_outbox(pqxx::transaction_base& txn, std::int64_t rows_max) {
  WALLET_ASSERT(rows_max > 0, "a round sequences one row at least");
  return static_cast<std::int64_t>(txn.exec_prepared(k_sequence, rows_max).affected_rows());
}

std::vector<std::int64_t> claim_outbox(pqxx::transaction_base& txn, std::int64_t rows_max) {
  WALLET_ASSERT(rows_max > 0, "a round claims one row at least");
  std::vector<std::int64_t> ids;
  for (const auto& row : txn.exec_prepared(k_claim, rows_max)) ids.push_back(row[0].as<std::int64_t>());
  return ids;
}

std::vector<event_record> outbox_events(pqxx::transaction_base& txn, const std::vector<std::int64_t>& ids) {
  if (ids.empty()) return {};
  return read_events(txn.exec_prepared(k_events_of_rows, pg_array(ids)));
}

void mark_published(pqxx::transaction_base& txn, const std::vector<std::int64_t>& ids) {
  if (ids.empty()) return;
  const auto marked = txn.exec_prepared(k_mark, pg_array(ids)).affected_rows();
  WALLET_ASSERT(marked == ids.size(), "every claimed row is still there to be marked");
}

double outbox_lag_ms(pqxx::connection& conn) {
  pqxx::read_transaction txn(conn);
  return txn.exec_prepared1(k_lag)[0].as<double>();
}

events_page read_event_feed(pqxx::connection& conn, std::int64_t after, int limit, std::int64_t scan_max,
                            const event_filter& filter) {
  WALLET_ASSERT(limit > 0 && scan_max > 0, "a page holds one event at least");
  WALLET_ASSERT(after >= 0, "cursors are not negative");
  pqxx::read_transaction txn(conn);
  events_page page;
  page.next = after;
  std::int64_t position = after;
  std::int64_t scanned = 0;
  for (std::int64_t rows_wanted = k_feed_rows_first;; rows_wanted = std::min(rows_wanted * 2, k_feed_rows_max)) {
    const auto rows =
        txn.exec_prepared(k_feed, position >> k_event_index_bits, position & (k_events_per_row_max - 1), rows_wanted);
    const auto events = read_events(rows);
    std::set<std::int64_t> outbox_rows;
    for (const auto& e : events) {
      outbox_rows.insert(e.outbox_id);
      ++scanned;
      position = e.cursor;
      if (passes(e, filter)) page.events.push_back(e);
      if (static_cast<int>(page.events.size()) == limit || scanned >= scan_max) {
        page.next = position;
        page.more = true;
        return page;
      }
    }
    page.next = position;
    // Fewer rows than asked for: the feed ends here (every row read has events after the cursor).
    if (static_cast<std::int64_t>(outbox_rows.size()) < rows_wanted) return page;
  }
}

}  // namespace persistence
