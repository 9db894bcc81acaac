// The migrator against a real server: applies in order, once, and refuses edited history.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "awp/core/migrate.hpp"
#include "support/test_db.hpp"

using namespace awp::core;
namespace fs = std::filesystem;

namespace {
struct temp_dir {
    fs::path path = fs::temp_directory_path() / awp::test::random_name("awp-sql-");
    temp_dir() { fs::create_directories(path); }
    ~temp_dir() { fs::remove_all(path); }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(path / name) << text;
    }
};

pg::connection fresh_database(awp::test::scoped_database& db) {
    auto c = db.admin();
    c.exec("DROP SCHEMA public CASCADE");
    c.exec("CREATE SCHEMA public");
    return c;
}
}  // namespace

TEST_CASE("migrations apply in order, once, and are recorded", "[migrate]") {
    awp::test::scoped_database db;
    auto c = fresh_database(db);
    temp_dir dir;
    dir.write("0002_b.sql", "INSERT INTO t VALUES (2);");
    dir.write("0001_a.sql", "CREATE TABLE t (v int); INSERT INTO t VALUES (1);");
    dir.write("README.md", "not a migration");
    auto rep = migrate::apply(c, dir.path);
    CHECK(rep.applied == std::vector<std::string>{"0001_a", "0002_b"});
    CHECK(migrate::current_version(c) == "0002_b");
    auto again = migrate::apply(c, dir.path);
    CHECK(again.applied.empty());
    CHECK(again.already_applied == 2);
    CHECK(c.exec("SELECT count(*) FROM t").get<int>(0, 0) == 2);
}

TEST_CASE("a failing migration leaves nothing behind and names its file", "[migrate]") {
    awp::test::scoped_database db;
    auto c = fresh_database(db);
    temp_dir dir;
    dir.write("0001_a.sql", "CREATE TABLE t (v int);");
    dir.write("0002_bad.sql", "CREATE TABLE half (v int); SELECT no_such_function();");
    try {
        migrate::apply(c, dir.path);
        FAIL("bad migration applied");
    } catch (const awp::core::error& e) {
        CHECK(std::string(e.what()).find("0002_bad.sql") != std::string::npos);
    }
    CHECK(migrate::current_version(c) == "0001_a");
    CHECK(c.exec("SELECT to_regclass('half') IS NULL").get<bool>(0, 0));
}

TEST_CASE("an applied migration that was edited is refused before anything runs", "[migrate]") {
    awp::test::scoped_database db;
    auto c = fresh_database(db);
    temp_dir dir;
    dir.write("0001_a.sql", "CREATE TABLE t (v int);");
    migrate::apply(c, dir.path);
    dir.write("0001_a.sql", "CREATE TABLE t (v bigint);");
    dir.write("0002_b.sql", "CREATE TABLE u (v int);");
    try {
        migrate::apply(c, dir.path);
        FAIL("edited history accepted");
    } catch (const awp::core::error& e) {
        CHECK(std::string(e.what()).find("0001_a.sql was edited") != std::string::npos);
    }
    CHECK(c.exec("SELECT to_regclass('u') IS NULL").get<bool>(0, 0));
}

TEST_CASE("two migrators at once apply each file exactly once", "[migrate]") {
    awp::test::scoped_database db;
    fresh_database(db);
    temp_dir dir;
    dir.write("0001_a.sql", "CREATE TABLE t (v int); SELECT pg_sleep(0.3);");
    dir.write("0002_b.sql", "INSERT INTO t VALUES (1);");
    std::vector<std::size_t> applied(2);
    std::vector<std::thread> ts;
    for (int i = 0; i < 2; ++i) {
        ts.emplace_back([&, i] {
            auto conn = db.admin();
            applied[std::size_t(i)] = migrate::apply(conn, dir.path).applied.size();
        });
    }
    for (auto& t : ts) t.join();
    CHECK(applied[0] + applied[1] == 2);
    auto c = db.admin();
    CHECK(c.exec("SELECT count(*) FROM t").get<int>(0, 0) == 1);
}
