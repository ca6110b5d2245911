#include "events/stream_entry.hpp"

namespace events {

std::string accounts_json(const std::vector<persistence::event_leg>& legs) {
  std::string out = "[";
  for (std::size_t i = 0; i < legs.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(legs[i].account);
  }
  return out + "]";
}

std::string amounts_json(const std::vector<persistence::event_leg>& legs) {
  std::string out = "[";
  for (std::size_t i = 0; i < legs.size(); ++i) {
    if (i > 0) out += ',';
    out += '"' + std::to_string(legs[i].amount) + '"';
  }
  return out + "]";
}

std::string currencies_json(const std::vector<persistence::event_leg>& legs) {
  std::string out = "[";
  for (std::size_t i = 0; i < legs.size(); ++i) {
    if (i > 0) out += ',';
    // A currency is three capital letters (migration 001's CHECK): nothing to escape.
    out += '"' + legs[i].currency + '"';
  }
  return out + "]";
}

stream_fields to_stream_fields(const persistence::event_record& e) {
  return {
      {"eventId", e.transaction_id},           {"type", e.type},
      {"transactionId", e.transaction_id},     {"currency", e.currency},
      {"accounts", accounts_json(e.legs)},     {"amounts", amounts_json(e.legs)},
      {"currencies", currencies_json(e.legs)}, {"createdAt", e.created_at},
      {"cursor", std::to_string(e.cursor)},
  };
}

}  // namespace events
