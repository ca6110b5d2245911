// An event's XADD in Redis's wire format (events/stream_entry.hpp): the bytes hiredis's own
// formatter writes for the same arguments, for events of every shape. No services.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "events/stream_entry.hpp"

namespace events {
namespace {

// What hiredis writes for XADD key MAXLEN ~ maxlen * fields..., the way the relay sent it before.
std::string hiredis_bytes(const std::string& key, const std::string& maxlen, const stream_fields& fields) {
  std::vector<std::string> args = {"XADD", key, "MAXLEN", "~", maxlen, "*"};
  for (const auto& [name, value] : fields) {
    args.push_back(name);
    args.push_back(value);
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* formatted = nullptr;
  const long long n = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), argv.data(), lengths.data());
  EXPECT_GT(n, 0);
  std::string out(formatted, static_cast<std::size_t>(n));
  redisFreeCommand(formatted);
  return out;
}

persistence::event_leg leg(ledger::account_id account, ledger::amount_minor amount, const char* currency) {
  persistence::event_leg l;
  l.account = account;
  l.amount = amount;
  l.currency = currency;
  return l;
}

persistence::event_record transfer_event() {
  persistence::event_record e;
  e.transaction_id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
  e.type = "TRANSFER";
  e.currency = "EUR";
  e.created_at = "2026-12-07T15:04:05.123456Z";
  e.cursor = 1234567;
  e.legs = {leg(1017, -1250, "EUR"), leg(42, 1250, "EUR")};
  return e;
}

TEST(append_xadd, writes_what_hiredis_writes) {
  const auto fields = to_stream_fields(transfer_event());
  std::string out;
  append_xadd(out, k_stream_key, "1000000", fields);
  EXPECT_EQ(out, hiredis_bytes(k_stream_key, "1000000", fields));
}

TEST(append_xadd, appends_commands_one_after_another_as_a_pipeline) {
  auto exchange = transfer_event();
  exchange.type = "EXCHANGE";
  exchange.legs = {leg(1, -100, "EUR"), leg(2, 100, "EUR"), leg(3, -108, "USD"), leg(4, 108, "USD")};
  auto empty = transfer_event();
  empty.legs.clear();
  empty.currency.clear();
  std::string out, expected;
  for (const auto& e : {transfer_event(), exchange, empty}) {
    append_xadd(out, "k", "7", to_stream_fields(e));
    expected += hiredis_bytes("k", "7", to_stream_fields(e));
  }
  EXPECT_EQ(out, expected);
}

TEST(append_xadd, counts_bytes_not_characters_and_carries_any_byte) {
  // Bulk strings are binary safe: CR, LF and multi-byte characters travel as they are.
  const stream_fields fields = {{"note", "a\r\nb"}, {"name", "Zoë"}, {"empty", ""}};
  std::string out;
  append_xadd(out, "wallet:events", "10", fields);
  EXPECT_EQ(out, hiredis_bytes("wallet:events", "10", fields));
  EXPECT_NE(out.find("$4\r\nZoë\r\n"), std::string::npos);
}

}  // namespace
}  // namespace events
