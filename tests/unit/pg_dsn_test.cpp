// pg::dsn_login, dsn_with_login, dsn_with_keepalives: connection strings rewritten without a
// server (the wake relay's login check, the listener's keepalives).
#include <catch2/catch.hpp>

#include "awp/core/error.hpp"
#include "awp/core/pg.hpp"

namespace pg_dsn_test {

namespace pg = awp::core::pg;

TEST_CASE("pg: a DSN's login is read and replaced, the rest kept", "[pg][dsn]") {
    const auto l =
        pg::dsn_login("postgresql://awp_gw_x:p%40ss@db.example:6432/awp?sslmode=require");
    CHECK(l.user == "awp_gw_x");
    CHECK(l.password == "p@ss");
    const std::string s = pg::dsn_with_login("postgresql://a:b@db.example:6432/awp?sslmode=require",
                                             {"awp_gw_y", "it's \\ x"});
    const auto back = pg::dsn_login(s);
    CHECK(back.user == "awp_gw_y");
    CHECK(back.password == "it's \\ x");  // quoted for libpq, not cut or injected
    CHECK(s.find("host='db.example'") != std::string::npos);
    CHECK(s.find("port='6432'") != std::string::npos);
    CHECK(s.find("sslmode='require'") != std::string::npos);
    CHECK(s.find("user='a'") == std::string::npos);
    CHECK_THROWS_AS(pg::dsn_with_login("postgresql://[bad", {"u", "p"}), awp::core::config_error);
}

TEST_CASE("pg: keepalives are added to a DSN that does not set its own", "[pg][dsn]") {
    const std::string s = pg::dsn_with_keepalives("postgresql://u:p@h:5432/d");
    CHECK(s.find("keepalives_idle='30'") != std::string::npos);
    CHECK(s.find("keepalives_count='3'") != std::string::npos);
    CHECK(pg::dsn_login(s).password == "p");
    const std::string own = pg::dsn_with_keepalives("host=h keepalives_idle=5");
    CHECK(own.find("keepalives_idle='5'") != std::string::npos);
    CHECK(own.find("keepalives_idle='30'") == std::string::npos);
    CHECK(pg::dsn_with_keepalives("postgresql://[bad") == "postgresql://[bad");
}

}  // namespace pg_dsn_test
