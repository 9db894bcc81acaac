// sql/schema.snapshot.sql is the schema the migrations make: rendered again from this test's
// freshly migrated database by the same script that writes it, it must be the same text.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/test_db.hpp"

namespace schema_snapshot_test {

namespace fs = std::filesystem;

namespace {
// Runs a shell command; its stdout, and its exit status in `rc`.
std::string run(const std::string& cmd, int& rc) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    while (auto n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    rc = ::pclose(p);
    return out;
}

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}
}  // namespace

TEST_CASE("sql/schema.snapshot.sql is the schema the migrations make", "[schema][snapshot]") {
    awp::test::scoped_database db;
    const fs::path src = AWP_SOURCE_DIR;
    const auto checked_in = src / "sql" / "schema.snapshot.sql";
    const auto fresh = fs::temp_directory_path() / awp::test::random_name("awp-snapshot-");
    int rc = 0;
    run((src / "scripts" / "schema-snapshot.sh").string() + " --render '" + db.admin_dsn() + "' >" +
            fresh.string() + " 2>&1",
        rc);
    const auto rendered = read(fresh);
    INFO(rendered.substr(0, 2000));
    REQUIRE(rc == 0);
    if (rendered != read(checked_in)) {
        const auto diff =
            run("diff -u " + checked_in.string() + " " + fresh.string() + " | head -200", rc);
        fs::remove(fresh);
        FAIL("the migrated schema differs from sql/schema.snapshot.sql (- checked in, + now):\n"
             << diff
             << "\nIf the change is intended, run scripts/schema-snapshot.sh and commit "
                "sql/schema.snapshot.sql with the migration.");
    }
    fs::remove(fresh);
}

}  // namespace schema_snapshot_test
