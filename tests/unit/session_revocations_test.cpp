// The revocation check every request makes (sessions.hpp, revocation_watch::check): a memory
// lookup that refuses a signed-out session's tokens, a revoked user's tokens of no session
// issued up to the revocation, and everything while the database has not been read yet. No
// database: the watch is fed the rows a read would give.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "awp/core/time.hpp"
#include "gateway.hpp"
#include "sessions.hpp"

namespace session_revocations_test {

namespace {

using awp::api::revocation;
using awp::api::revocation_watch;
using awp::api::session_state;

constexpr const char* kSession = "6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b";
constexpr const char* kOther = "11111111-2222-4333-8444-555555555555";
constexpr const char* kUser = "0b6c3d1e-5f8a-4b7c-9d2e-1f3a5b7c9d0e";

long long now_s() { return awp::core::now_unix_ms() / 1000; }

struct fixture {
    boost::asio::io_context ioc;
    awp::api::db_pool pool{ioc, "postgresql://nobody@127.0.0.1:1/none", 1};
    std::shared_ptr<revocation_watch> w = std::make_shared<revocation_watch>(
        ioc, pool, awp::api::session_db{}, "", std::chrono::seconds(10));
};

}  // namespace

TEST_CASE("session revocations: nothing passes before the database was read", "[api][sessions]") {
    fixture f;
    CHECK(f.w->check(kSession, kUser, now_s()) == session_state::unknown);
    CHECK(f.w->check("", kUser, now_s()) == session_state::unknown);
    f.w->replace({});
    CHECK(f.w->loaded());
    CHECK(f.w->check(kSession, kUser, now_s()) == session_state::live);
    CHECK(f.w->check("", kUser, now_s()) == session_state::live);
}

TEST_CASE("session revocations: a revoked session's tokens are refused, another session's are not",
          "[api][sessions]") {
    fixture f;
    f.w->replace({});
    f.w->apply({revocation{kSession, kUser, 0, now_s() + 3600}});
    CHECK(f.w->check(kSession, kUser, now_s()) == session_state::revoked);
    CHECK(f.w->check(kOther, kUser, now_s()) == session_state::live);
    // The user's tokens of no session are not touched by a session's end.
    CHECK(f.w->check("", kUser, 1) == session_state::live);
    // A row already past its expiry (no token of it can still verify) is not kept.
    f.w->apply({revocation{kOther, kUser, 0, now_s() - 10}});
    CHECK(f.w->check(kOther, kUser, now_s()) == session_state::live);
}

TEST_CASE(
    "session revocations: a user's revocation refuses its tokens of no session issued up to it "
    "(and those without iat), not later ones nor its sessions' tokens",
    "[api][sessions]") {
    fixture f;
    const auto t = now_s();
    f.w->replace({revocation{"", kUser, t, t + 31 * 86400}});
    CHECK(f.w->check("", kUser, t - 100) == session_state::revoked);
    CHECK(f.w->check("", kUser, t) == session_state::revoked);  // the same second: refused
    CHECK(f.w->check("", kUser, 0) == session_state::revoked);  // no iat
    CHECK(f.w->check("", kUser, t + 1) == session_state::live);
    CHECK(f.w->check("", kOther, t - 100) == session_state::live);
    // A session's tokens answer by the session (its own revocation row ended it).
    CHECK(f.w->check(kSession, kUser, t - 100) == session_state::live);
    // Two revocations of one user: the later counts.
    f.w->apply({revocation{"", kUser, t + 5, t + 31 * 86400}});
    CHECK(f.w->check("", kUser, t + 3) == session_state::revoked);
    CHECK(f.w->check("", kUser, t + 6) == session_state::live);
}

TEST_CASE("session revocations: a whole read of the table replaces what was known",
          "[api][sessions]") {
    fixture f;
    f.w->replace({revocation{kSession, kUser, 0, now_s() + 3600}});
    f.w->replace({});  // the row went (its tokens expired, the table was pruned)
    CHECK(f.w->check(kSession, kUser, now_s()) == session_state::live);
}

}  // namespace session_revocations_test
