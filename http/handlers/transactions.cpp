// GET /v1/transactions/{id}: a journal transaction and its entries, for an operator or a
// principal it concerns (the entries of other parties' accounts show no balance).
// POST /v1/transactions/lookup: many transactions at once, for an operator (a load test's or a
// payday's verification), read in a bounded few queries and shown as the single read shows each.

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/problem.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

void get_transaction(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& id) {
  if (!is_valid_uuid(id)) return s.fail(ex, ledger::error_code::not_found, "transaction " + id + " was not found");
  s.service.find_transaction(id, [&s, ex, who, id](actors::query_result<std::optional<actors::transaction_view>> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    if (!r.value || !r.value->visible_to(who.id, who.role)) {
      return s.fail(ex, ledger::error_code::not_found, "transaction " + id + " was not found");
    }
    ex->respond(json_reply(200, transaction_json(*r.value, who.id, who.role)));
  });
}

// --- POST /v1/transactions/lookup ---------------------------------------------------------------

// Largest id of a lookup body, in bytes (a quoted UUID, its comma and some spacing): the route's
// body limit is this times ledger.lookup_ids_max.
constexpr std::int64_t k_lookup_id_bytes_max = 64;

// A 400 invalid_request naming the id at fault by its `index`, besides the sentence.
void invalid_id(const exchange_ptr& ex, std::size_t index, const std::string& detail) {
  auto rep = problem_reply(
      http_problem(400, "invalid_request", "Invalid request", "ids[" + std::to_string(index) + "] " + detail),
      ex->request_id);
  rep.body.insert(rep.body.rfind('}'), ",\"index\":" + std::to_string(index));
  ex->respond(std::move(rep));
}

std::string lower_case(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The body is {"ids": [...]}: 1 to ledger.lookup_ids_max UUIDs, each once (upper or lower case;
// the same id twice, in any case, is refused: an answer holds each transaction once).
void lookup_transactions(handler_support& s, const exchange_ptr& ex, const principal& who) {
  if (!is_json_media_type(ex->content_type)) {
    return s.fail(ex, http_problem(415, "unsupported_media_type", "Unsupported media type",
                                   "send the body as Content-Type: application/json"));
  }
  boost::json::error_code ec;
  const auto body = boost::json::parse(ex->body, ec);
  if (ec || !body.is_object()) return s.invalid(ex, "the request body must be a JSON object {\"ids\": [...]}");
  if (auto twice = duplicate_key(ex->body)) {
    return s.invalid(ex, "field \"" + *twice + "\" appears more than once in one object");
  }
  const auto& object = body.as_object();
  for (const auto& field : object) {
    if (field.key() != "ids") return s.invalid(ex, "field \"" + std::string(field.key()) + "\" is not allowed here");
  }
  const auto* ids = object.if_contains("ids");
  if (ids == nullptr || !ids->is_array() || ids->as_array().empty()) {
    return s.invalid(ex, "ids is required: an array of one transaction id (a UUID) at least");
  }
  const auto& items = ids->as_array();
  const auto max = s.settings.ledger.lookup_ids_max;
  if (static_cast<std::int64_t>(items.size()) > max) {
    return s.fail(ex, http_problem(400, "lookup_too_large", "Lookup too large",
                                   "a lookup names at most " + std::to_string(max) +
                                       " transactions (ledger.lookup_ids_max), this one " +
                                       std::to_string(items.size()) + "; split it into several lookups"));
  }
  std::vector<std::string> asked;   // as sent, for `missing`
  std::vector<std::string> wanted;  // lower case, as the database writes them
  std::unordered_map<std::string, std::size_t> first_at;
  asked.reserve(items.size());
  wanted.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string() || !is_valid_uuid(items[i].as_string())) {
      return invalid_id(ex, i, "must be a transaction id: a UUID such as 0190f3c4-5b6a-7c8d-9e0f-a1b2c3d4e5f6");
    }
    asked.emplace_back(items[i].as_string());
    auto id = lower_case(asked.back());
    if (const auto [it, fresh] = first_at.emplace(id, i); !fresh) {
      return invalid_id(ex, i, "repeats ids[" + std::to_string(it->second) + "]: name each transaction once");
    }
    wanted.push_back(std::move(id));
  }
  s.service.lookup_transactions(wanted, [&s, ex, who, asked = std::move(asked),
                                         wanted](actors::query_result<std::vector<actors::transaction_view>> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    std::unordered_map<std::string, const actors::transaction_view*> found;
    for (const auto& t : r.value) found.emplace(t.id, &t);
    boost::json::array transactions;
    boost::json::array missing;
    for (std::size_t i = 0; i < wanted.size(); ++i) {
      const auto it = found.find(wanted[i]);
      if (it == found.end()) {
        missing.emplace_back(asked[i]);
      } else {
        transactions.emplace_back(transaction_json(*it->second, who.id, who.role));
      }
    }
    boost::json::object answer;
    answer["transactions"] = std::move(transactions);
    answer["missing"] = std::move(missing);
    ex->respond(json_reply(200, answer));
  });
}

}  // namespace

void add_transaction_routes(router& r, handler_support& s) {
  r.add({"GET", "/v1/transactions/{id}", access::principal, rate_class::read, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           get_transaction(s, ex, who, p.text);
         }});
  // One request however many ids it names: the reads are few and bounded by the limit.
  route lookup{
      "POST",
      "/v1/transactions/lookup",
      access::operator_,
      rate_class::read,
      param_kind::integer,
      false,
      [&s](const exchange_ptr& ex, const principal& who, const path_params&) { lookup_transactions(s, ex, who); }};
  lookup.body_bytes_max =
      std::max(s.settings.http.body_bytes_max, k_lookup_id_bytes_max * s.settings.ledger.lookup_ids_max);
  r.add(std::move(lookup));
}

}  // namespace api::handlers
