// Lock names whose derived keys (unlock channel, fencing counter) are easy to put in the wrong
// Redis Cluster slot: braces in every position the hash-tag rule treats differently. Shared by the
// unit test of the rule (tests/unit/lock_names_test.cpp) and by the check against a real cluster's
// CLUSTER KEYSLOT (tests/integration/cluster_fixture_test.cpp).
#pragma once

#include <string>
#include <vector>

namespace dlock::test {

inline const std::vector<std::string>& lock_name_cases() {
  static const std::vector<std::string> cases = {
      // Ordinary: Redisson's form is right and kept.
      "orders:42", "{tenant7}:orders", "a{b}c", "foo{{bar}}zap", "{a}{b}{c}",
      "\xe5\xba\x93:{sku-1}",
      // An empty tag first: the whole key is hashed.
      "{}x", "foo{}{bar}", "{}", "a{}", "{}{}", "x{}{}{}",
      // '{' with no '}' after it.
      "a{b", "{", "{{{", "}}{{", "\xe5\xba\x93:}{",
      // '}' with no '{' before it.
      "a}b", "}", "}}}", "}{", "}a{b}c{",
      // Nested braces.
      "{{}}", "{{{a}}}"};
  return cases;
}

}  // namespace dlock::test
