// awpctl subcommands: each file registers its own on the shared CLI11 app.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace awp::ctl {

/// Options every subcommand shares.
struct context {
    std::string database_url;  // --database-url / DATABASE_URL
    bool json = false;         // --json: machine-readable output
};

/// A subcommand registers itself and returns the code to run when it was chosen.
using command_fn = std::function<int()>;
struct command {
    CLI::App* app;
    command_fn run;
};

command add_migrate(CLI::App& root, context& ctx);
command add_status(CLI::App& root, context& ctx);
command add_token(CLI::App& root, context& ctx);

}  // namespace awp::ctl
