// The migrator against a real server: applies in order, once, and refuses edited history.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "awp/core/migrate.hpp"
#include "support/test_db.hpp"

namespace migrate_test {

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

namespace {
// Every function of schema public that is not an extension's: signature, full definition,
// privileges and owner, one line each.
std::vector<std::string> functions_of(pg::connection& c) {
    auto r = c.exec(
        "SELECT p.oid::regprocedure::text || ' | ' || pg_get_functiondef(p.oid) || ' | ' || "
        "coalesce(p.proacl::text, '(default)') || ' | ' || p.proowner::regrole::text "
        "FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.prokind <> 'a' "
        "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass "
        "AND d.objid = p.oid AND d.deptype = 'e') ORDER BY 1");
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(r.get<std::string>(i, 0));
    return out;
}
}  // namespace

TEST_CASE(
    "the repeatable files change no function definition, privilege or owner of a database "
    "migrated by the numbered files alone",
    "[migrate]") {
    // On a plain server, and on one that grants new functions to the API roles by default, as
    // Supabase does (the migrations revoke what they must not have).
    const bool supabase_defaults = GENERATE(false, true);
    INFO("Supabase's default privileges: " << supabase_defaults);
    awp::test::scoped_database db;
    auto c = fresh_database(db);
    if (supabase_defaults) {
        c.exec(
            "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON FUNCTIONS TO anon, "
            "authenticated, service_role");
    }
    const fs::path sql = fs::path(AWP_SOURCE_DIR) / "sql";
    temp_dir numbered;  // the same numbered files, with an empty functions/
    fs::create_directories(numbered.path / "functions");
    for (const auto& m : migrate::list(sql))
        fs::copy_file(m.path, numbered.path / m.path.filename());
    auto first = migrate::apply(c, numbered.path);
    REQUIRE(first.applied.size() == migrate::list(sql).size());
    CHECK(first.repeatable_applied.empty());
    const auto before = functions_of(c);
    CHECK(before.size() > 40);

    auto second = migrate::apply(c, sql);
    CHECK(second.applied.empty());
    const auto files = migrate::list_repeatable(sql);
    CHECK(files.size() >= 5);
    CHECK(second.repeatable_applied.size() == files.size());
    const auto after = functions_of(c);
    REQUIRE(after.size() == before.size());
    for (std::size_t i = 0; i < before.size(); ++i) {
        INFO("function " << i);
        CHECK(after[i] == before[i]);
    }
    // Each function's current definition is in exactly one repeatable file.
    auto names = c.exec(
        "SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace "
        "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass "
        "AND d.objid = p.oid AND d.deptype = 'e') ORDER BY 1");
    for (int i = 0; i < names.size(); ++i) {
        const auto head = "FUNCTION public." + names.get<std::string>(i, 0) + "(";
        int found = 0;
        for (const auto& f : files) {
            if (f.sql.find("CREATE OR REPLACE " + head) != std::string::npos) ++found;
        }
        INFO(head);
        CHECK(found == 1);
    }
    CHECK(migrate::current_version(c) == migrate::list(sql).back().version);
}

TEST_CASE(
    "a repeatable file is applied after the numbered ones, again only when it changed, and "
    "leaves the schema version alone",
    "[migrate]") {
    awp::test::scoped_database db;
    auto c = fresh_database(db);
    temp_dir dir;
    fs::create_directories(dir.path / "functions");
    dir.write("0001_a.sql", "CREATE TABLE t (v int);");
    dir.write("functions/b.sql",
              "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;");
    dir.write("functions/a.sql", "INSERT INTO t VALUES (1);");
    dir.write("functions/notes.md", "not sql");
    auto rep = migrate::apply(c, dir.path);
    CHECK(rep.applied == std::vector<std::string>{"0001_a"});
    CHECK(rep.repeatable_applied == std::vector<std::string>{"functions/a.sql", "functions/b.sql"});
    CHECK(c.exec("SELECT f()").get<int>(0, 0) == 1);
    CHECK(migrate::current_version(c) == "0001_a");

    auto again = migrate::apply(c, dir.path);
    CHECK(again.repeatable_applied.empty());
    CHECK(again.repeatable_unchanged == 2);
    CHECK(c.exec("SELECT count(*) FROM t").get<int>(0, 0) == 1);

    dir.write("functions/b.sql",
              "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$;");
    auto changed = migrate::apply(c, dir.path);
    CHECK(changed.repeatable_applied == std::vector<std::string>{"functions/b.sql"});
    CHECK(changed.repeatable_unchanged == 1);
    CHECK(c.exec("SELECT f()").get<int>(0, 0) == 2);
    CHECK(c.exec("SELECT count(*) FROM t").get<int>(0, 0) == 1);
    CHECK(migrate::current_version(c) == "0001_a");
    // No API role reads the record (row-level security, no policy), like the migrations' own.
    CHECK(c.exec("SELECT relrowsecurity FROM pg_class WHERE oid = 'schema_repeatables'::regclass")
              .get<bool>(0, 0));
}

TEST_CASE("a failing repeatable file names itself and Postgres' message and changes nothing",
          "[migrate]") {
    awp::test::scoped_database db;
    auto c = fresh_database(db);
    temp_dir dir;
    fs::create_directories(dir.path / "functions");
    dir.write("0001_a.sql", "CREATE TABLE t (v int);");
    dir.write("functions/a.sql",
              "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;");
    migrate::apply(c, dir.path);
    dir.write("functions/a.sql",
              "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 3 $$;\n"
              "CREATE OR REPLACE FUNCTION g() RETURNS int LANGUAGE sql AS $$ SELECT nope $$;");
    try {
        migrate::apply(c, dir.path);
        FAIL("bad repeatable file applied");
    } catch (const awp::core::error& e) {
        const std::string what = e.what();
        CHECK(what.find("functions/a.sql") != std::string::npos);
        CHECK(what.find("column \"nope\" does not exist") != std::string::npos);
    }
    CHECK(c.exec("SELECT f()").get<int>(0, 0) == 1);
    CHECK(c.exec("SELECT to_regprocedure('g()') IS NULL").get<bool>(0, 0));
}

TEST_CASE("awp's sql folder without functions/ is refused after its numbered migrations",
          "[migrate]") {
    awp::test::scoped_database db;
    auto c = fresh_database(db);
    temp_dir dir;
    const auto last = std::string(migrate::schema_version) + "_last";
    dir.write("0001_a.sql", "CREATE TABLE t (v int);");
    dir.write(last + ".sql", "CREATE TABLE u (v int);");
    try {
        migrate::apply(c, dir.path);
        FAIL("a folder without its functions accepted");
    } catch (const awp::core::error& e) {
        CHECK(std::string(e.what()).find("functions is missing") != std::string::npos);
    }
    CHECK(migrate::current_version(c) == last);
    fs::create_directories(dir.path / "functions");
    CHECK(migrate::apply(c, dir.path).already_applied == 2);
}

}  // namespace migrate_test
