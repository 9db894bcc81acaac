// awpctl token: mint Supabase-style access tokens (HS256, JWT_SECRET) for scripts and tests.
#include <chrono>
#include <iostream>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/uuid.hpp"
#include "commands.hpp"

namespace awp::ctl {
namespace {

struct token_options {
    std::string secret;
    std::string role = "authenticated";
    std::string user_id;
    std::string tenant_id;
    std::string email;
    long ttl_seconds = 3600;
    bool anon_key = false;
};

std::string claims_json(const token_options& o) {
    using clock = std::chrono::system_clock;
    const auto now =
        std::chrono::duration_cast<std::chrono::seconds>(clock::now().time_since_epoch()).count();
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    w.StartObject();
    w.Key("role");
    w.String(o.role.c_str());
    w.Key("iss");
    w.String("awp");
    w.Key("iat");
    w.Int64(now);
    w.Key("exp");
    w.Int64(now + o.ttl_seconds);
    if (o.role == "authenticated") {
        w.Key("sub");
        w.String(o.user_id.c_str());
        w.Key("aud");
        w.String("authenticated");
        if (!o.email.empty()) {
            w.Key("email");
            w.String(o.email.c_str());
        }
        w.Key("app_metadata");
        w.StartObject();
        w.Key("tenant_id");
        w.String(o.tenant_id.c_str());
        w.EndObject();
    }
    w.EndObject();
    return {buf.GetString(), buf.GetSize()};
}

command add_token(CLI::App& root, context&) {
    static token_options o;
    auto* app = root.add_subcommand(
        "token",
        "Mint an anon, authenticated or service_role access token (HS256 JWT signed with "
        "JWT_SECRET) and print it");
    app->add_option("--jwt-secret", o.secret, "Signing secret (at least 32 characters)")
        ->envname("JWT_SECRET")
        ->required();
    app->add_option("--role", o.role, "anon, authenticated or service_role")
        ->check(CLI::IsMember({"anon", "authenticated", "service_role"}))
        ->capture_default_str();
    app->add_option("--user-id", o.user_id, "sub claim (authenticated; a UUID)");
    app->add_option("--tenant-id", o.tenant_id, "app_metadata.tenant_id (authenticated; a UUID)");
    app->add_option("--email", o.email, "email claim (authenticated)");
    app->add_option("--ttl", o.ttl_seconds, "Lifetime in seconds")
        ->check(CLI::Range(1L, 31L * 24 * 3600))
        ->capture_default_str();
    app->add_flag("--anon", o.anon_key,
                  "Print the anon key of the gateway's own database instead: the one GET "
                  "/api/config gives (the same for the same JWT_SECRET, every time)");
    return {
        app, [] {
            if (o.secret.size() < 32) {
                throw core::config_error("JWT_SECRET must be at least 32 characters");
            }
            if (o.anon_key) {
                std::cout << core::crypto::anon_key(o.secret) << "\n";
                return 0;
            }
            if (o.role == "authenticated") {
                if (!core::is_valid_uuid(o.user_id)) {
                    throw core::config_error("--user-id must be a UUID for role authenticated");
                }
                if (!core::is_valid_uuid(o.tenant_id)) {
                    throw core::config_error("--tenant-id must be a UUID for role authenticated");
                }
            }
            std::cout << core::crypto::jwt_sign_hs256(claims_json(o), o.secret) << "\n";
            return 0;
        }};
}

}  // namespace

AWPCTL_COMMAND(add_token);

}  // namespace awp::ctl
