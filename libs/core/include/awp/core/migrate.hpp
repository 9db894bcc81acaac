// Schema migrations. Two kinds of files in sql/ (sql/README.md):
//   - numbered, sql/NNNN_name.sql: history, applied once each in order, each in its own
//     transaction, recorded in schema_migrations with a checksum (an applied file never changes);
//   - repeatable, sql/functions/<domain>.sql: the current definition of every function, applied
//     after the numbered ones in file-name order, each in its own transaction, and again whenever
//     its checksum changes (recorded in schema_repeatables).
// All of it under one advisory lock.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "awp/core/pg.hpp"

namespace awp::core::migrate {

/// The schema this awp brings and needs: the number of the last sql/NNNN file it ships (a
/// database whose max(schema_migrations.version) sorts below it needs `awpctl migrate`).
/// Held to the sql/ folder by a unit test: bump it with every new numbered migration.
inline constexpr std::string_view schema_version = "0047";

/// True when `applied` (max(version) of schema_migrations, e.g. "0023_gateway_credentials")
/// is schema_version or newer.
bool is_current(std::string_view applied);

struct migration {
    std::string version;  // file name without .sql, e.g. 0003_tables
    std::filesystem::path path;
    std::string sql;
};

/// A repeatable file: name is its path under the sql folder, e.g. functions/commands.sql.
struct repeatable {
    std::string name;
    std::filesystem::path path;
    std::string sql;
};

struct report {
    std::vector<std::string> applied;
    std::size_t already_applied = 0;
    std::vector<std::string> repeatable_applied;  // new or changed since they were last applied
    std::size_t repeatable_unchanged = 0;
};

/// The folder of repeatable files inside the sql folder.
inline constexpr std::string_view repeatable_dir = "functions";

/// The sql/ folder: AWP_SQL_DIR, else <exe>/../share/awp/sql, else the source tree's.
std::filesystem::path default_sql_dir();

/// Every NNNN_*.sql file of `dir` in lexical order. Throws error when the folder is unusable.
std::vector<migration> list(const std::filesystem::path& dir);

/// Every *.sql file of `dir`/functions in file-name order (none when the folder is absent).
std::vector<repeatable> list_repeatable(const std::filesystem::path& dir);

/// Applies what is missing: the numbered files not applied yet, then the repeatable files that
/// are new or changed. Throws error, without applying anything, when a numbered file that was
/// applied has changed since (migrations are forward-only) or an applied one is gone; a file
/// that fails throws error naming the file, with Postgres' message (its transaction rolled back).
/// awp's own folder (its last file is schema_version or newer) must have functions/. A run that
/// applied anything ends with NOTIFY pgrst, 'reload schema' (schema caches reload on it).
report apply(pg::connection& conn, const std::filesystem::path& dir);

/// The highest applied version, or "" on an empty database.
std::string current_version(pg::connection& conn);

}  // namespace awp::core::migrate
