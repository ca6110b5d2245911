// The pure rules of webhooks: the retry schedule (exponential, jittered, capped, within the retry
// span), which addresses a delivery may go to, what a destination URL may be, and which event-type
// lists an endpoint may ask for. No I/O: every case is a value in, a value out.

#include <gtest/gtest.h>

#include <variant>

#include "events/webhook_backoff.hpp"
#include "ledger/webhooks.hpp"

namespace {

using events::backoff_policy;
using ledger::address_class;

TEST(webhook_backoff, the_ceiling_doubles_from_the_base_up_to_the_cap) {
  // base 1 s, cap 60 s: 1, 2, 4, 8, 16, 32, then 60 for every later failure (no overflow at 1000).
  const backoff_policy p{1'000, 60'000, 86'400'000};
  const std::vector<std::int64_t> expected{1'000, 2'000, 4'000, 8'000, 16'000, 32'000, 60'000, 60'000};
  for (int n = 1; n <= static_cast<int>(expected.size()); ++n) {
    EXPECT_EQ(events::backoff_ceiling_ms(p, n), expected[static_cast<std::size_t>(n - 1)]) << n;
  }
  EXPECT_EQ(events::backoff_ceiling_ms(p, 1'000), 60'000);
  EXPECT_EQ(events::backoff_ceiling_ms({5'000, 3'000, 1}, 1), 3'000);  // a base above the cap is capped
}

TEST(webhook_backoff, the_jitter_draws_the_pause_from_the_upper_half_of_the_ceiling) {
  // The draw 0 gives half the ceiling, a draw just under 1 the ceiling, 0.5 the middle; every
  // draw in between stays within [ceiling/2, ceiling].
  const backoff_policy p{1'000, 60'000, 86'400'000};
  EXPECT_EQ(events::backoff_delay_ms(p, 3, 0.0), 2'000);
  EXPECT_EQ(events::backoff_delay_ms(p, 3, 0.999999999), 4'000);
  EXPECT_EQ(events::backoff_delay_ms(p, 3, 0.5), 3'000);
  for (int i = 0; i < 1'000; ++i) {
    const double unit = i / 1'000.0;
    const auto d = events::backoff_delay_ms(p, 5, unit);
    EXPECT_GE(d, 8'000);
    EXPECT_LE(d, 16'000);
  }
  EXPECT_EQ(events::backoff_delay_ms({1, 1, 10}, 1, 0.0), 1);  // never 0 ms
}

TEST(webhook_backoff, a_retry_past_the_span_is_not_made) {
  // Span 10 s, base 1 s: after 3 failures (ceiling 4 s, draw 0 → 2 s) 7.9 s into the span, a
  // retry at 9.9 s fits; 8.1 s in, it would start at 10.1 s: given up. The attempt's own time
  // counts too.
  const backoff_policy p{1'000, 60'000, 10'000};
  EXPECT_EQ(events::next_retry_delay_ms(p, 3, 7'900, 0, 0.0), 2'000);
  EXPECT_EQ(events::next_retry_delay_ms(p, 3, 8'100, 0, 0.0), std::nullopt);
  EXPECT_EQ(events::next_retry_delay_ms(p, 3, 7'900, 200, 0.0), std::nullopt);
  EXPECT_EQ(events::next_retry_delay_ms({1'000, 60'000, 0}, 1, 0, 0, 0.0), std::nullopt);  // span 0: one attempt
}

TEST(webhook_backoff, a_day_of_retries_with_the_defaults_is_a_bounded_number_of_attempts) {
  // Defaults (base 1 s, cap 1 h, span 1 day), the longest draws: attempts until the span is spent.
  const backoff_policy p{1'000, 3'600'000, 86'400'000};
  std::int64_t elapsed = 0;
  int failures = 0;
  while (auto d = events::next_retry_delay_ms(p, failures + 1, elapsed, 0, 0.999999)) {
    elapsed += *d;
    ++failures;
    ASSERT_LT(failures, 100);
  }
  // 1+2+...+2048 s (about 68 min over 12 retries), then hourly: 12 + 22 = 34 retries in a day.
  EXPECT_EQ(failures, 34);
  EXPECT_LE(elapsed, p.span_ms);
}

TEST(webhook_addresses, private_loopback_link_local_unspecified_and_multicast_are_told_apart) {
  // Each range the rule names, at its edges, in IPv4 and IPv6, and IPv4-mapped IPv6 as its IPv4.
  const std::vector<std::pair<std::string, address_class>> cases{
      {"8.8.8.8", address_class::global},
      {"93.184.216.34", address_class::global},
      {"10.0.0.1", address_class::private_use},
      {"10.255.255.255", address_class::private_use},
      {"172.16.0.1", address_class::private_use},
      {"172.31.255.255", address_class::private_use},
      {"172.15.255.255", address_class::global},
      {"172.32.0.0", address_class::global},
      {"192.168.1.1", address_class::private_use},
      {"100.64.0.1", address_class::private_use},
      {"100.128.0.1", address_class::global},
      {"127.0.0.1", address_class::loopback},
      {"127.255.255.254", address_class::loopback},
      {"169.254.169.254", address_class::link_local},
      {"0.0.0.0", address_class::unspecified},
      {"224.0.0.1", address_class::multicast},
      {"239.255.255.255", address_class::multicast},
      {"255.255.255.255", address_class::multicast},
      {"240.0.0.1", address_class::private_use},
      {"2606:4700::1111", address_class::global},
      {"::1", address_class::loopback},
      {"::", address_class::unspecified},
      {"fe80::1", address_class::link_local},
      {"febf::1", address_class::link_local},
      {"fc00::1", address_class::private_use},
      {"fdff:ffff::1", address_class::private_use},
      {"ff02::1", address_class::multicast},
      {"::ffff:10.1.2.3", address_class::private_use},
      {"::ffff:127.0.0.1", address_class::loopback},
      {"::ffff:8.8.8.8", address_class::global},
      // Through a gateway, the IPv4 address carried: NAT64 and 6to4; local NAT64 and Teredo never.
      {"64:ff9b::a9fe:a9fe", address_class::link_local},
      {"64:ff9b::10.0.0.1", address_class::private_use},
      {"64:ff9b::808:808", address_class::global},
      {"64:ff9b:1::8.8.8.8", address_class::private_use},
      {"2002:7f00:1::1", address_class::loopback},
      {"2002:c0a8:101::1", address_class::private_use},
      {"2002:808:808::1", address_class::global},
      {"2001:0:4136:e378:8000:63bf:3fff:fdd2", address_class::private_use},
      {"2001:4860:4860::8888", address_class::global},
  };
  for (const auto& [ip, expected] : cases) {
    const auto got = ledger::classify_address(ip);
    ASSERT_TRUE(got.has_value()) << ip;
    EXPECT_EQ(*got, expected) << ip << " is " << ledger::to_string(*got);
  }
  EXPECT_FALSE(ledger::classify_address("example.com"));
  EXPECT_FALSE(ledger::classify_address("10.0.0"));
  EXPECT_FALSE(ledger::classify_address(""));
}

TEST(webhook_addresses, only_global_ones_are_allowed_and_loopback_only_when_the_setting_says_so) {
  for (auto c :
       {address_class::private_use, address_class::link_local, address_class::unspecified, address_class::multicast}) {
    EXPECT_FALSE(ledger::destination_allowed(c, false)) << ledger::to_string(c);
    EXPECT_FALSE(ledger::destination_allowed(c, true)) << ledger::to_string(c);
  }
  EXPECT_TRUE(ledger::destination_allowed(address_class::global, false));
  EXPECT_FALSE(ledger::destination_allowed(address_class::loopback, false));
  EXPECT_TRUE(ledger::destination_allowed(address_class::loopback, true));
}

TEST(webhook_urls, http_and_https_urls_split_into_host_port_and_target) {
  // Default ports, explicit ports, IPv6 literals, a bare query, and upper-case host names.
  auto ok = [](std::string_view text) {
    auto r = ledger::parse_webhook_url(text);
    EXPECT_TRUE(std::holds_alternative<ledger::webhook_url>(r)) << text << ": " << std::get<std::string>(r);
    return std::holds_alternative<ledger::webhook_url>(r) ? std::get<ledger::webhook_url>(r) : ledger::webhook_url{};
  };
  auto a = ok("https://Hooks.Example.com/wallet/events?x=1");
  EXPECT_TRUE(a.tls);
  EXPECT_EQ(a.host, "hooks.example.com");
  EXPECT_EQ(a.port, 443);
  EXPECT_EQ(a.target, "/wallet/events?x=1");
  auto b = ok("http://127.0.0.1:8080");
  EXPECT_FALSE(b.tls);
  EXPECT_EQ(b.host, "127.0.0.1");
  EXPECT_EQ(b.port, 8080);
  EXPECT_EQ(b.target, "/");
  auto c = ok("http://[::1]:9000/h");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 9000);
  EXPECT_EQ(ok("http://example.com?q").target, "/?q");
}

TEST(webhook_urls, other_schemes_user_information_fragments_bad_ports_and_long_urls_are_refused) {
  for (const std::string& bad :
       std::vector<std::string>{"ftp://example.com/",
                                "example.com/hook",
                                "http://",
                                "http://user:pw@example.com/",
                                "http://example.com/#frag",
                                "http://example.com:0/",
                                "http://example.com:65536/",
                                "http://example.com:/",
                                "http://exa mple.com/",
                                "http://ex_ample.com/",
                                "http://[::1/",
                                "http://[not-v6]/",
                                "javascript:alert(1)",
                                "https://example.com/" + std::string(ledger::k_webhook_url_length_max, 'a'),
                                "http://example.com/\"",
                                "http://example.com/a\\b",
                                "http://example.com/<x>",
                                "http://example.com/{x}",
                                "http://example.com/a|b",
                                "http://example.com/a^b",
                                "http://example.com/a`b"}) {
    EXPECT_TRUE(std::holds_alternative<std::string>(ledger::parse_webhook_url(bad))) << bad;
  }
}

TEST(webhook_event_types, a_list_of_distinct_known_types_or_a_lone_star) {
  std::string why;
  EXPECT_TRUE(ledger::check_event_types({"*"}, why));
  EXPECT_TRUE(ledger::check_event_types({"TRANSFER", "DEPOSIT", "REFUND"}, why));
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {}, {"*", "TRANSFER"}, {"TRANSFER", "TRANSFER"}, {"transfer"}, {"PAYMENT"}, {""}}) {
    why.clear();
    EXPECT_FALSE(ledger::check_event_types(bad, why));
    EXPECT_FALSE(why.empty());
  }
  EXPECT_TRUE(ledger::wants_event_type({"*"}, "SWEEP"));
  EXPECT_TRUE(ledger::wants_event_type({"DEPOSIT", "TRANSFER"}, "TRANSFER"));
  EXPECT_FALSE(ledger::wants_event_type({"DEPOSIT"}, "TRANSFER"));
}

}  // namespace
