#pragma once

// Settlement reconciliation behind the facade (docs/settlements.md): imports of payment
// providers' settlement reports, and the exceptions they leave for operators to resolve. All of
// it runs on the reader pool; no money moves.
//
// An import holds one reader for as long as its report takes to match (seconds for 100,000
// lines), so a server runs one at a time: a second one, meanwhile, is answered "busy" at once
// rather than taking a second reader and a second report's worth of memory.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "actors/query_result.hpp"
#include "actors/views.hpp"
#include "config/settings.hpp"
#include "persistence/audit.hpp"

namespace actors {

class reader_pool;

class settlement_reports {
 public:
  settlement_reports(const config::settings& settings, std::shared_ptr<reader_pool> readers);

  // A report that is not one answers invalid_request with its first bad line, and nothing is
  // imported; server_busy while another import runs.
  void import(std::shared_ptr<const std::string> report, std::string imported_by,
              query_callback<settlement_import_view> done);
  // `status`: "open", "resolved", or empty for both.
  void list(const std::string& status, std::int64_t after, int limit, query_callback<settlement_exceptions_view> done);
  // nullopt: no such exception; conflict (with the exception as it is): resolved already, or an
  // import changed it since the operator saw it at `seen_import_id`.
  // `audit` is recorded in the resolution's transaction.
  void resolve(std::int64_t id, std::int64_t seen_import_id, std::string note, std::optional<std::string> owner,
               std::string resolved_by, persistence::audit_entry audit,
               query_callback<std::optional<settlement_exception_view>> done);

 private:
  const config::settings& settings_;
  std::shared_ptr<reader_pool> readers_;
  std::atomic<bool> importing_{false};
};

}  // namespace actors
