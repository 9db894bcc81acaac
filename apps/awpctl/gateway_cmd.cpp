// awpctl gateway token: issue a single-use, expiring registration token for a new gateway host
// (its runner exchanges it once through consume_gateway_token). The token is printed once.
#include <cstdlib>
#include <iostream>
#include <optional>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/error.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "commands.hpp"

namespace awp::ctl {
namespace {

constexpr const char* kIssueSql = R"SQL(
SELECT t.token, t.token_id::text, t.tenant_id::text, t.expires_at::text
  FROM public.issue_gateway_token($1::uuid, $2, $3::integer, $4) t
)SQL";

struct token_options {
    std::string tenant_id;
    std::string label;
    int ttl_s = 3600;
};

std::string created_by() {
    const char* user = std::getenv("USER");
    return std::string("awpctl:") + (user && *user ? user : "unknown");
}

command add_gateway(CLI::App& root, context& ctx) {
    static token_options o;
    auto* app = root.add_subcommand("gateway", "Gateway lifecycle");
    app->require_subcommand(1);
    auto* token = app->add_subcommand(
        "token",
        "Issue a single-use registration token that expires (printed once; only its hash is "
        "stored). Start the new host's runner with GATEWAY_TOKEN=<token>");
    token->add_option("--tenant-id", o.tenant_id, "Tenant of the new gateway (default tenant)");
    token->add_option("--label", o.label, "Label of the new gateway (also its slug hint)");
    token->add_option("--ttl", o.ttl_s, "Seconds until the token expires (60 to 2592000)")
        ->check(CLI::Range(60, 30 * 86400))
        ->capture_default_str();
    return {app, [&ctx, token] {
                if (!token->parsed()) return 2;
                if (!o.tenant_id.empty() && !core::is_valid_uuid(o.tenant_id)) {
                    throw core::config_error("--tenant-id must be a UUID");
                }
                auto conn = core::pg::connection::connect(ctx.database_url);
                std::optional<std::string> tenant, label;
                if (!o.tenant_id.empty()) tenant = o.tenant_id;
                if (!o.label.empty()) label = o.label;
                const auto r = conn.exec(kIssueSql, {tenant, label, o.ttl_s, created_by()});
                const auto secret = r.get<std::string>(0, 0);
                if (ctx.json) {
                    rapidjson::StringBuffer buf;
                    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
                    w.StartObject();
                    w.Key("token");
                    w.String(secret.c_str());
                    w.Key("token_id");
                    w.String(r.get<std::string>(0, 1).c_str());
                    w.Key("tenant_id");
                    w.String(r.get<std::string>(0, 2).c_str());
                    w.Key("expires_at");
                    w.String(r.get<std::string>(0, 3).c_str());
                    w.EndObject();
                    std::cout << buf.GetString() << "\n";
                } else {
                    // The token alone on stdout, so GATEWAY_TOKEN=$(awpctl gateway token) works.
                    std::cout << secret << "\n";
                    std::cerr << "single-use gateway token " << r.get<std::string>(0, 1)
                              << " for tenant " << r.get<std::string>(0, 2) << ", expires "
                              << r.get<std::string>(0, 3)
                              << "; it is not shown again (only its hash is stored)\n";
                }
                return 0;
            }};
}

}  // namespace

AWPCTL_COMMAND(add_gateway);

}  // namespace awp::ctl
