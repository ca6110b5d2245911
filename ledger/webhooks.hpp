#pragma once

// The pure rules of webhook endpoints (docs/events.md, "Webhooks"): what a destination URL may be,
// which addresses a delivery may go to, and which event types an endpoint may ask for. No I/O:
// resolving a host is the caller's (at registration and again at every connect), and each
// resolved address is judged here.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ledger {

inline constexpr std::size_t k_webhook_url_length_max = 2'048;
// A host name of DNS's own limit.
inline constexpr std::size_t k_webhook_host_length_max = 253;

struct webhook_url {
  bool tls = false;  // https
  std::string host;  // a name, an IPv4 literal, or an IPv6 literal without its brackets
  std::uint16_t port = 0;
  std::string target;  // path and query, "/" at least
};

// The URL's parts, or why it cannot be a webhook destination (a sentence for a 400's detail):
// http or https only, an absolute URL with a host, no user information, no fragment, at most
// k_webhook_url_length_max characters, printable ASCII only, none of the characters RFC 3986
// leaves out of URLs (space "<>\^`{|}).
std::variant<webhook_url, std::string> parse_webhook_url(std::string_view text);

// What an IP address is, as far as sending to it goes.
enum class address_class : std::uint8_t {
  global,       // a public unicast address
  private_use,  // RFC 1918, fc00::/7, CGNAT 100.64.0.0/10, and the reserved ranges
  loopback,     // 127.0.0.0/8, ::1
  link_local,   // 169.254.0.0/16, fe80::/10
  unspecified,  // 0.0.0.0/8, ::
  multicast,    // 224.0.0.0/4, 255.255.255.255, ff00::/8
};
std::string_view to_string(address_class c);

// The class of an IPv4 or IPv6 address in text form; an IPv4-mapped IPv6 address (::ffff:a.b.c.d)
// is judged as its IPv4 address. nullopt: not an IP address.
std::optional<address_class> classify_address(std::string_view ip);

// Whether deliveries may go to an address of this class: global ones only, and loopback ones too
// when `allow_loopback` (webhooks.allow_loopback, for tests).
bool destination_allowed(address_class c, bool allow_loopback);

// The event types an endpoint asks for: ["*"] (every type), or distinct transaction types
// ("TRANSFER", "DEPOSIT", ...). nullopt with `why` set when the list is not one of those.
std::optional<std::vector<std::string>> check_event_types(const std::vector<std::string>& types, std::string& why);

// Whether an endpoint asking for `types` (as check_event_types returned them) wants an event of
// type `type`.
bool wants_event_type(const std::vector<std::string>& types, std::string_view type);

}  // namespace ledger
