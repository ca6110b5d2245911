#pragma once

// HMAC-SHA256 as lower-case hex, with OpenSSL directly: tests check the server's signatures with it
// independently of the server's own code (http/crypto.*). Header-only, so that unit tests that do
// not link the support library can use it too; the including target links OpenSSL's libcrypto.

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>

namespace test_support {

inline std::string hmac_sha256_hex(const std::string& key, const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), digest, &length);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

}  // namespace test_support
