#include "actors/uuid.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <random>

namespace actors {

std::string make_transaction_id() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const auto ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  std::array<std::uint8_t, 16> b{};
  for (int i = 0; i < 6; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(ms >> (40 - 8 * i));
  const std::uint64_t r1 = random();
  const std::uint64_t r2 = random();
  for (int i = 6; i < 16; ++i) {
    b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>((i < 11 ? r1 : r2) >> (8 * (i % 8)));
  }
  b[6] = static_cast<std::uint8_t>((b[6] & 0x0F) | 0x70);  // version 7
  b[8] = static_cast<std::uint8_t>((b[8] & 0x3F) | 0x80);  // RFC 4122 variant
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += hex[b[i] >> 4];
    out += hex[b[i] & 0x0F];
  }
  return out;
}

}  // namespace actors
