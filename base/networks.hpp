#pragma once

// Lists of IP networks, as the setting http.trusted_proxies writes them: "10.0.0.0/8, 127.0.0.1,
// ::1". An address without a prefix length is a network of that one address. Header-only: the
// settings check them and the request reader (which the fuzz build links without config/) uses them.

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace base {

struct ip_network {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  // IPv4 in the first four
  int prefix = 0;                        // leading bits that must match
};

// An IP address in text as a network of its full length (32 or 128 bits); an IPv4-mapped IPv6
// address (::ffff:a.b.c.d) becomes the IPv4 address it maps. nullopt for anything else.
inline std::optional<ip_network> parse_address(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  const std::string z(text);  // inet_pton reads a C string
  ip_network n;
  if (inet_pton(AF_INET, z.c_str(), n.bytes.data()) == 1) {
    n.prefix = 32;
    return n;
  }
  if (inet_pton(AF_INET6, z.c_str(), n.bytes.data()) != 1) return std::nullopt;
  static constexpr std::array<std::uint8_t, 12> mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(mapped.begin(), mapped.end(), n.bytes.begin())) {
    std::copy(n.bytes.begin() + 12, n.bytes.end(), n.bytes.begin());
    std::fill(n.bytes.begin() + 4, n.bytes.end(), 0);
    n.prefix = 32;
    return n;
  }
  n.v6 = true;
  n.prefix = 128;
  return n;
}

namespace detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

inline bool matches(const ip_network& network, const ip_network& address) {
  if (network.v6 != address.v6) return false;
  const int whole = network.prefix / 8;
  for (int i = 0; i < whole; ++i) {
    if (network.bytes[i] != address.bytes[i]) return false;
  }
  const int rest = network.prefix % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (network.bytes[whole] & mask) == (address.bytes[whole] & mask);
}

}  // namespace detail

// Comma-separated networks, spaces around each ignored; an empty text is an empty list.
// nullopt when any entry is not an IPv4 or IPv6 address with an optional /prefix in range.
inline std::optional<std::vector<ip_network>> parse_networks(std::string_view text) {
  std::vector<ip_network> out;
  if (detail::trim(text).empty()) return out;
  while (true) {
    const auto comma = text.find(',');
    const std::string_view entry = detail::trim(text.substr(0, comma));
    const auto slash = entry.find('/');
    auto network = parse_address(entry.substr(0, slash));
    if (!network) return std::nullopt;
    if (slash != std::string_view::npos) {
      const std::string_view digits = entry.substr(slash + 1);
      int prefix = -1;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
      if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || prefix < 0 ||
          prefix > network->prefix) {
        return std::nullopt;
      }
      network->prefix = prefix;
    }
    out.push_back(*network);
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

// `address` written the one way inet_ntop writes it (an IPv4-mapped IPv6 address as IPv4), so
// that one address is one string; nullopt when it is not an IP address.
inline std::optional<std::string> canonical_address(std::string_view address) {
  const auto parsed = parse_address(address);
  if (!parsed) return std::nullopt;
  char text[INET6_ADDRSTRLEN];
  if (inet_ntop(parsed->v6 ? AF_INET6 : AF_INET, parsed->bytes.data(), text, sizeof text) == nullptr) {
    return std::nullopt;
  }
  return std::string(text);
}

// Whether `address` (an IP address in text) lies in any of `networks`. An IPv4-mapped IPv6
// address (::ffff:a.b.c.d) is matched as the IPv4 address it maps. False for text that is not
// an address.
inline bool contains(const std::vector<ip_network>& networks, std::string_view address) {
  const auto parsed = parse_address(address);
  if (!parsed) return false;
  for (const auto& n : networks) {
    if (detail::matches(n, *parsed)) return true;
  }
  return false;
}

}  // namespace base
