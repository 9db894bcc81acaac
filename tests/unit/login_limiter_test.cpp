// The api-gateway's failed-login limits: decided atomically (reserved before the hash is
// evaluated), per account and address, per address, per account, and the account limit does
// not lock out an address the account signed in from.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gateway.hpp"

namespace login_limiter_test {

using awp::api::login_limiter;
using namespace std::chrono_literals;

TEST_CASE("login limiter: concurrent attempts beyond the limit are refused before evaluating",
          "[api][login]") {
    login_limiter l(3, 900s);
    // Eight attempts begin at once (none has ended): only three may go on to the hash.
    int allowed = 0;
    for (int i = 0; i < 8; ++i) allowed += l.begin("alice@x", "10.0.0.1") == 0 ? 1 : 0;
    CHECK(allowed == 3);
    for (int i = 0; i < 3; ++i) l.end("alice@x", "10.0.0.1", false);
    long wait = l.begin("alice@x", "10.0.0.1");
    CHECK(wait > 0);
    CHECK(wait <= 901);
}

TEST_CASE("login limiter: many threads never let more than the limit through", "[api][login]") {
    login_limiter l(5, 900s);
    std::atomic<int> allowed{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t) {
        ts.emplace_back([&] {
            for (int i = 0; i < 50; ++i) {
                if (l.begin("bob@x", "10.0.0.2") == 0) {
                    ++allowed;
                    l.end("bob@x", "10.0.0.2", false);
                }
            }
        });
    }
    for (auto& t : ts) t.join();
    CHECK(allowed == 5);
}

TEST_CASE("login limiter: a success clears the account, spraying is limited per address",
          "[api][login]") {
    login_limiter l(2, 900s);
    REQUIRE(l.begin("carol@x", "10.0.0.3") == 0);
    l.end("carol@x", "10.0.0.3", false);
    REQUIRE(l.begin("carol@x", "10.0.0.3") == 0);
    l.end("carol@x", "10.0.0.3", true);  // the right password
    CHECK(l.begin("carol@x", "10.0.0.3") == 0);
    l.end("carol@x", "10.0.0.3", false);
    // One address trying many accounts: 4 x 2 failures in all, then 429 for any account.
    login_limiter s(2, 900s);
    int allowed = 0;
    for (int i = 0; i < 20; ++i) {
        const auto acct = "user" + std::to_string(i) + "@x";
        if (s.begin(acct, "10.0.0.9") == 0) {
            ++allowed;
            s.end(acct, "10.0.0.9", false);
        }
    }
    CHECK(allowed == 8);
}

TEST_CASE(
    "login limiter: an attacker spread over addresses cannot lock the user out of the "
    "address the user signs in from",
    "[api][login]") {
    login_limiter l(2, 900s);
    // The real user signed in once from home.
    REQUIRE(l.begin("dave@x", "192.0.2.1") == 0);
    l.end("dave@x", "192.0.2.1", true);
    // An attacker fails from 30 addresses, 2 each: the account limit (10 x 2) is reached.
    for (int a = 0; a < 30; ++a) {
        const auto addr = "198.51.100." + std::to_string(a);
        for (int i = 0; i < 2; ++i) {
            if (l.begin("dave@x", addr) == 0) l.end("dave@x", addr, false);
        }
    }
    CHECK(l.begin("dave@x", "198.51.100.200") > 0);  // a new address is refused for the account
    CHECK(l.begin("dave@x", "192.0.2.1") == 0);      // the user's own address is not
    l.end("dave@x", "192.0.2.1", true);
}

}  // namespace login_limiter_test
