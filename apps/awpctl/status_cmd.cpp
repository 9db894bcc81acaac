// awpctl status: the workspace's schema version (queue depths land with the schema).
#include <iostream>

#include "awp/core/migrate.hpp"
#include "awp/core/pg.hpp"
#include "commands.hpp"

namespace awp::ctl {

namespace {
command add_status(CLI::App& root, context& ctx) {
    auto* app = root.add_subcommand("status", "Show the schema version and queue depths");
    return {app, [&ctx] {
                auto conn = core::pg::connection::connect(ctx.database_url);
                const auto v = core::migrate::current_version(conn);
                std::cout << "schema: " << (v.empty() ? "(empty database)" : v) << "\n";
                return 0;
            }};
}

}  // namespace

AWPCTL_COMMAND(add_status);

}  // namespace awp::ctl
