// Currency exchange (EXCHANGE): an operator sets rates, an owner takes a quote, and the quote is
// exchanged once, before it expires: wallet A pays the amount to the `fx` account of A's currency,
// and the `fx` account of B's currency (which may go negative: the platform's currency position)
// pays the converted amount to wallet B. Each currency sums to zero on its own. The rate is an
// exact decimal (ledger/fx.hpp), never a float; the converted amount is rounded down. The debit of
// wallet A goes through its actor. The writer checks the quote under its row lock (unused, not
// expired by the database's clock) and marks it used in the posting's transaction, so a quote is
// exchanged once however many requests race; a request for a used quote is answered with the
// receipt of the exchange that used it.

#include <random>

#include "actors/account_cache.hpp"
#include "actors/keys_audit.hpp"
#include "actors/money_flows.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "ledger/flows.hpp"
#include "ledger/fx.hpp"
#include "persistence/accounts.hpp"
#include "persistence/corrections.hpp"

namespace actors {
namespace {

fx_quote_view to_view(const persistence::fx_quote_record& q) {
  return fx_quote_view{q.id,   q.from_account, q.to_account,  q.from_currency, q.to_currency,
                       q.rate, q.source,       q.from_amount, q.to_amount,     q.expires_at};
}

std::string quote_not_found(const std::string& id) { return "quote " + id + " was not found"; }

// The receipt of the exchange that used a quote, as a replay. Decided before any writer: the
// request's own Idempotency-Key is still looked up (money_flows::settle), so a key used for another
// request is 422 idempotency_key_reused rather than this receipt.
money_result used_quote_answer(std::optional<std::pair<int, std::string>> receipt, const std::string& id) {
  if (!receipt) return refusal(ledger::error_code::internal, "the exchange of quote " + id + " has no receipt");
  money_result r;
  r.replayed = true;
  r.decided_before_writer = true;
  r.status = receipt->first;
  r.body = std::move(receipt->second);
  return r;
}

}  // namespace

void money_flows::set_fx_rate(fx_rate_command command, query_callback<fx_rate_view> done) {
  persistence::fx_rate_record rate{command.base, command.quote, command.rate, command.source, {}};
  auto audit = audit_entry_for({command.principal, command.request_id}, "fx.rate_set",
                               "fx_rate:" + command.base + "/" + command.quote,
                               json_members({{"rate", command.rate}, {"source", command.source}}));
  const auto by = command.principal;
  core_.readers->read<fx_rate_view>(
      [rate, by, audit](pqxx::connection& conn) {
        auto r = persistence::put_fx_rate(conn, rate, by, audit);
        return fx_rate_view{r.base, r.quote, r.rate, r.source, r.updated_at};
      },
      std::move(done));
}

void money_flows::quote_fx(fx_quote_command command, query_callback<fx_quote_view> done) {
  auto fail = [done](ledger::error_code code, std::string detail) {
    query_result<fx_quote_view> r;
    r.outcome = code;
    r.detail = std::move(detail);
    done(std::move(r));
  };
  const auto from = command.from;
  accounts_.facts(from, [this, command, done, fail](ledger::error_code code, std::optional<account_facts> a) {
    if (code != ledger::error_code::ok) return fail(code, "the database is unavailable");
    auto mine = [principal = command.principal](const std::optional<account_facts>& f) {
      return f && f->kind == ledger::account_kind::user && f->owner_id == principal;
    };
    if (!mine(a)) {
      return fail(ledger::error_code::not_found,
                  "account " + std::to_string(command.from) + " (fromAccountId) was not found");
    }
    accounts_.facts(
        command.to, [this, command, done, fail, a = *a, mine](ledger::error_code code, std::optional<account_facts> b) {
          if (code != ledger::error_code::ok) return fail(code, "the database is unavailable");
          if (!mine(b)) {
            return fail(ledger::error_code::not_found,
                        "account " + std::to_string(command.to) + " (toAccountId) was not found");
          }
          if (a.currency == b->currency) {
            return fail(ledger::error_code::invalid_request,
                        "both accounts hold " + a.currency + "; an exchange converts between two currencies");
          }
          struct made {
            ledger::error_code outcome = ledger::error_code::ok;
            std::string detail;
            std::optional<persistence::fx_quote_record> quote;
          };
          persistence::fx_quote_record q;
          q.id = make_transaction_id();
          q.principal = command.principal;
          q.from_account = a.id;
          q.to_account = b->id;
          q.from_currency = a.currency;
          q.to_currency = b->currency;
          q.from_amount = command.amount;
          const auto ttl_ms = settings_.ledger.fx_quote_ttl_ms;
          core_.readers->read<made>(
              [q, ttl_ms](pqxx::connection& conn) mutable {
                made out;
                // A quote for an account that can neither pay nor be paid could never be exchanged.
                for (const auto& [id, field] :
                     {std::pair{q.from_account, "fromAccountId"}, std::pair{q.to_account, "toAccountId"}}) {
                  const auto status = persistence::find_account_status(conn, id);
                  if (status && *status != ledger::account_status::active) {
                    out.outcome = ledger::error_code::account_inactive;
                    out.detail = "account " + std::to_string(id) + " (" + field + ") is " +
                                 std::string(ledger::to_string(*status)) + ": no exchange can post to it";
                    return out;
                  }
                }
                auto rate = persistence::find_fx_rate(conn, q.from_currency, q.to_currency);
                if (!rate) {
                  out.outcome = ledger::error_code::rate_not_found;
                  out.detail = "no rate is set for " + q.from_currency + "/" + q.to_currency;
                  return out;
                }
                const auto parsed = ledger::fx::parse_rate(rate->rate);
                if (!parsed) {
                  // The database takes any positive decimal; the rate route, only what parse_rate
                  // does. A rate written around the API is refused here, not trusted.
                  out.outcome = ledger::error_code::internal;
                  out.detail = "the rate stored for " + q.from_currency + "/" + q.to_currency + " is not usable (" +
                               rate->rate + "); an operator must set it again";
                  return out;
                }
                const auto converted = ledger::fx::convert(q.from_amount, *parsed, q.from_currency, q.to_currency);
                if (!converted) {
                  out.outcome = ledger::error_code::invalid_request;
                  out.detail = "the converted amount is too large";
                  return out;
                }
                if (*converted == 0) {
                  out.outcome = ledger::error_code::amount_too_small;
                  out.detail = std::to_string(q.from_amount) + " minor units of " + q.from_currency + " at " +
                               rate->rate + " make less than one minor unit of " + q.to_currency;
                  return out;
                }
                q.rate = rate->rate;
                q.source = rate->source;
                q.to_amount = *converted;
                out.quote = persistence::create_fx_quote(conn, q, ttl_ms);
                return out;
              },
              [done](query_result<made> r) {
                query_result<fx_quote_view> out;
                out.outcome = r.outcome != ledger::error_code::ok ? r.outcome : r.value.outcome;
                out.detail = r.outcome != ledger::error_code::ok ? r.detail : r.value.detail;
                if (out.outcome == ledger::error_code::ok) out.value = to_view(*r.value.quote);
                done(std::move(out));
              });
        });
  });
}

void money_flows::exchange(exchange_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn outer) mutable {
    const std::string serial = "quote:" + command.quote_id;
    one_at_a_time(serial, [this, command = std::move(command), outer](std::function<void()> next) mutable {
      // The next request for the same thing starts once this one is answered (after its COMMIT).
      finish_fn finish = [outer, next](money_result r) {
        outer(std::move(r));
        next();
      };
      struct quote_read {
        std::optional<persistence::fx_quote_record> quote;
        std::optional<std::pair<int, std::string>> receipt;  // of the exchange that used it
      };
      const auto id = command.quote_id;
      core_.readers->read<quote_read>(
          [id](pqxx::connection& conn) {
            quote_read r;
            r.quote = persistence::find_fx_quote(conn, id);
            if (r.quote && !r.quote->transaction_id.empty()) {
              r.receipt = persistence::find_receipt(conn, r.quote->transaction_id);
            }
            return r;
          },
          [this, command = std::move(command), finish](query_result<quote_read> r) mutable {
            if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
            const auto& id = command.quote_id;
            if (!r.value.quote || r.value.quote->principal != command.principal) {
              return finish(refusal(ledger::error_code::not_found, quote_not_found(id)));
            }
            auto q = std::move(*r.value.quote);
            // Single use: the exchange that used it is the answer, whoever asks again.
            if (!q.transaction_id.empty()) return finish(used_quote_answer(std::move(r.value.receipt), id));
            if (q.expired) {
              return finish(decided_early(ledger::error_code::quote_expired,
                                          "quote " + id + " expired at " + q.expires_at + "; ask for a new one"));
            }
            const auto from = q.from_account;
            // Made before the calls below: their lambdas take `command` and `q` by move.
            auto missing = refusal(ledger::error_code::not_found, quote_not_found(id));
            user_account(
                from, std::move(missing), finish,
                [this, command = std::move(command), q = std::move(q), finish](account_facts a) mutable {
                  const auto to = q.to_account;
                  auto missing = refusal(ledger::error_code::not_found, quote_not_found(q.id));
                  user_account(
                      to, std::move(missing), finish,
                      [this, command = std::move(command), q = std::move(q), a = std::move(a),
                       finish](account_facts b) mutable {
                        if (a.owner_id != command.principal || b.owner_id != command.principal) {
                          return finish(refusal(ledger::error_code::not_found, quote_not_found(q.id)));
                        }
                        const std::string from_currency = q.from_currency;
                        system_accounts(
                            from_currency, {{"fx", true}},
                            [this, command = std::move(command), q = std::move(q), a = std::move(a), b = std::move(b),
                             finish](ledger::error_code code, std::vector<ledger::account_id> from_fx) mutable {
                              if (code != ledger::error_code::ok) return finish(database_unavailable(code));
                              const std::string to_currency = q.to_currency;
                              system_accounts(
                                  to_currency, {{"fx", true}},
                                  [this, command = std::move(command), q = std::move(q), a = std::move(a),
                                   b = std::move(b), finish, fx_from = from_fx[0]](
                                      ledger::error_code code, std::vector<ledger::account_id> to_fx) mutable {
                                    if (code != ledger::error_code::ok) return finish(database_unavailable(code));
                                    send_exchange(std::move(command), std::move(q), std::move(a), std::move(b), fx_from,
                                                  to_fx[0], finish);
                                  });
                            });
                      });
                });
          });
    });
  });
}

void money_flows::send_exchange(exchange_command command, persistence::fx_quote_record q, account_facts a,
                                account_facts b, ledger::account_id fx_from, ledger::account_id fx_to,
                                finish_fn finish) {
  // Committed by wallet A's writer: a hot wallet B is credited on a shard of that writer's.
  thread_local std::mt19937_64 spread{std::random_device{}()};
  const auto credit_row = account_directory::credit_row(b, core_.writer_index(a.id), core_.runtime->writers.size(),
                                                        spread(), core_.runtime->ownership.get());
  auto rows = std::make_shared<persistence::flow_rows>();
  rows->quote = persistence::flow_rows::quote_use{q.id};
  persistence::posting_request request;
  request.posting = ledger::flows::exchange(a.id, fx_from, q.from_amount, q.from_currency, fx_to, credit_row, b.id,
                                            q.to_amount, q.to_currency);
  request.transaction_id = make_transaction_id();
  request.principal = command.principal;
  request.idempotency_key = std::move(command.idempotency_key);
  request.request_hash = std::move(command.request_hash);
  request.metadata_json = json_members({{"quoteId", q.id},
                                        {"rate", q.rate},
                                        {"source", q.source},
                                        {"fromCurrency", q.from_currency},
                                        {"toCurrency", q.to_currency},
                                        {"fromAmount", std::to_string(q.from_amount)},
                                        {"toAmount", std::to_string(q.to_amount)}});
  request.receipt_fields = json_members({{"quoteId", q.id},
                                         {"rate", q.rate},
                                         {"fromAmount", std::to_string(q.from_amount)},
                                         {"fromCurrency", q.from_currency},
                                         {"toAmount", std::to_string(q.to_amount)},
                                         {"toCurrency", q.to_currency}},
                                        true);
  request.rows = std::move(rows);
  const auto quote_id = q.id;
  const auto principal = command.principal;
  debit(principal, std::move(request), std::move(a), [this, quote_id, finish](money_result r) {
    // Another request used the quote first (the writer's `conflict`, the only one an exchange
    // meets): its exchange is the answer.
    if (r.outcome != ledger::error_code::conflict) return finish(std::move(r));
    core_.readers->read<std::optional<std::pair<int, std::string>>>(
        [quote_id](pqxx::connection& conn) -> std::optional<std::pair<int, std::string>> {
          auto q = persistence::find_fx_quote(conn, quote_id);
          if (!q || q->transaction_id.empty()) return std::nullopt;
          return persistence::find_receipt(conn, q->transaction_id);
        },
        [quote_id, finish](query_result<std::optional<std::pair<int, std::string>>> r) {
          if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
          finish(used_quote_answer(std::move(r.value), quote_id));
        });
  });
}

}  // namespace actors
