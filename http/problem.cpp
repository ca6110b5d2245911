#include "http/problem.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace api {

problem problem_for(ledger::error_code code, std::string detail, std::int64_t retry_after_s) {
  using ledger::error_code;
  problem p;
  p.code = std::string(ledger::to_string(code));
  p.detail = std::move(detail);
  switch (code) {
    case error_code::ok:
      p.status = 200;
      p.title = "OK";
      break;
    case error_code::invalid_request:
      p.status = 400;
      p.title = "Invalid request";
      break;
    case error_code::unauthorized:
      p.status = 401;
      p.title = "Unauthorized";
      break;
    case error_code::forbidden:
      p.status = 403;
      p.title = "Forbidden";
      break;
    case error_code::not_found:
      p.status = 404;
      p.title = "Not found";
      break;
    case error_code::conflict:
      p.status = 409;
      p.title = "Conflict";
      break;
    case error_code::insufficient_funds:
      p.status = 422;
      p.title = "Insufficient funds";
      break;
    case error_code::account_inactive:
      p.status = 422;
      p.title = "Account inactive";
      break;
    case error_code::currency_mismatch:
      p.status = 422;
      p.title = "Currency mismatch";
      break;
    case error_code::same_account:
      p.status = 422;
      p.title = "Same account";
      break;
    case error_code::idempotency_key_reused:
      p.status = 422;
      p.title = "Idempotency key reused";
      break;
    case error_code::refund_exceeds_payment:
      p.status = 422;
      p.title = "Refund exceeds payment";
      break;
    case error_code::unknown_account:
      p.status = 422;
      p.title = "Unknown account";
      break;
    case error_code::unknown_withdrawal:
      p.status = 422;
      p.title = "Unknown withdrawal";
      break;
    case error_code::unknown_payment:
      p.status = 422;
      p.title = "Unknown payment";
      break;
    case error_code::bad_signature:
      p.status = 401;
      p.title = "Bad signature";
      break;
    case error_code::already_settled:
      p.status = 409;
      p.title = "Already settled";
      break;
    case error_code::already_charged_back:
      p.status = 409;
      p.title = "Already charged back";
      break;
    // Corrections and currencies (docs/corrections.md).
    case error_code::already_reversed:
      p.status = 409;
      p.title = "Already reversed";
      break;
    case error_code::already_refunded:
      p.status = 409;
      p.title = "Already refunded";
      break;
    case error_code::already_decided:
      p.status = 409;
      p.title = "Already decided";
      break;
    case error_code::not_reversible:
      p.status = 422;
      p.title = "Not reversible";
      break;
    case error_code::same_approver:
      p.status = 403;
      p.title = "Same approver";
      break;
    case error_code::quote_expired:
      p.status = 422;
      p.title = "Quote expired";
      break;
    case error_code::amount_too_small:
      p.status = 422;
      p.title = "Amount too small";
      break;
    case error_code::rate_not_found:
      p.status = 422;
      p.title = "Rate not found";
      break;
    case error_code::already_captured:
      p.status = 409;
      p.title = "Already captured";
      break;
    case error_code::hold_voided:
      p.status = 409;
      p.title = "Hold voided";
      break;
    case error_code::hold_expired:
      p.status = 422;
      p.title = "Hold expired";
      break;
    case error_code::hold_exceeds_available:
      p.status = 422;
      p.title = "Hold exceeds available";
      break;
    case error_code::account_closed:
      p.status = 409;
      p.title = "Account closed";
      break;
    case error_code::account_not_empty:
      p.status = 409;
      p.title = "Account not empty";
      break;
    case error_code::fees_changed:
      p.status = 503;
      p.title = "Fees changed";
      break;
    case error_code::server_busy:
      p.status = 503;
      p.title = "Server busy";
      break;
    case error_code::account_busy:
      p.status = 503;
      p.title = "Account busy";
      break;
    case error_code::writer_busy:
      p.status = 503;
      p.title = "Ledger writer busy";
      break;
    case error_code::not_partition_owner:
      p.status = 503;
      p.title = "Not this node's account";
      break;
    case error_code::database_unavailable:
      p.status = 503;
      p.title = "Database unavailable";
      break;
    case error_code::outcome_unknown:
      p.status = 503;
      p.title = "Outcome unknown";
      break;
    case error_code::deadline_exceeded:
      p.status = 503;
      p.title = "Deadline exceeded";
      break;
    case error_code::internal:
      p.status = 500;
      p.title = "Internal error";
      break;
  }
  // Every 503 tells the client when to come back.
  p.retry_after_s = p.status == 503 ? std::max<std::int64_t>(1, retry_after_s) : retry_after_s;
  return p;
}

problem http_problem(int status, std::string code, std::string title, std::string detail, std::int64_t retry_after_s) {
  return problem{status, std::move(code), std::move(title), std::move(detail), retry_after_s};
}

std::string problem_json(const problem& p, std::string_view request_id) {
  boost::json::object o;
  o["type"] = "about:blank";
  o["title"] = p.title;
  o["status"] = p.status;
  o["code"] = p.code;
  o["detail"] = p.detail;
  o["requestId"] = request_id;
  return boost::json::serialize(o);
}

}  // namespace api
