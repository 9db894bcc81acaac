// Integration-test databases cloned from the migrated template.
#include "support/test_db.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "awp/core/crypto.hpp"

#include <cstdlib>
#include <random>
#include <stdexcept>

namespace awp::test {

std::string require_env(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) {
        throw std::runtime_error(std::string(name) +
                                 " is not set: run the tests through scripts/test.sh, or source "
                                 ".awp/cluster.env after scripts/pg-cluster.sh up");
    }
    return v;
}

std::string random_name(const std::string& prefix) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::string s = prefix;
    std::uniform_int_distribution<std::size_t> pick(0, sizeof kAlphabet - 2);
    for (int i = 0; i < 10; ++i) s.push_back(kAlphabet[pick(rng)]);
    return s;
}

namespace {
std::string with_dbname(const std::string& dsn, const std::string& db) {
    // Keyword/value strings: a later keyword overrides an earlier one.
    return dsn + " dbname=" + db;
}
}  // namespace

scoped_database::scoped_database() : name_(random_name("awp_t_")) {
    auto admin =
        core::pg::connection::connect(with_dbname(require_env("AWP_PG_ADMIN_DSN"), "postgres"));
    admin.exec("CREATE DATABASE " + name_ + " TEMPLATE " + kTemplateDatabase);
}

scoped_database::~scoped_database() {
    try {
        auto admin =
            core::pg::connection::connect(with_dbname(require_env("AWP_PG_ADMIN_DSN"), "postgres"));
        admin.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    } catch (...) {  // leftovers are swept by the next template build
    }
}

std::string scoped_database::admin_dsn() const {
    return with_dbname(require_env("AWP_PG_ADMIN_DSN"), name_);
}

std::string scoped_database::daemon_dsn() const {
    return "host=127.0.0.1 port=" + require_env("AWP_PG_PORT") +
           " user=awp_daemon password=" + require_env("AWP_PG_DAEMON_PASSWORD") +
           " dbname=" + name_;
}

std::string scoped_database::api_dsn() const {
    return "host=127.0.0.1 port=" + require_env("AWP_PG_PORT") +
           " user=awp_api password=" + require_env("AWP_PG_API_PASSWORD") + " dbname=" + name_;
}

std::string scoped_database::gateway_dsn(const std::string& gateway) const {
    // Roles are the cluster's, shared by every test database: tests running at once may make
    // the same role (the template's default gateway); all use the same password, and a
    // concurrent CREATE ROLE that lost the race is tried again (it then alters the role).
    const auto password = require_env("AWP_PG_GATEWAY_PASSWORD");
    std::string role;
    for (int attempt = 0;; ++attempt) {
        try {
            auto c = admin();
            role =
                c.exec("SELECT role_name FROM public.awp_gateway_role($1, $2)", {gateway, password})
                    .get<std::string>(0, 0);
            break;
        } catch (const core::pg::sql_error&) {
            if (attempt == 3) throw;
        }
    }
    return "host=127.0.0.1 port=" + require_env("AWP_PG_PORT") + " user=" + role +
           " password=" + password + " dbname=" + name_;
}

namespace {
scoped_database::pool_host make_pool_host(const std::string& database, const std::string& gateway) {
    static std::mutex m;
    static std::map<std::string, std::string> keys;  // "<database>/<gateway id>" -> key
    const auto password = require_env("AWP_PG_GATEWAY_PASSWORD");
    std::lock_guard lock(m);
    auto c = core::pg::connection::connect(with_dbname(require_env("AWP_PG_ADMIN_DSN"), database));
    const auto id = c.exec("SELECT public.awp_resolve_gateway($1, NULL)::text", {gateway})
                        .get<std::string>(0, 0);
    auto& key = keys[database + "/" + id];
    if (key.empty()) {
        // The pool login is the cluster's: as with gateway_dsn, a test that lost a concurrent
        // CREATE ROLE or ALTER ROLE tries again.
        for (int attempt = 0;; ++attempt) {
            try {
                c.exec("SELECT public.awp_gateway_pool_role($1, 'awp_pool_test')", {password});
                break;
            } catch (const core::pg::sql_error&) {
                if (attempt == 3) throw;
            }
        }
        std::string hex = id;
        hex.erase(std::remove(hex.begin(), hex.end(), '-'), hex.end());
        const std::string secret = core::crypto::base64url_encode(core::crypto::random_bytes(32));
        c.exec("SELECT * FROM public.awp_gateway_key($1, sha256(convert_to($2, 'UTF8')))",
               {id, secret});
        key = "awpk_" + hex + "_" + secret;
    }
    return {"host=127.0.0.1 port=" + require_env("AWP_PG_PORT") +
                " user=awp_pool_test password=" + password + " dbname=" + database,
            key};
}

// The value of `name=` in a keyword-form DSN ("" when absent).
std::string keyword(const std::string& dsn, const std::string& name) {
    const std::string k = name + "=";
    for (std::size_t at = dsn.find(k); at != std::string::npos; at = dsn.find(k, at + 1)) {
        if (at != 0 && dsn[at - 1] != ' ') continue;
        const std::size_t end = dsn.find(' ', at);
        return dsn.substr(at + k.size(), end == std::string::npos ? end : end - at - k.size());
    }
    return {};
}
}  // namespace

scoped_database::pool_host scoped_database::pool_login(const std::string& gateway) const {
    return make_pool_host(name_, gateway);
}

std::optional<scoped_database::pool_host> pool_login_of(const std::string& gateway_dsn) {
    const auto user = keyword(gateway_dsn, "user");
    const auto database = keyword(gateway_dsn, "dbname");
    if (!user.starts_with("awp_gw_") || database.empty() ||
        keyword(gateway_dsn, "password") != require_env("AWP_PG_GATEWAY_PASSWORD")) {
        return std::nullopt;
    }
    auto c = core::pg::connection::connect(with_dbname(require_env("AWP_PG_ADMIN_DSN"), database));
    const auto r =
        c.exec("SELECT gateway_id::text FROM gateway_roles WHERE role_name = $1", {user});
    if (r.empty()) return std::nullopt;
    return make_pool_host(database, r.get<std::string>(0, 0));
}

void as_user(core::pg::connection& c, const std::string& tenant_id, const std::string& user_id) {
    c.exec("SET ROLE authenticated");
    c.exec(
        "SELECT set_config('request.jwt.claims', json_build_object('sub', $2::text, 'role', "
        "'authenticated', 'app_metadata', json_build_object('tenant_id', $1::text))::text, false)",
        {tenant_id, user_id});
}

void as_anon(core::pg::connection& c) {
    c.exec("SET ROLE anon");
    c.exec("SELECT set_config('request.jwt.claims', '{\"role\":\"anon\"}', false)");
}

void as_service(core::pg::connection& c) {
    c.exec("SET ROLE service_role");
    c.exec("SELECT set_config('request.jwt.claims', '{\"role\":\"service_role\"}', false)");
}

void reset_role(core::pg::connection& c) {
    c.exec("RESET ROLE");
    c.exec("SELECT set_config('request.jwt.claims', '', false)");
}

}  // namespace awp::test
