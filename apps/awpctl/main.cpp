// awpctl: the operator's command line (migrate, token, status, ...).
#include <iostream>

#include "awp/core/daemon.hpp"
#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "commands.hpp"

std::vector<awp::ctl::command_factory>& awp::ctl::registry() {
    static std::vector<command_factory> factories;
    return factories;
}

int main(int argc, char** argv) {
    using namespace awp;
    CLI::App app("awpctl: administer an awp workspace", "awpctl");
    app.require_subcommand(1);
    app.fallthrough();  // global options may follow the subcommand too
    ctl::context ctx;
    app.add_option("--database-url", ctx.database_url,
                   "Postgres connection string (else libpq's PG* variables)")
        ->envname("DATABASE_URL");
    app.add_flag("--json", ctx.json, "Machine-readable output");
    std::vector<ctl::command> commands;
    for (auto factory : ctl::registry()) commands.push_back(factory(app, ctx));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : core::daemon::kExitConfig;
    }
    core::log::init("awpctl", core::log::level::warn);
    try {
        for (auto& c : commands) {
            if (c.app->parsed()) return c.run();
        }
    } catch (const core::config_error& e) {
        std::cerr << "awpctl: " << e.what() << "\n";
        return core::daemon::kExitConfig;
    } catch (const std::exception& e) {
        std::cerr << "awpctl: " << e.what() << "\n";
        return 1;
    }
    return 2;
}
