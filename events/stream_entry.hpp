#pragma once

// One event as one entry of the Redis Stream `wallet:events`: its fields, in the order XADD sends
// them. The same names as the feed's JSON (GET /v1/events), so a consumer can read either:
//
//   eventId        the journal transaction's id: stable, so consumers deduplicate by it
//   type           the transaction's type (TRANSFER, DEPOSIT, ...)
//   transactionId  the same id, under the name the rest of the API uses
//   currency       the currency of the account it debits (every amount's but an exchange's)
//   accounts       a JSON array of the public account ids it moved money on, e.g. [12,34]
//   amounts        a JSON array of what it moved on each, as signed strings, e.g. ["-1000","1000"]
//   currencies     a JSON array of each account's currency, e.g. ["EUR","EUR"]: an exchange's
//                  legs are in two
//   createdAt      when its batch's database transaction began (UTC, microseconds)
//   cursor         its position in the feed: GET /v1/events?after=<cursor> continues after it
//
// Events carry no balances: a consumer learns what moved, never what another party holds.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "persistence/outbox.hpp"

namespace events {

// The stream every relay appends to.
inline constexpr const char* k_stream_key = "wallet:events";

using stream_fields = std::vector<std::pair<std::string, std::string>>;

std::string accounts_json(const std::vector<persistence::event_leg>& legs);
std::string amounts_json(const std::vector<persistence::event_leg>& legs);
std::string currencies_json(const std::vector<persistence::event_leg>& legs);
stream_fields to_stream_fields(const persistence::event_record& e);

// Appends `XADD key MAXLEN ~ maxlen * field value ...` to `out` in Redis's wire format (RESP: an
// array of bulk strings), byte for byte what hiredis's redisFormatCommandArgv writes. The relay
// sends a pipeline of these as one preformatted buffer: hiredis builds a command with a formatted
// append per argument, which cost the relay's thread a third of its time (bench/PROFILE.md,
// twenty-seventh part).
void append_xadd(std::string& out, std::string_view key, std::string_view maxlen, const stream_fields& fields);

}  // namespace events
