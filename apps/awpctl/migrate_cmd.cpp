// awpctl migrate: apply sql/ to the database.
#include <iostream>

#include "awp/core/migrate.hpp"
#include "awp/core/pg.hpp"
#include "commands.hpp"

namespace awp::ctl {

namespace {
command add_migrate(CLI::App& root, context& ctx) {
    auto* app = root.add_subcommand(
        "migrate",
        "Apply the sql/ migrations that are missing, in order, each in its own transaction, "
        "under an advisory lock (refuses when an applied file was edited), then the "
        "repeatable sql/functions/*.sql files that are new or changed");
    static std::string dir;
    static bool check_only = false;
    app->add_option("--sql-dir", dir,
                    "Folder of NNNN_name.sql files and functions/ (default: installed sql/)")
        ->envname("AWP_SQL_DIR");
    app->add_flag("--status", check_only, "Only print the applied version");
    return {app, [&ctx] {
                auto conn = core::pg::connection::connect(ctx.database_url);
                if (check_only) {
                    const auto v = core::migrate::current_version(conn);
                    std::cout << (v.empty() ? "(empty database)" : v) << "\n";
                    return 0;
                }
                const auto path =
                    dir.empty() ? core::migrate::default_sql_dir() : std::filesystem::path(dir);
                const auto rep = core::migrate::apply(conn, path);
                for (const auto& v : rep.applied) std::cout << "applied " << v << "\n";
                for (const auto& v : rep.repeatable_applied) std::cout << "applied " << v << "\n";
                std::cout << rep.applied.size() << " applied, " << rep.already_applied
                          << " already present; repeatable: " << rep.repeatable_applied.size()
                          << " applied, " << rep.repeatable_unchanged << " unchanged\n";
                return 0;
            }};
}

}  // namespace

AWPCTL_COMMAND(add_migrate);

}  // namespace awp::ctl
