#include "http/request.hpp"

#include <boost/beast/http/field.hpp>

#include "http/crypto.hpp"

namespace api {

namespace bhttp = boost::beast::http;

void fill_exchange(exchange& ex, bhttp::request<bhttp::string_body>& req) {
  ex.request_id = req.count("X-Request-Id") > 0 && req["X-Request-Id"].size() <= 64 ? std::string(req["X-Request-Id"])
                                                                                    : new_request_id();
  ex.method = std::string(req.method_string());
  ex.target = std::string(req.target());
  const auto q = ex.target.find('?');
  ex.path = ex.target.substr(0, q);
  ex.query = q == std::string::npos ? "" : ex.target.substr(q + 1);
  ex.body = std::move(req.body());
  if (auto it = req.find(bhttp::field::authorization); it != req.end()) ex.authorization = std::string(it->value());
  if (auto it = req.find("Idempotency-Key"); it != req.end()) {
    ex.has_idempotency_key = true;
    ex.idempotency_key = std::string(it->value());
  }
  if (auto it = req.find(bhttp::field::content_type); it != req.end()) ex.content_type = std::string(it->value());
}

}  // namespace api
