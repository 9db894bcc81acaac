// awpctl user add: create an HTTP login user (app_users) in a tenant, or in none, with an
// Argon2id hash.
#include <sodium.h>

#include <iostream>

#include "awp/core/error.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "commands.hpp"

namespace awp::ctl {
namespace {

struct user_options {
    std::string email;
    std::string password;
    std::string tenant_id = "00000000-0000-0000-0000-000000000000";
    std::string display_name;
    bool is_operator = false;
    bool no_tenant = false;
};

command add_user(CLI::App& root, context& ctx) {
    static user_options o;
    auto* user = root.add_subcommand("user", "Manage HTTP login users");
    auto* add = user->add_subcommand("add", "Create a login user in a tenant");
    add->add_option("--email", o.email, "Login email")->required();
    add->add_option("--password", o.password,
                    "Password (else AWP_USER_PASSWORD, else read from stdin)")
        ->envname("AWP_USER_PASSWORD");
    auto* tenant =
        add->add_option("--tenant-id", o.tenant_id, "Tenant UUID")->capture_default_str();
    add->add_flag("--no-tenant", o.no_tenant,
                  "A user of no tenant (as a self-service sign-up): signs in to /auth/v1 and "
                  "the data API, sees none of awp's tables; /api refuses the session (no_tenant)")
        ->excludes(tenant);
    add->add_option("--name", o.display_name, "Display name");
    add->add_flag("--operator", o.is_operator,
                  "An operator: may register and switch workspaces and change the host's "
                  "configuration (docs/security.md)");
    user->require_subcommand(1);
    return {user, [&ctx] {
                if (sodium_init() < 0) throw core::error("libsodium failed to initialise");
                if (!o.no_tenant && !core::is_valid_uuid(o.tenant_id)) {
                    throw core::config_error("--tenant-id must be a UUID");
                }
                if (o.password.empty()) std::getline(std::cin, o.password);
                if (o.password.size() < 8) {
                    throw core::config_error("the password must be at least 8 characters");
                }
                char hash[crypto_pwhash_STRBYTES];
                if (crypto_pwhash_str(hash, o.password.c_str(), o.password.size(),
                                      crypto_pwhash_OPSLIMIT_INTERACTIVE,
                                      crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
                    throw core::error("out of memory hashing the password");
                }
                auto c = core::pg::connection::connect(ctx.database_url);
                auto r = c.exec(
                    "INSERT INTO public.app_users (tenant_id, email, password_hash, display_name, "
                    "is_operator) VALUES ($1::uuid, $2, $3, NULLIF($4, ''), $5::boolean) "
                    "RETURNING id::text",
                    {o.no_tenant ? core::pg::param(std::nullopt) : core::pg::param(o.tenant_id),
                     o.email, std::string(hash), o.display_name,
                     std::string(o.is_operator ? "true" : "false")});
                if (ctx.json) {
                    std::cout << "{\"id\":\"" << r.get<std::string>(0, 0) << "\"}\n";
                } else {
                    std::cout << "created " << (o.is_operator ? "operator " : "user ")
                              << r.get<std::string>(0, 0) << " (" << o.email << ")\n";
                }
                return 0;
            }};
}

}  // namespace

AWPCTL_COMMAND(add_user);

}  // namespace awp::ctl
