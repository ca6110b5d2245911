#include "actors/settlements.hpp"

#include <spdlog/spdlog.h>

#include "actors/reader_pool.hpp"
#include "base/assert.hpp"
#include "persistence/settlements.hpp"

namespace actors {
namespace {

settlement_import_view to_view(const persistence::settlement_import_summary& s) {
  settlement_import_view v;
  v.import_id = s.import_id;
  v.provider = s.provider;
  v.file_hash = s.file_hash;
  v.lines = s.lines;
  v.settled_from = s.settled_from;
  v.settled_to = s.settled_to;
  v.checked_from = s.checked_from;
  v.matched = s.matched;
  v.posted_not_settled = s.posted_not_settled;
  v.settled_not_posted = s.settled_not_posted;
  v.amount_mismatch = s.amount_mismatch;
  v.new_exceptions = s.new_exceptions;
  v.resolved_exceptions = s.resolved_exceptions;
  v.created_at = s.created_at;
  return v;
}

settlement_exception_view to_view(const persistence::settlement_exception_record& e) {
  settlement_exception_view v;
  v.id = e.id;
  v.import_id = e.import_id;
  v.kind = std::string(persistence::to_string(e.kind));
  v.provider = e.provider;
  v.payment_id = e.payment_id;
  v.type = std::string(ledger::to_string(e.type));
  v.ledger_amount = e.ledger_amount;
  v.report_amount = e.report_amount;
  v.currency = e.currency;
  v.report_currency = e.report_currency;
  v.transaction_id = e.transaction_id;
  v.settled_at = e.settled_at;
  v.owner = e.owner;
  v.status = std::string(persistence::to_string(e.status));
  v.note = e.note;
  v.resolved_by = e.resolved_by;
  v.resolved_at = e.resolved_at;
  v.created_at = e.created_at;
  return v;
}

}  // namespace

settlement_reports::settlement_reports(const config::settings& settings, std::shared_ptr<reader_pool> readers)
    : settings_(settings), readers_(std::move(readers)) {}

void settlement_reports::import(std::shared_ptr<const std::string> report, std::string imported_by,
                                query_callback<settlement_import_view> done) {
  WALLET_ASSERT(report != nullptr, "an import has a report");
  if (importing_.exchange(true)) {
    return done(
        {ledger::error_code::server_busy, "another settlement report is being imported; retry when it is done", {}});
  }
  persistence::settlement_import_options options;
  options.imported_by = std::move(imported_by);
  options.amount_minor_max = settings_.ledger.amount_minor_max;
  // The match runs while its request waits: it may take as long as that request's answer may.
  options.statement_timeout_ms = settings_.http.settlement_deadline_ms;
  readers_->read<persistence::settlement_import_outcome>(
      [report, options = std::move(options)](pqxx::connection& conn) {
        // The body is in memory already: it is one chunk, read by the parser line by line.
        bool given = false;
        const persistence::report_chunks next_chunk = [&given, &report]() -> std::string_view {
          if (given) return {};
          given = true;
          return *report;
        };
        return persistence::import_settlement_report(conn, next_chunk, options);
      },
      [this, done = std::move(done)](query_result<persistence::settlement_import_outcome> r) {
        importing_ = false;
        if (r.outcome != ledger::error_code::ok) return done({r.outcome, std::move(r.detail), {}});
        if (!r.value.error.empty()) return done({ledger::error_code::invalid_request, std::move(r.value.error), {}});
        const auto& s = r.value.summary;
        spdlog::info(
            "settlement import {} of {}: {} lines, {} matched, {} posted not settled, {} settled not posted, "
            "{} amount mismatches, {} new exceptions, {} resolved",
            s.import_id, s.provider, s.lines, s.matched, s.posted_not_settled, s.settled_not_posted, s.amount_mismatch,
            s.new_exceptions, s.resolved_exceptions);
        done({ledger::error_code::ok, {}, to_view(s)});
      });
}

void settlement_reports::list(const std::string& status, std::int64_t after, int limit,
                              query_callback<settlement_exceptions_view> done) {
  std::optional<persistence::settlement_exception_status> wanted;
  if (!status.empty()) {
    wanted = persistence::parse_settlement_exception_status(status);
    WALLET_ASSERT(wanted.has_value(), "the caller checked the status");
  }
  readers_->read<settlement_exceptions_view>(
      [wanted, after, limit](pqxx::connection& conn) {
        const auto page = persistence::list_settlement_exceptions(conn, wanted, after, limit);
        settlement_exceptions_view out;
        for (const auto& e : page.exceptions) out.exceptions.push_back(to_view(e));
        out.next_after = page.next_after;
        return out;
      },
      std::move(done));
}

void settlement_reports::resolve(std::int64_t id, std::int64_t seen_import_id, std::string note,
                                 std::optional<std::string> owner, std::string resolved_by,
                                 persistence::audit_entry audit,
                                 query_callback<std::optional<settlement_exception_view>> done) {
  readers_->read<persistence::settlement_resolution>(
      [id, seen_import_id, note = std::move(note), owner = std::move(owner), resolved_by = std::move(resolved_by),
       audit = std::move(audit)](pqxx::connection& conn) {
        return persistence::resolve_settlement_exception(conn, id, seen_import_id, note, owner, resolved_by, &audit);
      },
      [id, seen_import_id, done = std::move(done)](query_result<persistence::settlement_resolution> r) {
        if (r.outcome != ledger::error_code::ok) return done({r.outcome, std::move(r.detail), std::nullopt});
        using outcome = persistence::settlement_resolution::outcome;
        switch (r.value.result) {
          case outcome::not_found: return done({ledger::error_code::ok, {}, std::nullopt});
          case outcome::already_resolved:
            return done({ledger::error_code::conflict,
                         "settlement exception " + std::to_string(id) + " was resolved already, by " +
                             r.value.exception.resolved_by + " at " + r.value.exception.resolved_at,
                         to_view(r.value.exception)});
          case outcome::changed: {
            const auto& e = r.value.exception;
            return done({ledger::error_code::conflict,
                         "settlement exception " + std::to_string(id) + " was changed by import " +
                             std::to_string(e.import_id) + " since import " + std::to_string(seen_import_id) +
                             " (ledger amount " + (e.ledger_amount.empty() ? "none" : e.ledger_amount) +
                             ", report amount " + (e.report_amount.empty() ? "none" : e.report_amount) +
                             "); review it and resolve it with importId " + std::to_string(e.import_id),
                         to_view(e)});
          }
          case outcome::resolved:
            spdlog::info("settlement exception {} resolved by {}", id, r.value.exception.resolved_by);
            return done({ledger::error_code::ok, {}, to_view(r.value.exception)});
        }
      });
}

}  // namespace actors
