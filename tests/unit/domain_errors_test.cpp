// The AW domain errors: each code has its SQLSTATE text and its own exception type, and
// throw_for_sqlstate throws that type (callers catch the type, never compare the text).
#include <catch2/catch.hpp>

#include <set>
#include <typeinfo>

#include "awp/core/pg.hpp"

namespace domain_errors_test {

namespace pg = awp::core::pg;
using pg::domain_code;

namespace {

/// What throw_for_sqlstate throws for `state`, as the name of the type caught.
std::string caught(const std::string& state) {
    try {
        pg::throw_for_sqlstate(state, "message", "detail", "hint");
    } catch (const pg::illegal_transition&) {
        return "illegal_transition";
    } catch (const pg::lease_lost&) {
        return "lease_lost";
    } catch (const pg::not_found&) {
        return "not_found";
    } catch (const pg::invalid_argument&) {
        return "invalid_argument";
    } catch (const pg::stale_source_hash&) {
        return "stale_source_hash";
    } catch (const pg::registration_token_invalid&) {
        return "registration_token_invalid";
    } catch (const pg::registration_token_expired&) {
        return "registration_token_expired";
    } catch (const pg::registration_token_used&) {
        return "registration_token_used";
    } catch (const pg::no_tenant&) {
        return "no_tenant";
    } catch (const pg::operator_required&) {
        return "operator_required";
    } catch (const pg::quota_exceeded&) {
        return "quota_exceeded";
    } catch (const pg::domain_error&) {
        return "domain_error";
    } catch (const pg::sql_error&) {
        return "sql_error";
    }
    return "nothing";
}

}  // namespace

TEST_CASE("each AW code is thrown as its own domain_error type", "[pg][protocol]") {
    CHECK(caught("AW001") == "illegal_transition");
    CHECK(caught("AW002") == "lease_lost");
    CHECK(caught("AW003") == "not_found");
    CHECK(caught("AW004") == "invalid_argument");
    CHECK(caught("AW005") == "stale_source_hash");
    CHECK(caught("AW006") == "registration_token_invalid");
    CHECK(caught("AW007") == "registration_token_expired");
    CHECK(caught("AW008") == "registration_token_used");
    CHECK(caught("AW009") == "no_tenant");
    CHECK(caught("AW010") == "operator_required");
    CHECK(caught("AW011") == "quota_exceeded");
    // An AW code of a newer schema is still a domain_error, without a code.
    CHECK(caught("AW099") == "domain_error");
    CHECK(caught("AWXYZ") == "domain_error");
    CHECK(caught("23502") == "sql_error");
}

TEST_CASE("domain codes round-trip through their SQLSTATE text", "[pg][protocol]") {
    std::set<std::string> states;
    int expected = 1;
    for (const auto code : pg::kDomainCodes) {
        const auto state = pg::sqlstate_of(code);
        CHECK(state.size() == 5);
        CHECK(state.starts_with("AW"));
        CHECK(static_cast<int>(code) == expected++);  // in order, no gap
        CHECK(pg::domain_code_of(state) == code);
        states.insert(state);
    }
    CHECK(states.size() == pg::kDomainCodes.size());
    CHECK(pg::sqlstate_of(domain_code::illegal_transition) == "AW001");
    CHECK(pg::sqlstate_of(domain_code::operator_required) == "AW010");
    CHECK_FALSE(pg::domain_code_of("AW000"));
    CHECK_FALSE(pg::domain_code_of("AW012"));
    CHECK_FALSE(pg::domain_code_of("aw001"));
    CHECK_FALSE(pg::domain_code_of("AW01"));
    CHECK_FALSE(pg::domain_code_of("AW0010"));
    CHECK_FALSE(pg::domain_code_of("23505"));
    CHECK_FALSE(pg::domain_code_of(""));
}

TEST_CASE("a domain error keeps its code, SQLSTATE and the server's words", "[pg][protocol]") {
    try {
        pg::throw_for_sqlstate("AW002", "lease lost", "the detail", "the hint");
        FAIL("nothing thrown");
    } catch (const pg::domain_error& e) {
        CHECK(e.code() == domain_code::lease_lost);
        CHECK(e.sqlstate() == "AW002");
        CHECK(e.primary() == "lease lost");
        CHECK(e.detail() == "the detail");
        CHECK(e.hint() == "the hint");
        CHECK(typeid(e) == typeid(pg::lease_lost));
    }
    const pg::domain_error unknown("AW042", "m");
    CHECK_FALSE(unknown.code());
}

}  // namespace domain_errors_test
