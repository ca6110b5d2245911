#include "persistence/database.hpp"

#include <pqxx/pqxx>

#include <charconv>
#include <string_view>
#include <system_error>

#include "base/assert.hpp"

#include "persistence/accounts.hpp"
#include "persistence/api_keys.hpp"
#include "persistence/audit.hpp"
#include "persistence/history.hpp"
#include "persistence/outbox.hpp"
#include "persistence/preload.hpp"
#include "persistence/principals.hpp"
#include "persistence/webhooks.hpp"

namespace persistence {
namespace {

constexpr const char* k_ping = "database_ping";
constexpr const char* k_ping_sql = "SELECT 1";

}  // namespace

std::unique_ptr<pqxx::connection> connect(const connection_options& options) {
  std::string conninfo = options.url;
  // URLs take parameters after '?'; key=value strings take them space-separated.
  const bool is_url = conninfo.rfind("postgres", 0) == 0 && conninfo.find("://") != std::string::npos;
  const std::int64_t connect_timeout_s = std::max<std::int64_t>(1, (options.connect_timeout_ms + 999) / 1000);
  // The session's timeouts travel in the startup packet (libpq's `options`), not as SET statements:
  // libpqxx 6 reconnects a connection whose server went away on its next statement, silently, and
  // a new session would have none of the SETs. With them in the connection string, every session
  // of this connection waits for a lock or runs a statement boundedly.
  const std::string session =
      "-c statement_timeout=" + std::to_string(options.statement_timeout_ms) +
      " -c lock_timeout=" + std::to_string(options.lock_timeout_ms) +
      " -c idle_in_transaction_session_timeout=" + std::to_string(options.statement_timeout_ms * 2);
  if (is_url) {
    std::string encoded;  // a URL's parameter: its spaces and '=' percent-encoded
    for (const char c : session) {
      if (c == ' ') {
        encoded += "%20";
      } else if (c == '=') {
        encoded += "%3D";
      } else {
        encoded += c;
      }
    }
    conninfo += (conninfo.find('?') == std::string::npos ? "?" : "&");
    conninfo += "connect_timeout=" + std::to_string(connect_timeout_s) +
                "&application_name=" + options.application_name + "&options=" + encoded;
  } else {
    conninfo += " connect_timeout=" + std::to_string(connect_timeout_s) +
                " application_name=" + options.application_name + " options='" + session + "'";
  }
  auto conn = std::make_unique<pqxx::connection>(conninfo);
  // Every connection gets the statements of the reads and administrative writes: whoever opened
  // it (reader pool, preload, bootstrap, wallet-admin, tests) may run any of them. Defining one
  // costs no round trip: libpqxx registers it with the server on its first use, so a connection
  // prepares only what it runs, once.
  conn->prepare(k_ping, k_ping_sql);
  prepare_principal_statements(*conn);
  prepare_account_statements(*conn);
  prepare_history_statements(*conn);
  prepare_preload_statements(*conn);
  prepare_api_key_statements(*conn);
  prepare_audit_statements(*conn);
  prepare_outbox_statements(*conn);
  prepare_webhook_statements(*conn);
  return conn;
}

void find_rows_by_key(pqxx::connection& conn) { conn.set_variable("enable_seqscan", "off"); }

bool ping(pqxx::connection& conn) {
  pqxx::nontransaction txn(conn);
  txn.exec_prepared(k_ping);
  return true;
}

// The array literals below carry a writer's whole batch (a thousand receipts, keys and ids): they
// are sized first and filled with bulk copies, not a character at a time.
namespace {

void append_integer(std::string& out, std::int64_t value) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  WALLET_ASSERT(ec == std::errc{}, "an int64 fits in 24 characters");
  out.append(digits, end);
}

}  // namespace

std::string pg_array(const std::vector<std::int64_t>& values) {
  std::string out;
  out.reserve(2 + values.size() * 8);
  out += '{';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    append_integer(out, values[i]);
  }
  out += '}';
  return out;
}

std::string pg_array(const std::vector<std::optional<std::int64_t>>& values) {
  std::string out;
  out.reserve(2 + values.size() * 8);
  out += '{';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (values[i]) {
      append_integer(out, *values[i]);
    } else {
      out += "NULL";
    }
  }
  out += '}';
  return out;
}

std::string pg_array(const std::vector<std::string>& values) {
  std::size_t size = 2;
  for (const auto& v : values) size += v.size() + 3;
  pg_text_array out;
  out.reserve(size + size / 8);
  for (const auto& v : values) out.add(v);
  return out.take();
}

void pg_text_array::add(std::string_view value) {
  if (count_++ > 0) text_ += ',';
  text_ += '"';
  // Each element quoted, with its quotes and backslashes escaped: the runs between them are
  // copied whole.
  std::size_t from = 0;
  for (auto at = value.find_first_of("\"\\"); at != std::string_view::npos; at = value.find_first_of("\"\\", from)) {
    text_.append(value.substr(from, at - from));
    text_ += '\\';
    text_ += value[at];
    from = at + 1;
  }
  text_.append(value.substr(from));
  text_ += '"';
}

std::string pg_text_array::take() {
  text_ += '}';
  std::string out = std::move(text_);
  text_ = "{";
  count_ = 0;
  return out;
}

bool is_retryable_sqlstate(const std::string& sqlstate) { return sqlstate == "40001" || sqlstate == "40P01"; }

bool is_timeout_sqlstate(const std::string& sqlstate) { return sqlstate == "55P03" || sqlstate == "57014"; }

}  // namespace persistence
