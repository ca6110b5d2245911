#include "ledger/webhooks.hpp"

// inet_pton only parses text into address bytes: no I/O, no resolver.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "base/networks.hpp"
#include "ledger/types.hpp"

namespace ledger {
namespace {

bool is_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

std::optional<std::uint16_t> parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (v == 0 || v > 65'535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

address_class classify_v4(const std::array<std::uint8_t, 4>& a) {
  const auto b0 = a[0], b1 = a[1];
  if (b0 == 0) return address_class::unspecified;  // 0.0.0.0/8: "this network"
  if (b0 == 127) return address_class::loopback;
  if (b0 == 169 && b1 == 254) return address_class::link_local;
  if (b0 >= 224 && b0 <= 239) return address_class::multicast;
  if (a == std::array<std::uint8_t, 4>{255, 255, 255, 255}) return address_class::multicast;  // broadcast
  if (b0 == 10) return address_class::private_use;
  if (b0 == 172 && (b1 & 0xf0) == 16) return address_class::private_use;
  if (b0 == 192 && b1 == 168) return address_class::private_use;
  if (b0 == 100 && (b1 & 0xc0) == 64) return address_class::private_use;     // CGNAT 100.64.0.0/10
  if (b0 == 198 && (b1 & 0xfe) == 18) return address_class::private_use;     // benchmarking 198.18.0.0/15
  if (b0 == 192 && b1 == 0 && a[2] == 0) return address_class::private_use;  // IETF 192.0.0.0/24
  if (b0 >= 240) return address_class::private_use;                          // reserved 240.0.0.0/4
  return address_class::global;
}

// Not IPv4-mapped: base::parse_address has turned those into IPv4 already.
address_class classify_v6(const std::array<std::uint8_t, 16>& a) {
  // Addresses that carry an IPv4 address a gateway reaches for them are what that address is:
  // NAT64's well-known prefix 64:ff9b::/96 (RFC 6052) holds it in its last four bytes, 6to4's
  // 2002::/16 (RFC 3056) in the four after the prefix. NAT64's local-use 64:ff9b:1::/48 (RFC 8215)
  // may hold it anywhere, and Teredo's 2001::/32 (RFC 4380) obscured: neither is public.
  static constexpr std::array<std::uint8_t, 12> k_nat64_prefix{0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::equal(k_nat64_prefix.begin(), k_nat64_prefix.end(), a.begin())) {
    return classify_v4({a[12], a[13], a[14], a[15]});
  }
  if (a[0] == 0x20 && a[1] == 0x02) return classify_v4({a[2], a[3], a[4], a[5]});
  if (a[0] == 0 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && a[4] == 0 && a[5] == 1) {
    return address_class::private_use;
  }
  if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) return address_class::private_use;
  const bool first_15_zero = std::all_of(a.begin(), a.begin() + 15, [](std::uint8_t b) { return b == 0; });
  if (first_15_zero && a[15] == 0) return address_class::unspecified;
  if (first_15_zero && a[15] == 1) return address_class::loopback;
  if (a[0] == 0xff) return address_class::multicast;
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return address_class::link_local;
  if ((a[0] & 0xfe) == 0xfc) return address_class::private_use;  // unique local fc00::/7
  // Deprecated site-local fec0::/10 and the IPv4-compatible ::a.b.c.d are not public either.
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) return address_class::private_use;
  if (std::all_of(a.begin(), a.begin() + 12, [](std::uint8_t b) { return b == 0; })) return address_class::private_use;
  return address_class::global;
}

}  // namespace

std::variant<webhook_url, std::string> parse_webhook_url(std::string_view text) {
  if (text.size() > k_webhook_url_length_max) {
    return "url is longer than " + std::to_string(k_webhook_url_length_max) + " characters";
  }
  // RFC 3986 leaves these out of URLs; refused, they also keep a URL's JSON form (the audit log's
  // detail) as long as the URL itself.
  constexpr std::string_view k_not_in_urls = "\"<>\\^`{|}";
  for (char c : text) {
    if (c <= ' ' || c > '~' || k_not_in_urls.find(c) != std::string_view::npos) {
      return std::string("url must be printable ASCII without spaces or any of \"<>\\^`{|} (percent-encode them)");
    }
  }
  webhook_url out;
  std::string_view rest;
  if (text.substr(0, 7) == "http://") {
    rest = text.substr(7);
  } else if (text.substr(0, 8) == "https://") {
    out.tls = true;
    rest = text.substr(8);
  } else {
    return std::string("url must start with http:// or https://");
  }
  if (rest.find('#') != std::string_view::npos) return std::string("url must not have a fragment (#...)");
  const auto path_at = rest.find_first_of("/?");
  const auto authority = rest.substr(0, path_at);
  std::string target = path_at == std::string_view::npos ? std::string("/") : std::string(rest.substr(path_at));
  if (target.front() == '?') target.insert(target.begin(), '/');
  if (authority.find('@') != std::string_view::npos) return std::string("url must not carry a user name or password");
  std::string_view host;
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return std::string("url has an IPv6 address without its closing ']'");
    host = authority.substr(1, close - 1);
    const auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return std::string("url has something other than a port after its IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return std::string("url has an empty port");
    }
    std::array<std::uint8_t, 16> bytes{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), bytes.data()) != 1) {
      return std::string("url's bracketed host is not an IPv6 address");
    }
  } else {
    const auto colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return std::string("url has an empty port");
    }
    if (host.size() > k_webhook_host_length_max) return std::string("url's host name is too long");
    if (!std::all_of(host.begin(), host.end(), is_host_char)) {
      return std::string("url's host must be a DNS name or an IP address (letters, digits, '-' and '.')");
    }
  }
  if (host.empty()) return std::string("url has no host");
  out.host = std::string(host);
  std::transform(out.host.begin(), out.host.end(), out.host.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  if (port_text.empty()) {
    out.port = out.tls ? 443 : 80;
  } else {
    const auto port = parse_port(port_text);
    if (!port) return std::string("url's port must be a number from 1 to 65535");
    out.port = *port;
  }
  out.target = std::move(target);
  return out;
}

std::string_view to_string(address_class c) {
  switch (c) {
    case address_class::global: return "global";
    case address_class::private_use: return "private";
    case address_class::loopback: return "loopback";
    case address_class::link_local: return "link-local";
    case address_class::unspecified: return "unspecified";
    case address_class::multicast: return "multicast";
  }
  return "unknown";
}

std::optional<address_class> classify_address(std::string_view ip) {
  const auto address = base::parse_address(ip);  // an IPv4-mapped address comes back as IPv4
  if (!address) return std::nullopt;
  if (!address->v6) return classify_v4({address->bytes[0], address->bytes[1], address->bytes[2], address->bytes[3]});
  return classify_v6(address->bytes);
}

bool destination_allowed(address_class c, bool allow_loopback) {
  return c == address_class::global || (allow_loopback && c == address_class::loopback);
}

std::optional<std::vector<std::string>> check_event_types(const std::vector<std::string>& types, std::string& why) {
  if (types.empty()) {
    why = "events must name one event type at least, or be [\"*\"] for every type";
    return std::nullopt;
  }
  if (std::find(types.begin(), types.end(), "*") != types.end()) {
    if (types.size() != 1) {
      why = "events: \"*\" (every type) stands alone";
      return std::nullopt;
    }
    return types;
  }
  std::set<std::string> seen;
  for (const auto& t : types) {
    if (!parse_transaction_type(t)) {
      why = "events: \"" + t.substr(0, 40) +
            "\" is not an event type (DEPOSIT, TRANSFER, SWEEP, WITHDRAWAL, PAYOUT, PAYOUT_FAILED, DEPOSIT_REFUND, "
            "CHARGEBACK, REFUND, or \"*\")";
      return std::nullopt;
    }
    if (!seen.insert(t).second) {
      why = "events: \"" + t + "\" is named twice";
      return std::nullopt;
    }
  }
  return types;
}

bool wants_event_type(const std::vector<std::string>& types, std::string_view type) {
  return std::any_of(types.begin(), types.end(), [&](const std::string& t) { return t == "*" || t == type; });
}

}  // namespace ledger
