// Payment providers: an operator creates one (POST /v1/providers; its signing secret is shown once)
// and rotates its secret (POST /v1/providers/{name}/rotate-secret; the new one is shown once, and
// the old one verifies for a while more), and a provider delivers its events (POST
// /v1/provider-events), authenticated by their Wallet-Signature alone: HMAC-SHA256 over "t.body"
// with the provider's secret, compared in constant time, within 5 minutes of now. A request that
// does not verify is answered 401 bad_signature and leaves no trace.

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/signature.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

constexpr std::size_t k_provider_name_max = 40;
constexpr std::size_t k_event_id_max = 240;  // "event:" + id is the idempotency key (255 at most)
constexpr std::size_t k_payment_id_max = 255;

void create_provider(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"name"});
  auto name = f.string("name", k_provider_name_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  if (!ledger::is_valid_provider_name(name)) {
    return s.invalid(ex, "field \"name\" must be 1 to 40 of a-z, 0-9, '_' and '-', starting with a letter or digit");
  }
  // With the request's key: one revoked meanwhile on another server makes no signing secret.
  s.service.create_provider({who.id, ex->request_id, ex->key_hash}, name, new_signing_secret(),
                            [&s, ex, name](actors::query_result<std::optional<actors::provider_view>> r) {
                              if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                              if (!r.value) {
                                return s.fail(ex, ledger::error_code::conflict,
                                              "a provider named \"" + name + "\" exists already");
                              }
                              ex->respond(json_reply(201, provider_json(*r.value, true)));
                            });
}

// Every provider, without its secrets: {"providers": [...]}.
void list_providers(handler_support& s, const exchange_ptr& ex) {
  s.service.list_providers([&s, ex](actors::query_result<std::vector<actors::provider_view>> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    boost::json::array providers;
    for (const auto& p : r.value) providers.push_back(provider_json(p, false));
    boost::json::object o;
    o["providers"] = std::move(providers);
    ex->respond(json_reply(200, o));
  });
}

// {"previousSecretExpiresInSeconds"?}; an empty body is allowed. The new secret is shown once, here,
// and, with an Idempotency-Key, again to the same request under the key.
void rotate_secret(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& name) {
  const auto not_found = "provider \"" + name.substr(0, k_provider_name_max) + "\" was not found";
  if (!ledger::is_valid_provider_name(name)) return s.fail(ex, ledger::error_code::not_found, not_found);
  const auto previous_valid_s = previous_secret_window(s, ex);
  if (!previous_valid_s) return;
  std::optional<actors::replay_ticket<actors::provider_view>> replay;
  if (ex->has_idempotency_key) {
    const auto key = s.idempotency_key(ex);
    if (!key) return;
    replay = actors::replay_ticket<actors::provider_view>{
        *key, sha256_hex("provider.rotate_secret\n" + name + "\n" + std::to_string(*previous_valid_s)),
        [](const actors::provider_view& p) { return boost::json::serialize(provider_json(p, true)); }};
  }
  s.service.rotate_provider_secret(
      {who.id, ex->request_id, ex->key_hash}, name, new_signing_secret(), std::move(replay), *previous_valid_s,
      [&s, ex, name, not_found](actors::query_result<actors::provider_rotation_view> r) {
        if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
        if (r.value.replayed) return s.answer_replayed(ex, *r.value.replayed);
        switch (r.value.outcome) {
          case actors::provider_rotation_outcome::rotated: break;
          case actors::provider_rotation_outcome::no_provider:
            return s.fail(ex, ledger::error_code::not_found, not_found);
          case actors::provider_rotation_outcome::no_secret:
            return s.fail(ex, ledger::error_code::conflict,
                          "provider \"" + name + "\" sends no events, so it has no signing secret to rotate");
        }
        ex->respond(json_reply(200, provider_json(r.value.provider, true)));
      });
}

// Whether the header signs the body with the provider's secret, or with the one its last rotation
// replaced while that still verifies.
bool signed_by_provider(const actors::provider_view& p, const std::string& header, const std::string& body,
                        std::int64_t now) {
  if (verify_signature(header, p.signing_secret, body, now)) return true;
  return !p.previous_signing_secret.empty() && now < p.previous_secret_expires_unix &&
         verify_signature(header, p.previous_signing_secret, body, now);
}

void bad_signature(handler_support& s, const exchange_ptr& ex) {
  s.fail(ex, ledger::error_code::bad_signature,
         "sign the body as Wallet-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + \".\" + body)>, "
         "within 5 minutes of now, with the provider's signing secret");
}

// The event's fields, checked for its type; nullopt when answered (400) already.
std::optional<actors::provider_event_command> read_event(handler_support& s, const exchange_ptr& ex,
                                                         const json_fields& object) {
  field_reader f(object);
  f.allow_only({"provider", "eventId", "type", "paymentId", "accountId", "withdrawalId", "amount", "currency"});
  actors::provider_event_command cmd;
  cmd.provider = f.string("provider", k_provider_name_max);
  cmd.event_id = f.string("eventId", k_event_id_max);
  cmd.type = f.string("type", 32);
  cmd.payment_id = f.optional_string("paymentId", k_payment_id_max).value_or("");
  cmd.account = f.optional_int("accountId", 1, std::numeric_limits<std::int64_t>::max());
  cmd.withdrawal_id = f.optional_string("withdrawalId", 36).value_or("");
  cmd.amount = f.optional_amount("amount", s.settings.ledger.amount_minor_max);
  cmd.currency = f.optional_string("currency", 3).value_or("");
  if (!f.ok()) {
    s.invalid(ex, f.error());
    return std::nullopt;
  }
  auto need = [&](bool present, const char* field) {
    if (!present) s.invalid(ex, "an event of type \"" + cmd.type + "\" needs field \"" + field + "\"");
    return present;
  };
  if (cmd.event_id.empty()) return s.invalid(ex, "field \"eventId\" must not be empty"), std::nullopt;
  if (cmd.type == "payment.succeeded") {
    if (!need(cmd.account.has_value(), "accountId") || !need(cmd.amount.has_value(), "amount") ||
        !need(!cmd.payment_id.empty(), "paymentId") || !need(!cmd.currency.empty(), "currency")) {
      return std::nullopt;
    }
  } else if (cmd.type == "payment.refunded" || cmd.type == "chargeback.created") {
    if (!need(!cmd.payment_id.empty(), "paymentId")) return std::nullopt;
  } else if (cmd.type == "payout.paid" || cmd.type == "payout.failed") {
    if (!need(!cmd.withdrawal_id.empty(), "withdrawalId")) return std::nullopt;
    if (!is_valid_uuid(cmd.withdrawal_id)) return s.invalid(ex, "field \"withdrawalId\" must be a UUID"), std::nullopt;
    cmd.withdrawal_id = canonical_uuid(cmd.withdrawal_id);
  } else {
    s.invalid(ex,
              "field \"type\" must be one of: payment.succeeded, payment.refunded, payout.paid, payout.failed, "
              "chargeback.created");
    return std::nullopt;
  }
  if (!cmd.currency.empty() && !ledger::is_valid_currency(cmd.currency)) {
    s.invalid(ex, "field \"currency\" must be three upper-case letters (ISO 4217), e.g. EUR");
    return std::nullopt;
  }
  cmd.payload_json = ex->body;
  cmd.request_hash = sha256_hex(ex->body);
  cmd.request_id = ex->request_id;
  return cmd;
}

// {"eventId","transactionId","duplicate"}: the same for every delivery of the event.
void answer_event(handler_support& s, const exchange_ptr& ex, const std::string& event_id,
                  const actors::money_result& r) {
  // Cluster mode: an event that debits a wallet (a refund, a chargeback) is decided by the node
  // holding the wallet's partition; it goes there signed as it came, and is verified there again.
  if (s.forwardable(ex, r)) return s.forward(ex, r);
  if (r.outcome != ledger::error_code::ok) return s.fail(ex, r.outcome, r.detail, r.retry_after_s);
  boost::json::object o;
  o["eventId"] = event_id;
  const auto receipt = boost::json::parse(r.body);
  o["transactionId"] = receipt.as_object().at("transactionId");
  o["duplicate"] = r.replayed;
  ex->respond(json_reply(200, o));
}

// Only the body's JSON form and its "provider" (which names the secret) are read before the
// signature is checked: a request that does not verify is 401 whatever else its body holds, and
// says nothing of the fields an event needs.
void provider_event(handler_support& s, const exchange_ptr& ex) {
  if (ex->wallet_signature.empty()) return bad_signature(s, ex);
  auto object = s.body(ex);
  if (!object) return;
  const auto* provider = object->find("provider");
  if (provider == nullptr || provider->type != json_scalar::kind::string ||
      !ledger::is_valid_provider_name(provider->text)) {
    return bad_signature(s, ex);
  }
  const auto name = provider->text;
  // A provider this server has not read lately costs a database read: only within the client
  // address's allowance, as an API key it does not know does (a flood of made-up names is 429). An
  // event another node forwarded was checked there, and would otherwise spend the one allowance of
  // every forwarded request (as for keys, pipeline.cpp).
  if (!ex->forwarded && !s.service.provider_cached(name) && !s.within_unauthenticated_allowance(ex)) return;
  s.service.find_provider(name, [&s, ex, object = std::move(*object)](
                                    actors::query_result<std::optional<actors::provider_view>> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    const auto now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (!r.value || !signed_by_provider(*r.value, ex->wallet_signature, ex->body, now)) {
      return bad_signature(s, ex);
    }
    auto cmd = read_event(s, ex, object);
    if (!cmd) return;
    const auto event_id = cmd->event_id;
    s.service.provider_event(
        std::move(*cmd), [&s, ex, event_id](actors::money_result result) { answer_event(s, ex, event_id, result); });
  });
}

}  // namespace

void add_provider_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/providers", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { create_provider(s, ex, who); }});
  r.add({"GET", "/v1/providers", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal&, const path_params&) { list_providers(s, ex); }});
  r.add({"POST", "/v1/providers/{name}/rotate-secret", access::operator_, rate_class::read, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           rotate_secret(s, ex, who, p.text);
         }});
  r.add({"POST", "/v1/provider-events", access::provider, rate_class::none, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal&, const path_params&) { provider_event(s, ex); }});
}

}  // namespace api::handlers
