#include "http/crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <random>
#include <stdexcept>

#include "base/assert.hpp"

namespace api {

namespace {

std::string hex_of(const unsigned char* bytes, unsigned int length) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[bytes[i] >> 4];
    out += hex[bytes[i] & 0x0F];
  }
  return out;
}

// 32 random bytes as base64url without padding, after `prefix`.
std::string random_token(std::string prefix) {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) throw std::runtime_error("RAND_bytes failed");
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string key = std::move(prefix);
  // Base64url without padding: 6 bits per character.
  std::uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      key += alphabet[(buffer >> bits) & 0x3F];
    }
  }
  if (bits > 0) key += alphabet[(buffer << (6 - bits)) & 0x3F];
  return key;
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 failed");
  }
  return hex_of(digest.data(), length);
}

std::string new_api_key() { return random_token("wk_"); }

std::string api_key_hint(std::string_view api_key) {
  constexpr std::size_t k_hint_chars = 4;
  WALLET_ASSERT(api_key.size() > k_hint_chars, "a key is longer than its hint");
  return std::string(api_key.substr(api_key.size() - k_hint_chars));
}

std::string new_signing_secret() { return random_token("whsec_"); }

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
           data.size(), digest.data(), &length) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return hex_of(digest.data(), length);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string new_request_id() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char hex[] = "0123456789abcdef";
  std::uint64_t v = random();
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = hex[v & 0x0F];
    v >>= 4;
  }
  return out;
}

}  // namespace api
