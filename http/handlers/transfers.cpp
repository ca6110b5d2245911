// POST /v1/transfers: a principal pays from its own account into another user account.
// POST /v1/transfers/batch: many such payments in one request (payday), atomic or each on its own.
// Idempotent by the Idempotency-Key; answered after COMMIT.

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/url.hpp"
#include "ledger/money.hpp"

namespace api::handlers {
namespace {

void transfer(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto key = s.idempotency_key(ex);
  if (!key) return;
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"fromAccountId", "toAccountId", "amount"});
  actors::transfer_command cmd;
  cmd.from = f.id("fromAccountId");
  cmd.to = f.id("toAccountId");
  cmd.amount = f.amount("amount", s.settings.ledger.amount_minor_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  if (cmd.from == cmd.to) return s.fail(ex, ledger::error_code::same_account, "an account cannot pay itself");
  cmd.principal = who.id;
  cmd.idempotency_key = std::move(*key);
  cmd.request_id = ex->request_id;
  std::string canonical = "transfer\n";
  canonical.reserve(96);  // three numbers of at most 19 digits: one allocation
  canonical.append(std::to_string(cmd.from)).append("\n").append(std::to_string(cmd.to)).append("\n");
  canonical.append(std::to_string(cmd.amount));
  cmd.request_hash = sha256_hex(canonical);
  s.service.transfer(std::move(cmd),
                     [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

// --- POST /v1/transfers/batch -------------------------------------------------------------------
// The body nests (an array of objects), so it is read with boost::json rather than the flat
// reader; numbers are taken only as integers (never through a double), as the flat reader does.

// Largest item of a batch body, in bytes: the route's body limit is this times
// ledger.batch_transfers_max. Three 19-digit integers with their names and JSON's punctuation
// take about 110 bytes; a reference of 200 bytes takes up to 1,200 written as JSON escapes
// ("\u0001" is six characters for one byte), and the rest is room for spacing.
constexpr std::int64_t k_batch_item_bytes_max = 1'400;
constexpr std::size_t k_reference_length_max = 200;
// An Idempotency-Key longer than this is digested before it makes the keys of items 1 and on, so
// that "batch/<index>/" fits before the 255 characters a key may have (item 0 takes the key itself).
constexpr std::size_t k_item_key_base_max = 240;

// What a batch item's integer is: an id (any positive int64, as field_reader::id reads it) or an
// amount in minor units (a JSON integer at most 2^53-1, as field_reader::amount reads it).
enum class batch_number { id, amount };

// A positive id or amount: a JSON integer, or a string of digits, of at most `max`. 0: refused, with
// `error` saying why.
std::int64_t batch_integer(const boost::json::value* v, const std::string& name, batch_number what, std::int64_t max,
                           std::string& error) {
  std::optional<std::int64_t> value;
  if (v == nullptr) {
    error = name + " is required";
    return 0;
  }
  if (v->is_int64()) value = v->as_int64();
  if (v->is_uint64() && v->as_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    value = static_cast<std::int64_t>(v->as_uint64());
  }
  if (v->is_int64() || v->is_uint64()) {
    if (what == batch_number::amount && value && *value > ledger::json_safe_integer_max) value.reset();
  } else if (v->is_string()) {
    value = ledger::parse_digits(std::string(v->as_string()));
  }
  if (!value || *value <= 0 || *value > max) {
    error = what == batch_number::id
                ? name + " must be a positive integer id (a JSON integer or a string of digits)"
                : name +
                      " must be a positive integer (a JSON integer up to 2^53-1, or a string of digits) of at most " +
                      std::to_string(max);
    return 0;
  }
  return *value;
}

void answer_batch(handler_support& s, const exchange_ptr& ex, const principal& who, const actors::money_result& r) {
  // A batch refused because another node holds a payer's partition goes to that node, whole.
  if (r.outcome == ledger::error_code::ok || !r.item_index || s.forwardable(ex, r)) {
    return s.answer_money(ex, who.id, r);
  }
  if (r.outcome == ledger::error_code::not_found) s.count_unknown_account(ex, who.id);
  // The problem names the item that decided it: its `index`, besides the sentence.
  auto rep = problem_reply(problem_for(r.outcome, r.detail, r.retry_after_s), ex->request_id);
  rep.body.insert(rep.body.rfind('}'), ",\"index\":" + std::to_string(*r.item_index));
  ex->respond(std::move(rep));
}

void transfer_batch(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto key = s.idempotency_key(ex);
  if (!key) return;
  if (!is_json_media_type(ex->content_type)) {
    return s.fail(ex, http_problem(415, "unsupported_media_type", "Unsupported media type",
                                   "send the body as Content-Type: application/json"));
  }
  boost::json::error_code ec;
  const auto body = boost::json::parse(ex->body, ec);
  if (ec || !body.is_object()) {
    return s.invalid(ex, "the request body must be a JSON object {\"atomic\": bool, \"transfers\": [...]}");
  }
  if (auto twice = duplicate_key(ex->body)) {
    return s.invalid(ex, "field \"" + *twice + "\" appears more than once in one object");
  }
  const auto& object = body.as_object();
  for (const auto& field : object) {
    if (field.key() != "atomic" && field.key() != "transfers") {
      return s.invalid(ex, "field \"" + std::string(field.key()) + "\" is not allowed here");
    }
  }
  const auto* atomic = object.if_contains("atomic");
  if (atomic == nullptr || !atomic->is_bool()) return s.invalid(ex, "atomic is required: true or false");
  const auto* transfers = object.if_contains("transfers");
  if (transfers == nullptr || !transfers->is_array() || transfers->as_array().empty()) {
    return s.invalid(ex, "transfers is required: an array of one transfer at least");
  }
  const auto& items = transfers->as_array();
  const auto max = s.settings.ledger.batch_transfers_max;
  if (static_cast<std::int64_t>(items.size()) > max) {
    return s.fail(ex, http_problem(400, "batch_too_large", "Batch too large",
                                   "a batch holds at most " + std::to_string(max) + " transfers, this one " +
                                       std::to_string(items.size()) + "; split it into several batches"));
  }
  actors::transfer_batch_command cmd;
  cmd.atomic = atomic->as_bool();
  std::string canonical = std::string("transfer-batch\n") + (cmd.atomic ? "atomic" : "each") + "\n";
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string at = "transfers[" + std::to_string(i) + "]";
    if (!items[i].is_object()) return s.invalid(ex, at + " must be an object");
    const auto& o = items[i].as_object();
    for (const auto& field : o) {
      const auto k = field.key();
      if (k != "fromAccountId" && k != "toAccountId" && k != "amount" && k != "reference") {
        return s.invalid(ex, "field \"" + std::string(k) + "\" is not allowed in " + at);
      }
    }
    std::string error;
    actors::transfer_batch_item item;
    item.from =
        batch_integer(o.if_contains("fromAccountId"), at + ".fromAccountId", batch_number::id, INT64_MAX, error);
    if (error.empty())
      item.to = batch_integer(o.if_contains("toAccountId"), at + ".toAccountId", batch_number::id, INT64_MAX, error);
    if (error.empty()) {
      item.amount = batch_integer(o.if_contains("amount"), at + ".amount", batch_number::amount,
                                  s.settings.ledger.amount_minor_max, error);
    }
    if (!error.empty()) return s.invalid(ex, error);
    if (const auto* ref = o.if_contains("reference"); ref != nullptr && !ref->is_null()) {
      if (!ref->is_string() || ref->as_string().size() > k_reference_length_max ||
          ref->as_string().find('\0') != boost::json::string::npos) {
        return s.invalid(ex, at + ".reference must be a string of at most " + std::to_string(k_reference_length_max) +
                                 " bytes of UTF-8, without NUL");
      }
      item.reference = std::string(ref->as_string());
    }
    canonical += std::to_string(item.from) + "\n" + std::to_string(item.to) + "\n" + std::to_string(item.amount) +
                 "\n" + sha256_hex(item.reference) + "\n";
    cmd.items.push_back(std::move(item));
  }
  cmd.principal = who.id;
  cmd.idempotency_key = *key;
  cmd.item_key_base = key->size() <= k_item_key_base_max ? *key : "sha256:" + sha256_hex(*key);
  cmd.request_id = ex->request_id;
  cmd.request_hash = sha256_hex(canonical);
  s.service.transfer_batch(std::move(cmd), [&s, ex, who](actors::money_result r) { answer_batch(s, ex, who, r); });
}

}  // namespace

void add_transfer_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/transfers", access::principal, rate_class::write, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { transfer(s, ex, who); }});
  // A batch reads a body as large as its items, and its items commit in one or few transactions.
  route batch{"POST",
              "/v1/transfers/batch",
              access::principal,
              rate_class::write,
              param_kind::integer,
              true,
              [&s](const exchange_ptr& ex, const principal& who, const path_params&) { transfer_batch(s, ex, who); }};
  batch.body_bytes_max =
      std::max(s.settings.http.body_bytes_max, k_batch_item_bytes_max * s.settings.ledger.batch_transfers_max);
  batch.deadline_ms = std::max<std::int64_t>(s.settings.http.request_deadline_ms, 30'000);
  r.add(std::move(batch));
}

}  // namespace api::handlers
