// The schema version awp needs is spelled once (core::migrate::schema_version): the number of the
// last numbered migration in sql/.
#include <catch2/catch.hpp>

#include <filesystem>

#include "awp/core/migrate.hpp"

namespace schema_version_test {

using namespace awp::core;

TEST_CASE("migrate::schema_version is the last numbered migration of sql/", "[migrate]") {
    const auto files = migrate::list(std::filesystem::path(AWP_SOURCE_DIR) / "sql");
    REQUIRE_FALSE(files.empty());
    CHECK(files.back().version.substr(0, 4) == migrate::schema_version);
    CHECK(migrate::is_current(files.back().version));
}

TEST_CASE("migrate::is_current: this awp's schema or a newer one", "[migrate]") {
    const std::string v(migrate::schema_version);
    CHECK(migrate::is_current(v + "_anything"));
    CHECK(migrate::is_current("9999_future"));
    CHECK_FALSE(migrate::is_current("0001_roles_and_tenancy"));
    CHECK_FALSE(migrate::is_current(""));
}

TEST_CASE("every repeatable file of sql/functions is found, in file-name order", "[migrate]") {
    const auto files = migrate::list_repeatable(std::filesystem::path(AWP_SOURCE_DIR) / "sql");
    REQUIRE(files.size() >= 5);
    for (std::size_t i = 1; i < files.size(); ++i) CHECK(files[i - 1].name < files[i].name);
    for (const auto& f : files) {
        CHECK(f.name.rfind("functions/", 0) == 0);
        CHECK_FALSE(f.sql.empty());
    }
}

}  // namespace schema_version_test
