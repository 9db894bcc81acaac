// The AW domain errors spelled once: every code the SQL raises is a pg::domain_code, arrives
// from a real server as its own exception type, and sql/README.md's table lists exactly the
// codes of the enum. Adding a code in SQL without its C++ twin (or the other way round) fails.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <typeinfo>

#include <filesystem>

#include "awp/core/pg.hpp"
#include "support/test_db.hpp"

namespace domain_errors_test {

namespace pg = awp::core::pg;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::set<std::string> enum_states() {
    std::set<std::string> out;
    for (const auto code : pg::kDomainCodes) out.insert(pg::sqlstate_of(code));
    return out;
}

/// Every SQLSTATE of class AW a RAISE in sql/*.sql names (`USING ERRCODE = 'AW..'` or
/// `RAISE SQLSTATE 'AW..'`), comments left out.
std::set<std::string> raised_in_sql_files() {
    static const std::regex kRaised(R"re((?:ERRCODE\s*=\s*|SQLSTATE\s+)'(AW[0-9A-Z]{3})')re",
                                    std::regex::icase);
    std::set<std::string> out;
    int files = 0;
    for (const auto& entry : fs::directory_iterator(fs::path(AWP_SOURCE_DIR) / "sql")) {
        if (entry.path().extension() != ".sql") continue;
        ++files;
        std::istringstream in(read_all(entry.path()));
        std::string line;
        while (std::getline(in, line)) {
            const auto comment = line.find("--");
            if (comment != std::string::npos) line.resize(comment);
            for (std::sregex_iterator it(line.begin(), line.end(), kRaised), end; it != end; ++it)
                out.insert((*it)[1]);
        }
    }
    REQUIRE(files > 10);
    return out;
}

/// The AW rows of the "Errors" table of sql/README.md: | `AW001` | meaning |.
std::set<std::string> listed_in_readme() {
    static const std::regex kRow(R"re(^\|\s*`(AW[0-9A-Z]{3})`\s*\|)re");
    std::set<std::string> out;
    std::istringstream in(read_all(fs::path(AWP_SOURCE_DIR) / "sql" / "README.md"));
    std::string line;
    while (std::getline(in, line)) {
        std::smatch m;
        if (std::regex_search(line, m, kRow)) out.insert(m[1]);
    }
    return out;
}

std::string joined(const std::set<std::string>& s) {
    std::string out;
    for (const auto& x : s) out += (out.empty() ? "" : " ") + x;
    return out;
}

}  // namespace

TEST_CASE("every AW code the SQL raises is a domain_code, and the README lists exactly them",
          "[pg][protocol]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto in_enum = enum_states();
    const auto in_files = raised_in_sql_files();
    // The migrated database's own functions: what the daemons actually meet.
    std::set<std::string> in_database;
    auto r = admin.exec(
        "SELECT DISTINCT upper(m[1]) FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace AND n.nspname = 'public', "
        "regexp_matches(p.prosrc, $re$(?:ERRCODE\\s*=\\s*|SQLSTATE\\s+)'(AW[0-9A-Z]{3})'$re$, "
        "'gi') m");
    for (int i = 0; i < r.size(); ++i) in_database.insert(r.get<std::string>(i, 0));

    INFO("enum: " << joined(in_enum));
    INFO("raised in sql/*.sql: " << joined(in_files));
    INFO("raised by the database's functions: " << joined(in_database));
    CHECK(in_files == in_enum);
    CHECK(in_database == in_enum);
    INFO("sql/README.md lists: " << joined(listed_in_readme()));
    CHECK(listed_in_readme() == in_enum);
}

TEST_CASE("each AW code raised by the server arrives as its own exception type", "[pg][protocol]") {
    awp::test::scoped_database db;
    auto c = db.daemon();
    for (const auto code : pg::kDomainCodes) {
        const auto state = pg::sqlstate_of(code);
        INFO(state);
        try {
            c.exec("DO $$ BEGIN RAISE EXCEPTION 'raised %', '" + state + "' USING ERRCODE = '" +
                   state + "'; END $$");
            FAIL("nothing raised");
        } catch (const pg::domain_error& e) {
            CHECK(e.code() == code);
            CHECK(e.sqlstate() == state);
            CHECK(e.primary() == "raised " + state);
            bool typed = false;
            switch (code) {
                case pg::domain_code::illegal_transition:
                    typed = typeid(e) == typeid(pg::illegal_transition);
                    break;
                case pg::domain_code::lease_lost:
                    typed = typeid(e) == typeid(pg::lease_lost);
                    break;
                case pg::domain_code::not_found:
                    typed = typeid(e) == typeid(pg::not_found);
                    break;
                case pg::domain_code::invalid_argument:
                    typed = typeid(e) == typeid(pg::invalid_argument);
                    break;
                case pg::domain_code::stale_source_hash:
                    typed = typeid(e) == typeid(pg::stale_source_hash);
                    break;
                case pg::domain_code::registration_token_invalid:
                    typed = typeid(e) == typeid(pg::registration_token_invalid);
                    break;
                case pg::domain_code::registration_token_expired:
                    typed = typeid(e) == typeid(pg::registration_token_expired);
                    break;
                case pg::domain_code::registration_token_used:
                    typed = typeid(e) == typeid(pg::registration_token_used);
                    break;
                case pg::domain_code::no_tenant:
                    typed = typeid(e) == typeid(pg::no_tenant);
                    break;
                case pg::domain_code::operator_required:
                    typed = typeid(e) == typeid(pg::operator_required);
                    break;
                case pg::domain_code::quota_exceeded:
                    typed = typeid(e) == typeid(pg::quota_exceeded);
                    break;
            }
            CHECK(typed);
        }
    }
    // And from the RPCs themselves: an unknown gateway, a bad lease length, a missing command.
    CHECK_THROWS_AS(c.exec("SELECT public.awp_resolve_gateway('no-such-gateway', NULL)"),
                    pg::not_found);
    CHECK_THROWS_AS(c.exec("SELECT * FROM public.lease_command(0, 'default')"),
                    pg::invalid_argument);
    CHECK_THROWS_AS(c.exec("SELECT public.start_command(gen_random_uuid())"), pg::not_found);
}

}  // namespace domain_errors_test
