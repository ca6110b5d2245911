#pragma once

// The route table: for each route its method, path template, who may call it, its rate-limit
// class and its handler. Dispatch and the 404 / 405 answers both follow from the table, and
// tests check the table against docs/openapi.json both ways.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/views.hpp"
#include "http/exchange.hpp"

namespace api {

// Who may call a route.
enum class access : std::uint8_t {
  open,       // anyone, without an API key (health, metrics, the API document)
  principal,  // any principal with a valid API key
  operator_,  // an operator's key only (403 forbidden for others)
  provider,   // a payment provider: no API key; the handler verifies the Wallet-Signature
};
std::string_view to_string(access a);

// Which of the principal's rate limits a route spends (docs: ratelimit/README.md).
enum class rate_class : std::uint8_t { none, read, write };
std::string_view to_string(rate_class c);

// How a `{...}` segment of a path template matches.
enum class param_kind : std::uint8_t {
  integer,  // a positive id (1 to 19 digits); anything else is no match, hence 404
  text,     // any segment; the handler checks it
};

// The values of a path's `{...}` segments (a route has two at most, of the route's kind).
struct path_params {
  std::int64_t id = 0;  // param_kind::integer
  std::string text;     // the segment as sent, either kind
  // The second `{...}` segment, e.g. {keyId} of /v1/principals/{id}/keys/{keyId}.
  std::int64_t second_id = 0;
  std::string second_text;
};

// A handler gets the exchange, the authenticated principal (id 0 on open routes) and the path's
// parameter. It answers through the exchange, now or later, exactly once.
using handler = std::function<void(const exchange_ptr&, const actors::principal_view&, const path_params&)>;

struct route {
  std::string method;
  std::string pattern;  // an OpenAPI path template, e.g. "/v1/accounts/{id}"
  access who = access::principal;
  rate_class rate = rate_class::read;
  param_kind param = param_kind::integer;
  // True when the route names accounts the server may have to look up: the principal's
  // allowance of lookups of accounts that turn out not to exist is checked before it runs.
  bool names_accounts = false;
  handler run;
  // The largest body the route reads, and the deadline of its answer; 0: http.body_bytes_max and
  // http.request_deadline_ms, as for every route but a few.
  std::int64_t body_bytes_max = 0;
  std::int64_t deadline_ms = 0;
};

class router {
 public:
  void add(route r);

  struct found {
    const route* matched = nullptr;  // null: no route for this method and path
    path_params params;
    std::string allowed;  // when `matched` is null but the path is known: its methods, for 405
  };
  found find(std::string_view method, std::string_view path) const;

  const std::vector<route>& table() const { return routes_; }

 private:
  std::vector<route> routes_;
  std::vector<std::vector<std::string>> segments_;  // each route's template, split
};

}  // namespace api
