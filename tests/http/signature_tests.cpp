// The Wallet-Signature header (http/signature.hpp): its shape, one v1 per signing secret, and the
// check that accepts a header when any of its v1 signs the body with the receiver's secret. The
// expected digests come from OpenSSL's HMAC directly, not from the code under test.

#include <gtest/gtest.h>

#include "http/signature.hpp"
#include "tests/support/hmac.hpp"

namespace {

constexpr std::int64_t k_now = 1'796'029'021;
const std::string k_body = R"({"eventId":"e-1","amounts":["-1000","1000"]})";

TEST(signature, one_secret_signs_with_one_v1) {
  const auto header = api::sign("whsec_current-secret", k_now, k_body);
  EXPECT_EQ(header, "t=1796029021,v1=" + test_support::hmac_sha256_hex("whsec_current-secret", "1796029021." + k_body));
  EXPECT_TRUE(api::verify_signature(header, "whsec_current-secret", k_body, k_now));
  EXPECT_FALSE(api::verify_signature(header, "whsec_other-secret", k_body, k_now));
  EXPECT_FALSE(api::verify_signature(header, "whsec_current-secret", k_body + " ", k_now));
}

TEST(signature, two_secrets_sign_with_one_v1_each_in_order_and_either_verifies) {
  const auto header = api::sign_with_secrets({"whsec_new-secret-0001", "whsec_old-secret-0001"}, k_now, k_body);
  const auto payload = "1796029021." + k_body;
  EXPECT_EQ(header, "t=1796029021,v1=" + test_support::hmac_sha256_hex("whsec_new-secret-0001", payload) +
                        ",v1=" + test_support::hmac_sha256_hex("whsec_old-secret-0001", payload));
  EXPECT_TRUE(api::verify_signature(header, "whsec_new-secret-0001", k_body, k_now));
  EXPECT_TRUE(api::verify_signature(header, "whsec_old-secret-0001", k_body, k_now));
  EXPECT_FALSE(api::verify_signature(header, "whsec_third-secret-01", k_body, k_now));
  const auto parsed = api::parse_signature_header(header);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->timestamp, k_now);
  EXPECT_EQ(parsed->v1.size(), 2u);
}

TEST(signature, a_time_outside_the_tolerance_is_refused_whatever_the_signature) {
  const auto header = api::sign("whsec_current-secret", k_now, k_body);
  EXPECT_TRUE(api::verify_signature(header, "whsec_current-secret", k_body, k_now + api::k_signature_tolerance_s));
  EXPECT_TRUE(api::verify_signature(header, "whsec_current-secret", k_body, k_now - api::k_signature_tolerance_s));
  EXPECT_FALSE(api::verify_signature(header, "whsec_current-secret", k_body, k_now + api::k_signature_tolerance_s + 1));
  EXPECT_FALSE(api::verify_signature(header, "whsec_current-secret", k_body, k_now - api::k_signature_tolerance_s - 1));
}

TEST(signature, headers_of_another_shape_are_refused) {
  const std::string v1(64, 'a');
  EXPECT_TRUE(api::parse_signature_header("t=1,v1=" + v1));
  EXPECT_TRUE(api::parse_signature_header("v1=" + v1 + ", t=1, v0=whatever"));  // other schemes ignored
  EXPECT_FALSE(api::parse_signature_header("t=1"));                             // no v1
  EXPECT_FALSE(api::parse_signature_header("v1=" + v1));                        // no t
  EXPECT_FALSE(api::parse_signature_header("t=1,t=2,v1=" + v1));                // two t
  EXPECT_FALSE(api::parse_signature_header("t=1x,v1=" + v1));
  EXPECT_FALSE(api::parse_signature_header("t=1,v1=" + v1.substr(1)));  // 63 digits
  EXPECT_FALSE(api::parse_signature_header("t=1,v1=" + std::string(64, 'A')));
  EXPECT_FALSE(api::parse_signature_header("t=1,v1"));
  std::string four = "t=1";
  for (std::size_t i = 0; i < api::k_signatures_max; ++i) four += ",v1=" + v1;
  EXPECT_TRUE(api::parse_signature_header(four));
  EXPECT_FALSE(api::parse_signature_header(four + ",v1=" + v1));  // one too many
}

}  // namespace
