// awpctl subcommands: each *_cmd.cpp file registers itself with AWPCTL_COMMAND, so adding a
// subcommand never touches main.cpp.
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

/// What a subcommand's setup function returns: its CLI11 app and what to run when chosen.
struct command {
    CLI::App* app;
    std::function<int()> run;
};
using command_factory = command (*)(CLI::App& root, context& ctx);

/// The registered factories, in registration order.
std::vector<command_factory>& registry();

struct registrar {
    explicit registrar(command_factory f) { registry().push_back(f); }
};

}  // namespace awp::ctl

/// In a *_cmd.cpp file: AWPCTL_COMMAND(add_migrate) where add_migrate is a command_factory.
#define AWPCTL_COMMAND(factory) \
    static const ::awp::ctl::registrar factory##_registrar { &factory }
