// Shared helpers of the schema tests: seed rows as the superuser, catch SQLSTATEs.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <optional>
#include <string>

#include "awp/core/pg.hpp"
#include "support/test_db.hpp"

namespace awp::schema_test {

namespace pg = awp::core::pg;

inline constexpr const char* kDefaultTenant = "00000000-0000-0000-0000-000000000000";

/// The SQLSTATE the call fails with, or "" when it succeeds.
inline std::string sqlstate_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const pg::sql_error& e) {
        return e.sqlstate();
    }
    return "";
}

/// The error message the call fails with, or "" when it succeeds.
inline std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const pg::sql_error& e) {
        return e.what();
    }
    return "";
}

inline std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    REQUIRE(r.size() == 1);
    return r.is_null(0, 0) ? std::string("<null>") : std::string(r.text(0, 0));
}

inline long count(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    return std::stol(one(c, sql, p));
}

inline std::string new_tenant(pg::connection& admin, const std::string& slug) {
    return one(admin, "INSERT INTO tenants (name, slug) VALUES ($1, $1) RETURNING id", {slug});
}

inline std::string new_gateway(pg::connection& admin, const std::string& tenant,
                               const std::string& slug) {
    return one(admin,
               "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, 'ready') "
               "RETURNING id",
               {tenant, slug});
}

inline std::string new_agent(pg::connection& admin, const std::string& tenant,
                             const std::string& slug,
                             const std::optional<std::string>& gateway = std::nullopt,
                             const std::optional<std::string>& reports_to = std::nullopt) {
    return one(admin,
               "INSERT INTO agents (tenant_id, name, slug, gateway_id, reports_to_id) "
               "VALUES ($1, initcap($2), $2, $3, $4) RETURNING id",
               {tenant, slug, gateway, reports_to});
}

inline std::string default_gateway(pg::connection& admin) {
    return one(admin, "SELECT id FROM gateways WHERE tenant_id = $1 AND slug = 'default'",
               {kDefaultTenant});
}

inline std::string new_task(pg::connection& admin, const std::string& tenant,
                            const std::string& title,
                            const std::optional<std::string>& agent = std::nullopt) {
    return one(
        admin,
        "INSERT INTO tasks (tenant_id, title, assignee_agent_id) VALUES ($1, $2, $3) RETURNING id",
        {tenant, title, agent});
}

inline std::string no_dashes(std::string id) {
    std::erase(id, '-');
    return id;
}

}  // namespace awp::schema_test
