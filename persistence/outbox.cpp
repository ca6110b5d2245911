#include "persistence/outbox.hpp"

#include <pqxx/pqxx>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <charconv>
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

// The outbox rows an expansion reads: each row's position, its batch's time and its payload as
// text, which the server expands into events itself (expand_rows). PostgreSQL expanding the jsonb
// (jsonb_to_recordset per transaction and per entry, one account probe per entry) cost it 11 ms
// for 50 rows of 24 payments, against 2 ms to hand out the text (bench/PROFILE.md); the relay
// shares the cores with the writer.
constexpr const char* k_row_columns =
    "id, feed_seq, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),"
    " transaction_ids IS NULL, payload::text";

// A row's transactions: the batch payload of migration 003, or the single transaction of a row
// written before it. `row` is the alias of outbox_event in the statement.
std::string row_transactions_sql(const std::string& row) {
  return "(CASE WHEN " + row + ".transaction_ids IS NULL THEN jsonb_build_array(" + row + ".payload) ELSE " + row +
         ".payload->'transactions' END)";
}

constexpr const char* k_rows_by_id = "outbox_rows_by_id";
const std::string k_rows_by_id_sql =
    std::string("SELECT ") + k_row_columns + " FROM outbox_event WHERE id = ANY($1::bigint[]) ORDER BY feed_seq";

// The next $3 rows from the position ($1, $2) that still have events after it: the row of the
// cursor itself only when it holds transactions after index $2.
constexpr const char* k_feed_rows = "outbox_feed_rows";
const std::string k_feed_rows_sql = std::string("SELECT ") + k_row_columns +
                                    " FROM outbox_event r WHERE r.feed_seq >= $1"
                                    "   AND (r.feed_seq > $1 OR jsonb_array_length(" +
                                    row_transactions_sql("r") +
                                    ") > $2 + 1)"
                                    " ORDER BY r.feed_seq LIMIT $3";

// The head of the feed past the retention, deleted (migration 028 says which rows may go): the
// first $2 rows by position up to the bound, of which the prefix whose rows are all published and
// older than $1 days. The cursor of the prefix's last event is read from the statement's snapshot,
// which still holds the rows being deleted. An enabled webhook endpoint that follows the fan-out's
// shared position (migration 029) stands at that position or past it, so the position bounds them
// all; one that does not stands at its own cursor.
constexpr const char* k_prune = "outbox_prune";
const std::string k_prune_sql =
    "WITH bound AS (SELECT LEAST("
    "    (SELECT feed_seq FROM outbox_event WHERE feed_seq IS NOT NULL ORDER BY feed_seq DESC LIMIT 1),"
    "    (SELECT min(feed_cursor) >> " +
    std::to_string(k_event_index_bits) +
    " FROM webhook_endpoint"
    "      WHERE NOT follows_fan_out AND deleted_at IS NULL AND disabled_at IS NULL),"
    "    (SELECT cursor >> " +
    std::to_string(k_event_index_bits) +
    " FROM webhook_fan_out WHERE singleton AND EXISTS (SELECT 1 FROM webhook_endpoint"
    "      WHERE follows_fan_out AND deleted_at IS NULL AND disabled_at IS NULL))) - 1 AS seq),"
    " candidates AS (SELECT r.id, r.feed_seq,"
    "    r.published_at IS NOT NULL AND r.created_at < now() - $1::bigint * interval '1 day' AS due"
    "    FROM outbox_event r WHERE r.feed_seq IS NOT NULL AND r.feed_seq <= (SELECT seq FROM bound)"
    "    ORDER BY r.feed_seq LIMIT $2),"
    " doomed AS (SELECT id, feed_seq FROM"
    "    (SELECT id, feed_seq, bool_and(due) OVER (ORDER BY feed_seq) AS all_due FROM candidates) c WHERE all_due),"
    " last AS (SELECT d.feed_seq, jsonb_array_length(" +
    row_transactions_sql("o") +
    ") AS events"
    "    FROM doomed d JOIN outbox_event o ON o.id = d.id ORDER BY d.feed_seq DESC LIMIT 1),"
    " gone AS (DELETE FROM outbox_event o USING doomed d WHERE o.id = d.id RETURNING o.id),"
    " marked AS (UPDATE outbox_pruned p SET through_seq = last.feed_seq,"
    "    through_cursor = (last.feed_seq << " +
    std::to_string(k_event_index_bits) +
    ") + last.events - 1,"
    "    pruned_at = now() FROM last WHERE p.singleton AND last.feed_seq > p.through_seq"
    "    RETURNING p.through_cursor)"
    " SELECT (SELECT count(*) FROM gone),"
    "        COALESCE((SELECT through_cursor FROM marked), (SELECT through_cursor FROM outbox_pruned WHERE singleton))";

constexpr const char* k_pruned_through = "outbox_pruned_through";
constexpr const char* k_pruned_through_sql = "SELECT through_cursor FROM outbox_pruned WHERE singleton";

// What an event says of the accounts its entries name. Nothing changes these once an account is
// opened (only its status and balances change), so the relay keeps them between rounds.
constexpr const char* k_account_labels = "outbox_account_labels";
constexpr const char* k_account_labels_sql =
    "SELECT id, parent_id, owner_id, currency FROM account WHERE id = ANY($1::bigint[])";

// How many accounts' labels the relay keeps; past this it starts over.
constexpr std::size_t k_account_labels_max = 1 << 20;

// How many rows the feed reads in its first query; each further query of one call reads twice as
// many, up to the second bound, until the page is full or `scan_max` events were looked at.
constexpr std::int64_t k_feed_rows_first = 1;
constexpr std::int64_t k_feed_rows_max = 64;

// An integer of a payload: the writer writes account ids as numbers and amounts as strings.
std::int64_t payload_integer(const boost::json::value& v, const char* what) {
  if (const auto* i = v.if_int64()) return *i;
  if (const auto* s = v.if_string()) {
    std::int64_t out = 0;
    const auto [end, error] = std::from_chars(s->data(), s->data() + s->size(), out);
    if (error == std::errc() && end == s->data() + s->size() && !s->empty()) return out;
  }
  throw unknown_value(std::string("outbox_event.payload: ") + what + " is not an integer");
}

const boost::json::value& payload_member(const boost::json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) throw unknown_value(std::string("outbox_event.payload: no ") + key);
  return *v;
}

// One transaction of a row as its payload names it, with its entries in payload order.
struct payload_transaction {
  std::string id;
  std::string type;
  std::string currency;
  std::vector<std::pair<ledger::account_id, ledger::amount_minor>> entries;
};

struct outbox_row {
  std::int64_t id = 0;
  std::int64_t feed_seq = 0;
  std::string created_at;
  std::vector<payload_transaction> transactions;
};

payload_transaction parse_transaction(const boost::json::value& v) {
  const auto* o = v.if_object();
  if (o == nullptr) throw unknown_value("outbox_event.payload: a transaction is not an object");
  payload_transaction t;
  t.id = std::string(payload_member(*o, "transactionId").get_string());
  // A type this build does not know was written by a newer server (a rolling upgrade): it is
  // passed on as written. Refusing it would stop the relay, the feed and the webhooks at that row
  // until every server runs the newer build.
  const std::string type(payload_member(*o, "type").get_string());
  const auto known = ledger::parse_transaction_type(type);
  t.type = known ? ledger::to_string(*known) : type;
  t.currency = std::string(payload_member(*o, "currency").get_string());
  if (const auto* entries = o->if_contains("entries"); entries != nullptr && !entries->is_null()) {
    const auto* list = entries->if_array();
    if (list == nullptr) throw unknown_value("outbox_event.payload: entries is not an array");
    for (const auto& e : *list) {
      const auto* entry = e.if_object();
      if (entry == nullptr) throw unknown_value("outbox_event.payload: an entry is not an object");
      const auto* account = entry->if_contains("accountId");
      const auto* amount = entry->if_contains("amount");
      if (account == nullptr || amount == nullptr) throw unknown_value("outbox_event.payload: an entry lacks a field");
      t.entries.emplace_back(payload_integer(*account, "accountId"), payload_integer(*amount, "amount"));
    }
  }
  return t;
}

std::vector<outbox_row> read_rows(const pqxx::result& result) {
  std::vector<outbox_row> rows;
  rows.reserve(result.size());
  boost::json::monotonic_resource memory;
  for (const auto& r : result) {
    outbox_row row;
    row.id = r[0].as<std::int64_t>();
    row.feed_seq = r[1].as<std::int64_t>();
    row.created_at = r[2].as<std::string>();
    const bool single = r[3].as<bool>();
    boost::json::error_code ec;
    const auto payload = boost::json::parse(boost::json::string_view(r[4].c_str(), r[4].size()), ec, &memory);
    if (ec) throw unknown_value("outbox_event.payload of row " + std::to_string(row.id) + " is not JSON");
    if (single) {
      row.transactions.push_back(parse_transaction(payload));
    } else {
      const auto* o = payload.if_object();
      const auto* list = o == nullptr ? nullptr : o->if_contains("transactions");
      if (list == nullptr || !list->is_array())
        throw unknown_value("outbox_event.payload of row " + std::to_string(row.id) + " has no transactions");
      for (const auto& t : list->get_array()) row.transactions.push_back(parse_transaction(t));
    }
    WALLET_ASSERT(row.transactions.size() <= static_cast<std::size_t>(k_events_per_row_max),
                  "an outbox row holds one batch at most");
    rows.push_back(std::move(row));
  }
  return rows;
}

// Reads the labels of the accounts `rows` name that `labels` lacks. An id the database does not
// know (only a hand-written row can name one) stays unknown.
void read_labels(pqxx::transaction_base& txn, const std::vector<outbox_row>& rows, account_labels& labels) {
  std::set<std::int64_t> named;
  for (const auto& row : rows)
    for (const auto& t : row.transactions)
      for (const auto& [account, amount] : t.entries) named.insert(account);
  std::set<std::int64_t> missing;
  for (const auto account : named)
    if (!labels.known.count(account)) missing.insert(account);
  if (missing.empty()) return;
  // Full: start again, and read every account these rows name (not only those missing before the
  // clear: the others are gone with it).
  if (labels.known.size() + missing.size() > k_account_labels_max) {
    labels.known.clear();
    missing = std::move(named);
  }
  const auto result =
      txn.exec_prepared(k_account_labels, pg_array(std::vector<std::int64_t>(missing.begin(), missing.end())));
  for (const auto& r : result) {
    account_label label;
    if (!r[1].is_null()) label.parent = r[1].as<std::int64_t>();
    if (!r[2].is_null()) label.owner = r[2].as<std::int64_t>();
    label.currency = r[3].as<std::string>();
    labels.known.emplace(r[0].as<std::int64_t>(), std::move(label));
  }
}

// The events of `rows` from position (after_seq, after_index) on, in feed order: one per
// transaction, each with the public accounts its entries name (a shard's entries count for its
// parent), summed per account, in the order its entries first name them.
std::vector<event_record> expand_rows(const std::vector<outbox_row>& rows, const account_labels& labels,
                                      std::int64_t after_seq = -1, std::int64_t after_index = -1) {
  std::vector<event_record> events;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.transactions.size(); ++i) {
      const auto index = static_cast<std::int64_t>(i);
      if (row.feed_seq < after_seq || (row.feed_seq == after_seq && index <= after_index)) continue;
      const auto& t = row.transactions[i];
      event_record e;
      e.outbox_id = row.id;
      e.cursor = event_cursor(row.feed_seq, index);
      e.transaction_id = t.id;
      e.type = t.type;
      e.currency = t.currency;
      e.created_at = row.created_at;
      for (const auto& [entry_account, amount] : t.entries) {
        const auto it = labels.known.find(entry_account);
        const account_label* label = it == labels.known.end() ? nullptr : &it->second;
        const auto account = label && label->parent ? *label->parent : entry_account;
        auto leg = std::find_if(e.legs.begin(), e.legs.end(), [&](const event_leg& l) { return l.account == account; });
        if (leg == e.legs.end()) {
          event_leg added;
          added.account = account;
          added.amount = amount;
          if (label) added.owner = label->owner;
          added.currency = label ? label->currency : t.currency;
          e.legs.push_back(std::move(added));
        } else {
          const auto sum = ledger::checked_add(leg->amount, amount);
          WALLET_ASSERT(sum.has_value(), "one transaction's entries on one account sum within int64");
          leg->amount = *sum;
        }
      }
      events.push_back(std::move(e));
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
  conn.prepare(k_rows_by_id, k_rows_by_id_sql);
  conn.prepare(k_feed_rows, k_feed_rows_sql);
  conn.prepare(k_account_labels, k_account_labels_sql);
  conn.prepare(k_prune, k_prune_sql);
  conn.prepare(k_pruned_through, k_pruned_through_sql);
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

std::vector<event_record> outbox_events(pqxx::transaction_base& txn, const std::vector<std::int64_t>& ids,
                                        account_labels& labels) {
  if (ids.empty()) return {};
  const auto rows = read_rows(txn.exec_prepared(k_rows_by_id, pg_array(ids)));
  read_labels(txn, rows, labels);
  return expand_rows(rows, labels);
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
  // One snapshot for the whole page: its statements (rows read 1, 2, 4 ... at a time, then the
  // prune record) see the feed as it was at one instant. Each with a snapshot of its own, a prune
  // committed between two of them would leave a gap inside the page that no 410 reports (a page
  // read from the start has no cursor to find expired).
  pqxx::transaction<pqxx::isolation_level::repeatable_read, pqxx::read_only> txn(conn);
  account_labels labels;
  events_page page;
  page.next = after;
  // Read after the rows: a prune commits its deletions and its record together, so rows read
  // with a gap in them are always followed by a record that covers the gap.
  auto finish = [&] {
    page.pruned_through = txn.exec_prepared1(k_pruned_through)[0].as<std::int64_t>();
    page.expired = after > 0 && after < page.pruned_through;
    return page;
  };
  std::int64_t position = after;
  std::int64_t scanned = 0;
  for (std::int64_t rows_wanted = k_feed_rows_first;; rows_wanted = std::min(rows_wanted * 2, k_feed_rows_max)) {
    const auto seq = position >> k_event_index_bits;
    const auto index = position & (k_events_per_row_max - 1);
    const auto rows = read_rows(txn.exec_prepared(k_feed_rows, seq, index, rows_wanted));
    read_labels(txn, rows, labels);
    const auto events = expand_rows(rows, labels, seq, index);
    for (const auto& e : events) {
      ++scanned;
      position = e.cursor;
      if (passes(e, filter)) page.events.push_back(e);
      if (static_cast<int>(page.events.size()) == limit || scanned >= scan_max) {
        page.next = position;
        page.more = true;
        return finish();
      }
    }
    page.next = position;
    // Fewer rows than asked for: the feed ends here (every row read has events after the cursor).
    if (static_cast<std::int64_t>(rows.size()) < rows_wanted) return finish();
  }
}

std::optional<outbox_prune> prune_outbox(pqxx::connection& conn, std::int64_t retention_days, int limit) {
  WALLET_ASSERT(retention_days > 0 && limit > 0, "a retention and a batch");
  pqxx::work txn(conn);
  if (!try_relay_lock(txn)) return std::nullopt;
  const auto row = txn.exec_prepared1(k_prune, retention_days, limit);
  outbox_prune out{row[0].as<std::int64_t>(), row[1].as<std::int64_t>()};
  txn.commit();
  return out;
}

}  // namespace persistence
