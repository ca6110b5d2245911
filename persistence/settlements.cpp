#include "persistence/settlements.hpp"

#include <openssl/evp.h>
#include <pqxx/pqxx>

#include <memory>
#include <stdexcept>
#include <tuple>

#include "base/assert.hpp"
#include "ledger/settlement_report.hpp"
#include "persistence/database.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

std::string utc(const std::string& column) {
  return "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

// Microseconds since the epoch ($n, a bigint) as a timestamptz, exactly (no floating point).
std::string from_us(const std::string& parameter) {
  return "(timestamptz 'epoch' + " + parameter + "::bigint * interval '1 microsecond')";
}

// --- The import's scratch tables ---------------------------------------------------------------

// The report's lines, as the parser passed them (the provider is the import's, one per report).
// Emptied at each commit or rollback, so a connection keeps one and reuses it.
constexpr const char* k_create_lines_sql =
    "CREATE TEMP TABLE IF NOT EXISTS settlement_report_line ("
    "  payment_id TEXT NOT NULL, type TEXT NOT NULL, amount BIGINT NOT NULL, currency TEXT NOT NULL,"
    "  settled_us BIGINT NOT NULL"
    ") ON COMMIT DELETE ROWS";
constexpr const char* k_lines_table = "settlement_report_line";

// The ledger side: every transaction of the provider's types posted within the widened range, with
// what it moved on the provider's clearing accounts (and their shards), and whether it was posted
// within the period the report covers; and the settledAt of the line an earlier import paired it
// with (NULL: none).
constexpr const char* k_create_posted_sql =
    "CREATE TEMP TABLE IF NOT EXISTS settlement_posted ("
    "  transaction_id UUID NOT NULL, type TEXT NOT NULL, payment_id TEXT, amount BIGINT NOT NULL,"
    "  currency TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL, in_period BOOLEAN NOT NULL, paired_us BIGINT"
    ") ON COMMIT DELETE ROWS";

// One row per (payment id, type) of either side: the lines paired exactly, and what is left on
// each side, with its kind of difference (NULL: none).
constexpr const char* k_create_compare_sql =
    "CREATE TEMP TABLE IF NOT EXISTS settlement_compare ("
    "  kind TEXT, payment_id TEXT, type TEXT NOT NULL, ledger_amount NUMERIC, ledger_currency TEXT,"
    "  transaction_id UUID, report_amount NUMERIC, report_currency TEXT, report_lines BIGINT NOT NULL,"
    "  paired_lines BIGINT NOT NULL, settled_at TIMESTAMPTZ"
    ") ON COMMIT DELETE ROWS";

// One row per report line paired exactly with a ledger transaction: what an open exception must
// find of itself before an import resolves it, and what settlement_pairing keeps.
constexpr const char* k_create_paired_sql =
    "CREATE TEMP TABLE IF NOT EXISTS settlement_paired ("
    "  transaction_id UUID NOT NULL, payment_id TEXT NOT NULL, type TEXT NOT NULL, amount BIGINT NOT NULL,"
    "  settled_us BIGINT NOT NULL"
    ") ON COMMIT DELETE ROWS";

// Statistics for the planner of the match (a temporary table has none by itself).
constexpr const char* k_analyze_lines_sql = "ANALYZE pg_temp.settlement_report_line";
constexpr const char* k_analyze_posted_sql = "ANALYZE pg_temp.settlement_posted";
constexpr const char* k_analyze_compare_sql = "ANALYZE pg_temp.settlement_compare";
constexpr const char* k_analyze_paired_sql = "ANALYZE pg_temp.settlement_paired";

// The resolution of matched keys joins the comparison with the open exceptions, two sets that may
// each hold tens of thousands of rows. Right after an import added them, the exceptions' index
// still claims none (autovacuum has not analyzed it yet, and the application role may not), and
// the planner chose a nested loop that scanned the comparison once per exception: 845 s for the
// second import of a 100,000-line report. Without nested loops it hashes, whatever the estimates.
constexpr const char* k_no_nested_loops_sql = "SET LOCAL enable_nestloop = off";
constexpr const char* k_nested_loops_sql = "SET LOCAL enable_nestloop TO DEFAULT";

// --- Statements ------------------------------------------------------------------------------

constexpr const char* k_provider_exists = "settlement_provider_exists";
constexpr const char* k_provider_exists_sql = "SELECT 1 FROM provider WHERE name = $1";

// Imports of one provider take turns until their transactions end.
constexpr const char* k_lock_provider = "settlement_lock_provider";
constexpr const char* k_lock_provider_sql = "SELECT pg_advisory_xact_lock(hashtext('settlement:' || $1))";

// Where the period the report covers begins ($1 the provider, $2 its earliest settledAt, $3 the
// margin; microseconds): where the provider's latest report before it ended, when that is at most
// the margin earlier, so that consecutive reports leave no gap; else at its earliest settledAt.
constexpr const char* k_period_start = "settlement_period_start";
const std::string k_period_start_sql =
    "SELECT COALESCE((SELECT (extract(epoch FROM max(settled_to)) * 1000000)::bigint FROM settlement_import"
    "                  WHERE provider = $1 AND settled_to < " +
    from_us("$2") + "                    AND settled_to >= " + from_us("$2") +
    " - $3::bigint * interval '1 microsecond'), $2)";

// The ledger side ($1 the provider; $2 and $3 the report's earliest and latest settledAt, $4 the
// margin around them, $5 the start of its period; microseconds).
constexpr const char* k_fill_posted = "settlement_fill_posted";
const std::string k_fill_posted_sql =
    "INSERT INTO pg_temp.settlement_posted (transaction_id, type, payment_id, amount, currency, created_at, in_period,"
    "                                       paired_us)"
    " WITH clearing AS ("
    "   SELECT id FROM account WHERE system_role = 'clearing:' || $1"
    "   UNION ALL"
    "   SELECT s.id FROM account s JOIN account c ON s.parent_id = c.id WHERE c.system_role = 'clearing:' || $1"
    " )"
    " SELECT t.id, t.type, t.metadata ->> 'paymentId', abs(sum(e.amount))::bigint, min(e.currency), t.created_at,"
    "        t.created_at BETWEEN " +
    from_us("$5") + " AND " + from_us("$3") +
    ",       (SELECT sp.settled_us FROM settlement_pairing sp WHERE sp.transaction_id = t.id)"
    "   FROM journal_transaction t"
    "  CROSS JOIN LATERAL (SELECT e.amount, e.currency, e.account_id FROM ledger_entry e WHERE " +
    entries_of_sql("e", "t") +
    " OFFSET 0) e"
    "  WHERE t.metadata ->> 'provider' = $1"
    "    AND t.type IN ('DEPOSIT', 'DEPOSIT_REFUND', 'CHARGEBACK', 'PAYOUT')"
    "    AND t.created_at >= " +
    from_us("$2") +
    " - $4::bigint * interval '1 microsecond'"
    "    AND t.created_at <= " +
    from_us("$3") +
    " + $4::bigint * interval '1 microsecond'"
    "    AND e.account_id IN (SELECT id FROM clearing)"
    "  GROUP BY t.id";

// The match. Report lines pair with ledger transactions of the same payment id, type, amount and
// currency, one to one (so that two refunds of one payment, reported one at a time, each find
// theirs). A transaction an earlier import paired (settlement_pairing) pairs only with a line of
// the same key and the same settledAt, the line that settled it (the same report imported again,
// or one that overlaps it): it is in `slot` settledAt, which other lines do not enter, so a line
// the provider lists again in a later report is left over, and a later line of the same amount
// finds the transaction no report has settled yet. One already settled by a line this report does
// not hold is left out. What is left of a key is a difference: on both sides, an amount mismatch;
// in the report only, settled but not posted; in the ledger only, posted but not settled, if it was
// posted within the report's period (before it, a report of its own settled it; the margin only
// lets late settlements find their transaction). A transaction without a payment id pairs with
// nothing. The pairs themselves are kept too (settlement_paired).
constexpr const char* k_match = "settlement_match";
const std::string k_match_sql =
    "WITH line_keys AS ("
    "   SELECT DISTINCT payment_id, type, amount, currency, settled_us FROM pg_temp.settlement_report_line"
    " ), settled_before AS ("
    "   SELECT DISTINCT payment_id, type, amount, currency, paired_us FROM pg_temp.settlement_posted"
    "    WHERE paired_us IS NOT NULL AND payment_id IS NOT NULL"
    " ), ledger_n AS ("
    "   SELECT p.*, p.paired_us AS slot,"
    "          row_number() OVER (PARTITION BY p.payment_id, p.type, p.amount, p.currency, p.paired_us"
    "                             ORDER BY p.created_at, p.transaction_id) AS n"
    "     FROM pg_temp.settlement_posted p"
    "     LEFT JOIN line_keys k ON p.paired_us IS NOT NULL AND k.payment_id = p.payment_id AND k.type = p.type"
    "      AND k.amount = p.amount AND k.currency = p.currency AND k.settled_us = p.paired_us"
    "    WHERE p.payment_id IS NOT NULL AND (p.paired_us IS NULL OR k.settled_us IS NOT NULL)"
    " ), report_n AS ("
    "   SELECT r.*, b.paired_us AS slot,"
    "          row_number() OVER (PARTITION BY r.payment_id, r.type, r.amount, r.currency, b.paired_us"
    "                             ORDER BY r.settled_us) AS n"
    "     FROM pg_temp.settlement_report_line r"
    "     LEFT JOIN settled_before b ON b.payment_id = r.payment_id AND b.type = r.type AND b.amount = r.amount"
    "      AND b.currency = r.currency AND b.paired_us = r.settled_us"
    " ), pairs AS ("
    "   SELECT COALESCE(l.payment_id, r.payment_id) AS payment_id, COALESCE(l.type, r.type) AS type,"
    "          l.transaction_id, l.amount AS l_amount, l.currency AS l_currency, l.created_at, l.in_period,"
    "          r.amount AS r_amount, r.currency AS r_currency, r.settled_us"
    "     FROM ledger_n l FULL JOIN report_n r"
    "       ON r.payment_id = l.payment_id AND r.type = l.type AND r.amount = l.amount AND r.currency = l.currency"
    "      AND r.slot IS NOT DISTINCT FROM l.slot AND r.n = l.n"
    " ), paired AS ("
    "   INSERT INTO pg_temp.settlement_paired (transaction_id, payment_id, type, amount, settled_us)"
    "   SELECT transaction_id, payment_id, type, l_amount, settled_us FROM pairs"
    "    WHERE transaction_id IS NOT NULL AND r_amount IS NOT NULL"
    " ), keys AS ("
    "   SELECT payment_id, type,"
    "          count(*) FILTER (WHERE transaction_id IS NOT NULL AND r_amount IS NOT NULL) AS paired,"
    "          count(*) FILTER (WHERE r_amount IS NULL) AS l_left_n,"
    "          sum(l_amount) FILTER (WHERE r_amount IS NULL) AS l_left,"
    "          sum(l_amount) FILTER (WHERE r_amount IS NULL AND in_period) AS l_left_in_period,"
    "          min(l_currency) FILTER (WHERE r_amount IS NULL) AS l_currency,"
    "          (array_agg(transaction_id ORDER BY created_at, transaction_id)"
    "             FILTER (WHERE r_amount IS NULL))[1] AS l_first,"
    "          (array_agg(transaction_id ORDER BY created_at, transaction_id)"
    "             FILTER (WHERE r_amount IS NULL AND in_period))[1] AS l_first_in_period,"
    "          count(*) FILTER (WHERE transaction_id IS NULL) AS r_left_n,"
    "          sum(r_amount) FILTER (WHERE transaction_id IS NULL) AS r_left,"
    "          min(r_currency) FILTER (WHERE transaction_id IS NULL) AS r_currency,"
    "          max(settled_us) FILTER (WHERE transaction_id IS NULL) AS r_settled_us"
    "     FROM pairs GROUP BY payment_id, type"
    " ), compared AS ("
    "   SELECT CASE WHEN r_left_n > 0 AND l_left_n > 0 THEN 'amount_mismatch'"
    "               WHEN r_left_n > 0 THEN 'settled_not_posted'"
    "               WHEN l_left_in_period IS NOT NULL THEN 'posted_not_settled'"
    "          END AS kind, *"
    "     FROM keys"
    " )"
    " INSERT INTO pg_temp.settlement_compare (kind, payment_id, type, ledger_amount, ledger_currency, transaction_id,"
    "                                         report_amount, report_currency, report_lines, paired_lines, settled_at)"
    " SELECT kind, payment_id, type, CASE WHEN r_left_n > 0 THEN l_left ELSE l_left_in_period END, l_currency,"
    "        CASE WHEN r_left_n > 0 THEN l_first ELSE l_first_in_period END, r_left, r_currency, r_left_n, paired,"
    "        " +
    from_us("r_settled_us") +
    "   FROM compared WHERE kind IS NOT NULL OR paired > 0"
    " UNION ALL"
    " SELECT 'posted_not_settled', NULL, type, amount, currency, transaction_id, NULL, NULL, 0, 0, NULL"
    "   FROM pg_temp.settlement_posted WHERE payment_id IS NULL AND in_period";

constexpr const char* k_match_counts = "settlement_match_counts";
constexpr const char* k_match_counts_sql =
    "SELECT count(*) FILTER (WHERE kind = 'posted_not_settled'), count(*) FILTER (WHERE kind = 'settled_not_posted'),"
    "       count(*) FILTER (WHERE kind = 'amount_mismatch'), COALESCE(sum(paired_lines), 0)::bigint"
    "  FROM pg_temp.settlement_compare";

// The pairs of import $1, kept for the imports after it; a transaction paired again (the same
// report imported again) keeps its first pair.
constexpr const char* k_keep_pairs = "settlement_keep_pairs";
constexpr const char* k_keep_pairs_sql =
    "INSERT INTO settlement_pairing (transaction_id, settled_us, import_id)"
    " SELECT transaction_id, settled_us, $1 FROM pg_temp.settlement_paired"
    " ON CONFLICT (transaction_id) DO NOTHING";

constexpr const char* k_next_import_id = "settlement_next_import_id";
constexpr const char* k_next_import_id_sql = "SELECT nextval('settlement_import_id_seq')";

// Open exceptions of the keys the report matched without a difference ($1 the provider) are
// resolved by the import ($2 the note, $3 who): a later report settled what an earlier one missed,
// or corrected it. Only when the report paired what the exception is about: its transaction, or
// for a settlement the ledger had not posted, a line of its amount. A key is also clean when the
// report settles another transaction of it (a second refund of one payment) and the one an
// exception names lies before the report's period: that exception stays open. Uncorrelated IN
// lists, which PostgreSQL hashes once, rather than a subquery per open exception.
constexpr const char* k_resolve_matched = "settlement_resolve_matched";
constexpr const char* k_resolve_matched_sql =
    "UPDATE settlement_exception x SET status = 'resolved', note = $2, resolved_by = $3, resolved_at = now()"
    "  FROM pg_temp.settlement_compare c"
    " WHERE c.kind IS NULL AND x.status = 'open' AND x.provider = $1"
    "   AND COALESCE(x.payment_id, x.transaction_id::text) = c.payment_id AND x.type = c.type"
    "   AND (x.transaction_id IN (SELECT transaction_id FROM pg_temp.settlement_paired)"
    "        OR (x.transaction_id IS NULL AND (x.payment_id, x.type, x.report_amount) IN"
    "              (SELECT payment_id, type, amount::numeric FROM pg_temp.settlement_paired)))";

// Open exceptions whose own transaction this report paired ($1 the provider, $2 the note, $3 who),
// although their key still has a difference: a refund settled late, while the report leaves the
// next refund of the payment unpaired. That one's difference then gets an exception of its own
// (the insert below, which the open exception would otherwise block).
constexpr const char* k_resolve_paired = "settlement_resolve_paired";
constexpr const char* k_resolve_paired_sql =
    "UPDATE settlement_exception x SET status = 'resolved', note = $2, resolved_by = $3, resolved_at = now()"
    " WHERE x.status = 'open' AND x.provider = $1"
    "   AND x.transaction_id IN (SELECT transaction_id FROM pg_temp.settlement_paired)";

// An open exception that import $2 finds again ($1 the provider) as the same difference with
// other amounts shows what this import found: an amount mismatch or a payment not settled of the
// same payment and the same first unpaired transaction, whose sums this report puts otherwise (a
// report that corrects an amount only in part). Its id, owner and creation stay; its importId
// becomes this import's. Only those: a difference of the key about another transaction (an
// unsettled first refund, while this report leaves a second one unpaired) is not the one the
// exception is about, and stays as it is (the insert below adds none for it while it is open);
// nor is a settlement the ledger has not posted, whose exception is resolved by a line of its own
// amount (k_resolve_matched_sql), which a sum of other lines must not replace.
constexpr const char* k_update_open = "settlement_update_open";
constexpr const char* k_update_open_sql =
    "UPDATE settlement_exception x"
    "   SET import_id = $2, ledger_amount = c.ledger_amount, report_amount = c.report_amount,"
    "       currency = COALESCE(c.ledger_currency, c.report_currency), report_currency = c.report_currency,"
    "       settled_at = c.settled_at"
    "  FROM pg_temp.settlement_compare c"
    " WHERE c.kind IN ('amount_mismatch', 'posted_not_settled') AND x.status = 'open' AND x.provider = $1"
    "   AND x.kind = c.kind AND x.type = c.type AND x.payment_id = c.payment_id"
    "   AND x.transaction_id = c.transaction_id"
    "   AND (x.ledger_amount, x.report_amount, x.currency, x.report_currency, x.settled_at)"
    "       IS DISTINCT FROM (c.ledger_amount, c.report_amount, COALESCE(c.ledger_currency, c.report_currency),"
    "                         c.report_currency, c.settled_at)";

// The differences of import $1 not already open ($2 the provider, $3 their first owner). The
// open-key index refuses a second open exception of a key and kind: that one is skipped.
constexpr const char* k_insert_exceptions = "settlement_insert_exceptions";
constexpr const char* k_insert_exceptions_sql =
    "INSERT INTO settlement_exception (import_id, kind, provider, payment_id, type, ledger_amount, report_amount,"
    "                                  currency, report_currency, transaction_id, settled_at, owner)"
    " SELECT $1, kind, $2, payment_id, type, ledger_amount, report_amount, COALESCE(ledger_currency, report_currency),"
    "        report_currency, transaction_id, settled_at, $3"
    "   FROM pg_temp.settlement_compare WHERE kind IS NOT NULL"
    "  ORDER BY kind, payment_id, type, transaction_id"
    " ON CONFLICT DO NOTHING";

constexpr const char* k_insert_import = "settlement_insert_import";
const std::string k_insert_import_sql =
    "INSERT INTO settlement_import (id, provider, file_hash, lines, settled_from, settled_to, checked_from, matched,"
    "                               posted_not_settled, settled_not_posted, amount_mismatch, new_exceptions,"
    "                               resolved_exceptions, imported_by)"
    " VALUES ($1, $2, $3, $4, " +
    from_us("$5") + ", " + from_us("$6") + ", " + from_us("$7") +
    ", $8, $9, $10, $11, $12, $13, $14)"
    " RETURNING " +
    utc("settled_from") + ", " + utc("settled_to") + ", " + utc("checked_from") + ", " + utc("created_at");

// The columns of an exception, in the order read_exception reads them.
const std::string k_exception_columns_sql =
    "id, import_id, kind, provider, payment_id, type, ledger_amount::text, report_amount::text, currency,"
    " report_currency, transaction_id::text, " +
    utc("settled_at") + ", owner, status, note, resolved_by, " + utc("resolved_at") + ", " + utc("created_at");

constexpr const char* k_list_all = "settlement_list_all";
const std::string k_list_all_sql =
    "SELECT " + k_exception_columns_sql + " FROM settlement_exception WHERE id > $1 ORDER BY id LIMIT $2";

constexpr const char* k_list_by_status = "settlement_list_by_status";
const std::string k_list_by_status_sql =
    "SELECT " + k_exception_columns_sql +
    " FROM settlement_exception WHERE status = $3 AND id > $1 ORDER BY id LIMIT $2";

// $3 empty: the owner stays. $5: the import_id the operator saw (an import that changes an open
// exception's amounts gives it its own, k_update_open_sql); a row that waited for an import's lock
// is checked again as that import left it.
constexpr const char* k_resolve = "settlement_resolve";
const std::string k_resolve_sql =
    "UPDATE settlement_exception SET status = 'resolved', note = $2, owner = COALESCE(NULLIF($3, ''), owner),"
    "       resolved_by = $4, resolved_at = now()"
    " WHERE id = $1 AND status = 'open' AND import_id = $5 RETURNING " +
    k_exception_columns_sql;

constexpr const char* k_find_exception = "settlement_find_exception";
const std::string k_find_exception_sql =
    "SELECT " + k_exception_columns_sql + " FROM settlement_exception WHERE id = $1";

// Defining a statement libpqxx already knows, with the same text, does nothing; each function
// calls this first, so any connection (a reader's, wallet-admin's, a test's) can run them.
void prepare_statements(pqxx::connection& conn) {
  const std::pair<const char*, std::string> statements[] = {
      {k_provider_exists, k_provider_exists_sql},
      {k_lock_provider, k_lock_provider_sql},
      {k_period_start, k_period_start_sql},
      {k_fill_posted, k_fill_posted_sql},
      {k_match, k_match_sql},
      {k_match_counts, k_match_counts_sql},
      {k_next_import_id, k_next_import_id_sql},
      {k_resolve_matched, k_resolve_matched_sql},
      {k_resolve_paired, k_resolve_paired_sql},
      {k_update_open, k_update_open_sql},
      {k_insert_exceptions, k_insert_exceptions_sql},
      {k_insert_import, k_insert_import_sql},
      {k_keep_pairs, k_keep_pairs_sql},
      {k_list_all, k_list_all_sql},
      {k_list_by_status, k_list_by_status_sql},
      {k_resolve, k_resolve_sql},
      {k_find_exception, k_find_exception_sql},
  };
  for (const auto& [name, sql] : statements) conn.prepare(name, sql);
}

std::string text_or_empty(const pqxx::field& f) { return f.is_null() ? std::string() : f.as<std::string>(); }

std::optional<settlement_exception_kind> parse_kind(std::string_view text) {
  for (auto k : {settlement_exception_kind::posted_not_settled, settlement_exception_kind::settled_not_posted,
                 settlement_exception_kind::amount_mismatch}) {
    if (to_string(k) == text) return k;
  }
  return std::nullopt;
}

settlement_exception_record read_exception(const pqxx::row& row) {
  settlement_exception_record e;
  e.id = row[0].as<std::int64_t>();
  e.import_id = row[1].as<std::int64_t>();
  e.kind = parse_column(parse_kind, row[2].as<std::string>(), "settlement_exception.kind");
  e.provider = row[3].as<std::string>();
  e.payment_id = text_or_empty(row[4]);
  e.type = parse_column(ledger::parse_transaction_type, row[5].as<std::string>(), "settlement_exception.type");
  e.ledger_amount = text_or_empty(row[6]);
  e.report_amount = text_or_empty(row[7]);
  e.currency = row[8].as<std::string>();
  e.report_currency = text_or_empty(row[9]);
  e.transaction_id = text_or_empty(row[10]);
  e.settled_at = text_or_empty(row[11]);
  e.owner = text_or_empty(row[12]);
  e.status = parse_column(parse_settlement_exception_status, row[13].as<std::string>(), "settlement_exception.status");
  e.note = text_or_empty(row[14]);
  e.resolved_by = text_or_empty(row[15]);
  e.resolved_at = text_or_empty(row[16]);
  e.created_at = row[17].as<std::string>();
  return e;
}

// SHA-256 over the chunks of a report, as they pass.
class sha256 {
 public:
  sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw std::runtime_error("SHA-256 is unavailable");
  }
  void update(std::string_view bytes) {
    if (EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()) != 1) throw std::runtime_error("SHA-256 failed");
  }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), digest, &size) != 1) throw std::runtime_error("SHA-256 failed");
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < size; ++i) {
      out += k_hex[digest[i] >> 4];
      out += k_hex[digest[i] & 0xf];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

}  // namespace

std::string_view to_string(settlement_exception_kind k) {
  switch (k) {
    case settlement_exception_kind::posted_not_settled: return "posted_not_settled";
    case settlement_exception_kind::settled_not_posted: return "settled_not_posted";
    case settlement_exception_kind::amount_mismatch: return "amount_mismatch";
  }
  return "amount_mismatch";
}

std::string_view to_string(settlement_exception_status s) {
  switch (s) {
    case settlement_exception_status::open: return "open";
    case settlement_exception_status::resolved: return "resolved";
  }
  return "open";
}

std::optional<settlement_exception_status> parse_settlement_exception_status(std::string_view text) {
  if (text == "open") return settlement_exception_status::open;
  if (text == "resolved") return settlement_exception_status::resolved;
  return std::nullopt;
}

settlement_import_outcome import_settlement_report(pqxx::connection& conn, const report_chunks& next_chunk,
                                                   const settlement_import_options& options) {
  WALLET_ASSERT(options.amount_minor_max > 0 && options.lines_max > 0, "an import needs its bounds");
  WALLET_ASSERT(!options.imported_by.empty(), "an import names who made it");
  prepare_statements(conn);
  pqxx::work txn(conn);
  if (options.statement_timeout_ms > 0) {
    txn.exec("SET LOCAL statement_timeout = " + std::to_string(options.statement_timeout_ms));
  }
  txn.exec(k_create_lines_sql);
  txn.exec(k_create_posted_sql);
  txn.exec(k_create_compare_sql);
  txn.exec(k_create_paired_sql);

  // The report streams into the scratch table as the parser passes each line: the only copy of
  // a line outside the caller's chunk is the COPY buffer of libpq.
  ledger::settlement_report_parser parser(options.amount_minor_max, options.lines_max);
  sha256 hash;
  bool read = true;
  {
    pqxx::stream_to copy(txn, k_lines_table,
                         std::vector<std::string>{"payment_id", "type", "amount", "currency", "settled_us"});
    const std::function<void(const ledger::settlement_line&)> write = [&copy](const ledger::settlement_line& l) {
      copy << std::make_tuple(std::string(l.payment_id), std::string(ledger::to_string(l.type)), l.amount,
                              std::string(l.currency), l.settled_at_us);
    };
    for (auto chunk = next_chunk(); read && !chunk.empty(); chunk = next_chunk()) {
      hash.update(chunk);
      read = parser.feed(chunk, write);
    }
    read = read && parser.finish(write);
    copy.complete();
  }
  settlement_import_outcome out;
  if (!read) {
    out.error = parser.error();
    out.error_line = parser.error_line();
    txn.abort();
    return out;
  }
  const std::string provider = parser.provider();
  if (txn.exec_prepared(k_provider_exists, provider).empty()) {
    out.error = "line 2: provider \"" + provider + "\" is not known to this ledger";
    out.error_line = 2;
    txn.abort();
    return out;
  }
  txn.exec_prepared(k_lock_provider, provider);
  const auto from_us = parser.settled_from_us();
  const auto to_us = parser.settled_to_us();
  const auto checked_from_us =
      txn.exec_prepared1(k_period_start, provider, from_us, k_settlement_match_margin_us)[0].as<std::int64_t>();
  WALLET_ASSERT(checked_from_us <= from_us, "a report's period begins at its first settlement at the latest");
  txn.exec_prepared0(k_fill_posted, provider, from_us, to_us, k_settlement_match_margin_us, checked_from_us);
  txn.exec(k_analyze_lines_sql);
  txn.exec(k_analyze_posted_sql);
  txn.exec_prepared0(k_match);

  auto& s = out.summary;
  const auto counts = txn.exec_prepared1(k_match_counts);
  s.posted_not_settled = counts[0].as<std::int64_t>();
  s.settled_not_posted = counts[1].as<std::int64_t>();
  s.amount_mismatch = counts[2].as<std::int64_t>();
  s.matched = counts[3].as<std::int64_t>();
  s.import_id = txn.exec_prepared1(k_next_import_id)[0].as<std::int64_t>();
  s.provider = provider;
  s.lines = parser.lines();
  s.file_hash = hash.hex();
  const auto resolver = "settlement import " + std::to_string(s.import_id) + " (" + options.imported_by + ")";
  txn.exec(k_analyze_compare_sql);
  txn.exec(k_analyze_paired_sql);
  txn.exec(k_no_nested_loops_sql);
  const auto note = "matched by settlement import " + std::to_string(s.import_id) + " of " + provider;
  s.resolved_exceptions =
      static_cast<std::int64_t>(txn.exec_prepared0(k_resolve_matched, provider, note, resolver).affected_rows() +
                                txn.exec_prepared0(k_resolve_paired, provider, note, resolver).affected_rows());
  txn.exec_prepared0(k_update_open, provider, s.import_id);
  txn.exec(k_nested_loops_sql);
  s.new_exceptions = static_cast<std::int64_t>(
      txn.exec_prepared0(k_insert_exceptions, s.import_id, provider, options.imported_by).affected_rows());
  WALLET_ASSERT(s.new_exceptions <= s.posted_not_settled + s.settled_not_posted + s.amount_mismatch,
                "an import adds no more exceptions than it found");
  WALLET_ASSERT(s.matched <= s.lines, "no more lines match than the report has");
  const auto row = txn.exec_prepared1(k_insert_import, s.import_id, provider, s.file_hash, s.lines, from_us, to_us,
                                      checked_from_us, s.matched, s.posted_not_settled, s.settled_not_posted,
                                      s.amount_mismatch, s.new_exceptions, s.resolved_exceptions, options.imported_by);
  s.settled_from = row[0].as<std::string>();
  s.settled_to = row[1].as<std::string>();
  s.checked_from = row[2].as<std::string>();
  s.created_at = row[3].as<std::string>();
  txn.exec_prepared0(k_keep_pairs, s.import_id);
  txn.commit();
  return out;
}

settlement_exceptions_page list_settlement_exceptions(pqxx::connection& conn,
                                                      std::optional<settlement_exception_status> status,
                                                      std::int64_t after, int limit) {
  WALLET_ASSERT(limit > 0, "a page holds at least one exception");
  prepare_statements(conn);
  pqxx::read_transaction txn(conn);
  // One row more than the page: whether there is a next page, without a second query.
  const auto rows = status ? txn.exec_prepared(k_list_by_status, after, limit + 1, std::string(to_string(*status)))
                           : txn.exec_prepared(k_list_all, after, limit + 1);
  settlement_exceptions_page page;
  for (const auto& row : rows) {
    if (static_cast<int>(page.exceptions.size()) == limit) {
      page.next_after = page.exceptions.back().id;
      break;
    }
    page.exceptions.push_back(read_exception(row));
  }
  return page;
}

settlement_resolution resolve_settlement_exception(pqxx::connection& conn, std::int64_t id, std::int64_t seen_import_id,
                                                   const std::string& note, const std::optional<std::string>& owner,
                                                   const std::string& resolved_by, const audit_entry* audit) {
  WALLET_ASSERT(!note.empty() && !resolved_by.empty(), "a resolution says why and who");
  prepare_statements(conn);
  pqxx::work txn(conn);
  settlement_resolution out;
  const auto updated = txn.exec_prepared(k_resolve, id, note, owner.value_or(""), resolved_by, seen_import_id);
  if (!updated.empty()) {
    out.result = settlement_resolution::outcome::resolved;
    out.exception = read_exception(updated[0]);
    if (audit != nullptr) append_audit(txn, *audit);
    txn.commit();
    return out;
  }
  // Not open: resolved already (by whoever got there first), or no such exception; or open with
  // the amounts of a later import.
  const auto found = txn.exec_prepared(k_find_exception, id);
  txn.commit();
  if (found.empty()) return out;
  out.exception = read_exception(found[0]);
  out.result = out.exception.status == settlement_exception_status::open
                   ? settlement_resolution::outcome::changed
                   : settlement_resolution::outcome::already_resolved;
  return out;
}

}  // namespace persistence
