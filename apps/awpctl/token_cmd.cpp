// awpctl token: mint access tokens (lands with the crypto module).
#include <iostream>

#include "commands.hpp"

namespace awp::ctl {

command add_token(CLI::App& root, context&) {
    auto* app = root.add_subcommand("token", "Mint an anon, authenticated or service_role JWT");
    return {app, [] {
                std::cerr << "awpctl token: not built yet\n";
                return 1;
            }};
}

}  // namespace awp::ctl
