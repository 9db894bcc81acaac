// Schema migrations: sql/NNNN_name.sql applied in order, each in its own transaction, recorded
// in schema_migrations with a checksum, under an advisory lock.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "awp/core/pg.hpp"

namespace awp::core::migrate {

struct migration {
    std::string version;  // file name without .sql, e.g. 0003_tables
    std::filesystem::path path;
    std::string sql;
};

struct report {
    std::vector<std::string> applied;
    std::size_t already_applied = 0;
};

/// The sql/ folder: AWP_SQL_DIR, else <exe>/../share/awp/sql, else the source tree's.
std::filesystem::path default_sql_dir();

/// Every NNNN_*.sql file of `dir` in lexical order. Throws error when the folder is unusable.
std::vector<migration> list(const std::filesystem::path& dir);

/// Applies what is missing. Throws error, without applying anything, when a file that was
/// applied has changed since (migrations are forward-only) or an applied one is gone.
report apply(pg::connection& conn, const std::filesystem::path& dir);

/// The highest applied version, or "" on an empty database.
std::string current_version(pg::connection& conn);

}  // namespace awp::core::migrate
