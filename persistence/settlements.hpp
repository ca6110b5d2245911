#pragma once

// Settlement reconciliation (migration 006, docs/settlements.md): a provider's settlement report
// matched against the journal transactions of its clearing accounts, the differences kept as
// exceptions, and their resolution by an operator.
//
// An import is one database transaction: the report streams, line by line as the parser checks
// it, into a temporary table (COPY); one statement then matches it against the ledger, and the
// exceptions and the import's own row are written. A bad line rolls everything back, so a report
// is imported whole or not at all. Imports of one provider take turns (an advisory lock), so
// their counts of new exceptions never interleave.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/money.hpp"
#include "ledger/types.hpp"
#include "persistence/audit.hpp"
#include "persistence/pqxx_fwd.hpp"

namespace persistence {

// The most settlement lines one report may hold.
inline constexpr std::int64_t k_settlement_lines_max = 5'000'000;
// The ledger transactions a report's lines may match: those posted from a day before its earliest
// settledAt to a day after its latest. Only those posted within the period it covers count as
// posted but not settled when it does not name them: up to its latest settledAt, from its earliest
// one, or from where the provider's report before it ended when that is less than a day earlier
// (consecutive reports leave no gap, and do not check each other's transactions).
inline constexpr std::int64_t k_settlement_match_margin_us = 86'400'000'000;

enum class settlement_exception_kind : std::uint8_t { posted_not_settled, settled_not_posted, amount_mismatch };
enum class settlement_exception_status : std::uint8_t { open, resolved };
std::string_view to_string(settlement_exception_kind k);
std::string_view to_string(settlement_exception_status s);
std::optional<settlement_exception_status> parse_settlement_exception_status(std::string_view text);

// The report's text, chunk after chunk; an empty view ends it.
using report_chunks = std::function<std::string_view()>;

struct settlement_import_options {
  std::string imported_by;  // e.g. "operator 7"; also the new exceptions' owner
  ledger::amount_minor amount_minor_max = 0;
  std::int64_t lines_max = k_settlement_lines_max;
  std::int64_t statement_timeout_ms = 0;  // 0: the connection's own
};

struct settlement_import_summary {
  std::int64_t import_id = 0;
  std::string provider;
  std::string file_hash;  // SHA-256 of the report's bytes, hexadecimal
  std::int64_t lines = 0;
  std::string settled_from;  // the earliest settledAt, UTC
  std::string settled_to;    // the latest
  std::string checked_from;  // the start of the period checked for posted but not settled
  std::int64_t matched = 0;  // lines paired with a transaction of the same payment id, type, amount and currency
  // Differences found, each once per (payment id, type), whether or not already open from before.
  std::int64_t posted_not_settled = 0;
  std::int64_t settled_not_posted = 0;
  std::int64_t amount_mismatch = 0;
  std::int64_t new_exceptions = 0;       // of those, the ones not already open
  std::int64_t resolved_exceptions = 0;  // open exceptions of keys this report matched, now resolved
  std::string created_at;
};

struct settlement_import_outcome {
  // Empty: imported. Otherwise what is wrong with the report ("line 7: ..."), and nothing was written.
  std::string error;
  std::int64_t error_line = 0;
  settlement_import_summary summary;
};

// Imports a report: reads it through `next_chunk`, matches it, records the import and the new
// exceptions, in one transaction. Throws on database errors (nothing is written then either).
settlement_import_outcome import_settlement_report(pqxx::connection& conn, const report_chunks& next_chunk,
                                                   const settlement_import_options& options);

struct settlement_exception_record {
  std::int64_t id = 0;
  std::int64_t import_id = 0;
  settlement_exception_kind kind = settlement_exception_kind::posted_not_settled;
  std::string provider;
  std::string payment_id;  // empty: the ledger transaction has none
  ledger::transaction_type type = ledger::transaction_type::deposit;
  std::string ledger_amount;  // a sum of minor units, digits; empty when the ledger has none
  std::string report_amount;  // empty when the report has none
  std::string currency;
  std::string report_currency;  // empty when the report has none
  std::string transaction_id;   // the ledger's first transaction of the key; empty when none
  std::string settled_at;       // the report's latest settledAt of the key; empty when none
  std::string owner;            // empty: none
  settlement_exception_status status = settlement_exception_status::open;
  std::string note;         // empty while open
  std::string resolved_by;  // empty while open
  std::string resolved_at;  // empty while open
  std::string created_at;
};

struct settlement_exceptions_page {
  std::vector<settlement_exception_record> exceptions;
  std::optional<std::int64_t> next_after;  // pass as `after` for the next page
};

// Exceptions with id > `after`, in id order, at most `limit` (> 0); of one status, or of both.
settlement_exceptions_page list_settlement_exceptions(pqxx::connection& conn,
                                                      std::optional<settlement_exception_status> status,
                                                      std::int64_t after, int limit);

struct settlement_resolution {
  // changed: still open, but an import changed it since the operator saw it (another import_id).
  enum class outcome : std::uint8_t { resolved, not_found, already_resolved, changed };
  outcome result = outcome::not_found;
  settlement_exception_record exception;  // as it is now (when found)
};

// Resolves an open exception once: the note, who and when are kept on the row, and the owner
// replaced when one is given. A resolved exception is never changed again. `seen_import_id` is
// the import_id of the exception as the operator reviewed it: an import that changed its amounts
// since gave it another, and it is then left open (outcome changed), since the note speaks of
// amounts it no longer has.
// `audit`, when given, is recorded in the same transaction when the exception is resolved.
settlement_resolution resolve_settlement_exception(pqxx::connection& conn, std::int64_t id, std::int64_t seen_import_id,
                                                   const std::string& note, const std::optional<std::string>& owner,
                                                   const std::string& resolved_by, const audit_entry* audit = nullptr);

}  // namespace persistence
