// Applies sql/ migrations under an advisory lock, refusing edited history, then the repeatable
// files (sql/functions) that are new or changed.
#include "awp/core/migrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "awp/core/log.hpp"

namespace awp::core::migrate {
namespace fs = std::filesystem;
namespace {

// pg_advisory_lock key: any constant; 0x617770 is "awp".
constexpr const char* kLockKey = "6387568";

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw error("cannot read " + p.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string checksum(pg::connection& conn, const std::string& sql) {
    return conn.exec("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", {sql})
        .get<std::string>(0, 0);
}

// Runs one file and records it, in one transaction; a failure names the file.
void run_file(pg::connection& conn, const std::string& name, const std::string& sql,
              const std::string& record, const pg::params& params) {
    pg::transaction tx(conn);
    try {
        conn.exec_script(sql);
    } catch (const pg::sql_error& e) {
        throw error(name + ": " + e.what() + (e.detail().empty() ? "" : " (" + e.detail() + ")"));
    }
    conn.exec(record, params);
    tx.commit();
}

// The repeatable files: after the numbered ones, each applied again only when it changed.
void apply_repeatable(pg::connection& conn, const fs::path& dir, report& rep) {
    const auto files = list_repeatable(dir);
    if (!conn.exec("SELECT to_regclass('public.schema_repeatables') IS NOT NULL").get<bool>(0, 0)) {
        // Row-level security without a policy: no API role reads it (like schema_migrations, it
        // holds names and checksums only).
        pg::transaction tx(conn);
        conn.exec_script(
            "CREATE TABLE public.schema_repeatables ("
            " name text PRIMARY KEY,"
            " checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now());"
            "ALTER TABLE public.schema_repeatables ENABLE ROW LEVEL SECURITY;"
            "REVOKE ALL ON public.schema_repeatables FROM PUBLIC;");
        tx.commit();
    }
    auto recorded = conn.exec("SELECT name, checksum FROM schema_repeatables");
    for (const auto& f : files) {
        const auto sum = checksum(conn, f.sql);
        bool same = false;
        for (int j = 0; j < recorded.size(); ++j) {
            if (recorded.text(j, 0) == f.name && recorded.text(j, 1) == sum) same = true;
        }
        if (same) {
            ++rep.repeatable_unchanged;
            continue;
        }
        run_file(
            conn, f.name, f.sql,
            "INSERT INTO schema_repeatables (name, checksum) VALUES ($1, $2) "
            "ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()",
            {f.name, sum});
        log::info("repeatable migration applied", {{"file", f.name}});
        rep.repeatable_applied.push_back(f.name);
    }
}

fs::path exe_dir() {
    std::error_code ec;
    auto p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path{} : p.parent_path();
}

}  // namespace

bool is_current(std::string_view applied) { return !applied.empty() && applied >= schema_version; }

fs::path default_sql_dir() {
    if (const char* env = std::getenv("AWP_SQL_DIR"); env && *env) return env;
    if (auto d = exe_dir(); !d.empty()) {
        auto installed = d / ".." / "share" / "awp" / "sql";
        if (fs::is_directory(installed)) return fs::weakly_canonical(installed);
    }
#ifdef AWP_SQL_DIR
    return AWP_SQL_DIR;
#else
    return "sql";
#endif
}

std::vector<migration> list(const fs::path& dir) {
    if (!fs::is_directory(dir)) throw error("migrations folder " + dir.string() + " not found");
    static const std::regex name(R"(^\d{4}_[A-Za-z0-9_]+\.sql$)");
    std::vector<migration> out;
    for (const auto& e : fs::directory_iterator(dir)) {
        const auto file = e.path().filename().string();
        if (!e.is_regular_file() || !std::regex_match(file, name)) continue;
        out.push_back({e.path().stem().string(), e.path(), read_file(e.path())});
    }
    std::sort(out.begin(), out.end(),
              [](const migration& a, const migration& b) { return a.version < b.version; });
    for (std::size_t i = 1; i < out.size(); ++i) {
        if (out[i].version.substr(0, 4) == out[i - 1].version.substr(0, 4)) {
            throw error("two migrations share the number " + out[i].version.substr(0, 4) + ": " +
                        out[i - 1].path.filename().string() + " and " +
                        out[i].path.filename().string());
        }
    }
    return out;
}

std::vector<repeatable> list_repeatable(const fs::path& dir) {
    const auto sub = dir / repeatable_dir;
    std::vector<repeatable> out;
    if (!fs::is_directory(sub)) return out;
    for (const auto& e : fs::directory_iterator(sub)) {
        const auto file = e.path().filename().string();
        if (!e.is_regular_file() || e.path().extension() != ".sql") continue;
        out.push_back({std::string(repeatable_dir) + "/" + file, e.path(), read_file(e.path())});
    }
    std::sort(out.begin(), out.end(),
              [](const repeatable& a, const repeatable& b) { return a.name < b.name; });
    return out;
}

std::string current_version(pg::connection& conn) {
    auto exists = conn.exec("SELECT to_regclass('public.schema_migrations') IS NOT NULL");
    if (!exists.get<bool>(0, 0)) return "";
    auto v = conn.exec("SELECT max(version) FROM schema_migrations");
    return v.get_optional<std::string>(0, 0).value_or("");
}

report apply(pg::connection& conn, const fs::path& dir) {
    const auto files = list(dir);
    report rep;
    conn.exec(std::string("SELECT pg_advisory_lock(") + kLockKey + ")");
    struct unlock {
        pg::connection& c;
        ~unlock() {
            try {
                c.exec(std::string("SELECT pg_advisory_unlock(") + kLockKey + ")");
            } catch (...) {  // a dead session releases its locks anyway
            }
        }
    } guard{conn};

    conn.exec(
        "CREATE TABLE IF NOT EXISTS public.schema_migrations ("
        " version text PRIMARY KEY,"
        " checksum text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())");
    auto applied = conn.exec("SELECT version, checksum FROM schema_migrations ORDER BY version");

    // Check all history before changing anything.
    std::vector<std::string> sums;
    for (const auto& m : files) sums.push_back(checksum(conn, m.sql));
    for (int i = 0; i < applied.size(); ++i) {
        const auto version = applied.get<std::string>(i, 0);
        const auto sum = applied.get<std::string>(i, 1);
        auto it = std::find_if(files.begin(), files.end(),
                               [&](const migration& m) { return m.version == version; });
        if (it == files.end()) {
            throw error("migration " + version + " is applied but its file is missing from " +
                        dir.string() + " (is this an older awp?)");
        }
        const auto idx = static_cast<std::size_t>(it - files.begin());
        if (sums[idx] != sum) {
            throw error(it->path.filename().string() +
                        " was edited after it was applied (checksum differs); migrations are "
                        "forward-only: put the change in a new file");
        }
    }
    for (std::size_t i = 0; i < files.size(); ++i) {
        const auto& m = files[i];
        bool done = false;
        for (int j = 0; j < applied.size(); ++j) {
            if (applied.text(j, 0) == m.version) done = true;
        }
        if (done) {
            ++rep.already_applied;
            continue;
        }
        run_file(conn, m.path.filename().string(), m.sql,
                 "INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)",
                 {m.version, sums[i]});
        log::info("migration applied", {{"version", m.version}});
        rep.applied.push_back(m.version);
    }
    // awp's own sql folder without its functions: a packaging that ships only the numbered
    // files would leave every function at its last numbered definition, silently.
    if (!files.empty() && is_current(files.back().version) &&
        !fs::is_directory(dir / repeatable_dir)) {
        throw error("the repeatable folder " + (dir / repeatable_dir).string() +
                    " is missing (the numbered migrations were applied): install the whole sql/ "
                    "folder");
    }
    apply_repeatable(conn, dir, rep);
    if (!rep.applied.empty() || !rep.repeatable_applied.empty()) {
        // The schema changed: PostgREST (behind a Supabase-style stack) and the api-gateway's
        // data API reload their schema cache on this signal (docs/data-api.md).
        conn.exec("NOTIFY pgrst, 'reload schema'");
    }
    return rep;
}

}  // namespace awp::core::migrate
