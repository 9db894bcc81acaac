// Three gateways for the gateway-credential tests: A and B of one tenant, C of another, each
// with an agent, a command, an inbox item and a secret, and a knowledge page per tenant.
#pragma once

#include <string>

#include "schema_helpers.hpp"

namespace awp::schema_test {

struct gateway_world {
    awp::test::scoped_database db;
    pg::connection admin = db.admin();
    std::string t1 = new_tenant(admin, awp::test::random_name("t1-"));
    std::string t2 = new_tenant(admin, awp::test::random_name("t2-"));
    // A and B: two gateways of one tenant; C: another tenant's.
    std::string a_slug = awp::test::random_name("gwa-"), b_slug = awp::test::random_name("gwb-"),
                c_slug = awp::test::random_name("gwc-");
    std::string a = new_gateway(admin, t1, a_slug), b = new_gateway(admin, t1, b_slug),
                c = new_gateway(admin, t2, c_slug);
    std::string a_agent = new_agent(admin, t1, "ana", a), b_agent = new_agent(admin, t1, "bob", b),
                c_agent = new_agent(admin, t2, "cid", c);
    std::string a_cmd = command(t1, a_agent), b_cmd = command(t1, b_agent),
                c_cmd = command(t2, c_agent);
    std::string a_item = item(t1, a_agent), b_item = item(t1, b_agent), c_item = item(t2, c_agent);
    std::string a_secret = secret(t1, a, "A_TOKEN"), b_secret = secret(t1, b, "B_TOKEN"),
                c_secret = secret(t2, c, "C_TOKEN");
    std::string t1_page = page(t1, "Tenant one"), t2_page = page(t2, "Tenant two");

    gateway_world() {
        for (const auto& gw : {b, c}) {
            admin.exec("SELECT * FROM daemon_heartbeat($1, 'command-runner')", {gw});
        }
        admin.exec("INSERT INTO tasks (tenant_id, title) VALUES ($1, 'one'), ($2, 'two')",
                   {t1, t2});
    }

    std::string command(const std::string& tenant, const std::string& agent) {
        return one(admin,
                   "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) "
                   "VALUES ($1, $2, 'update', '{}') RETURNING id",
                   {tenant, agent});
    }
    std::string item(const std::string& tenant, const std::string& agent) {
        return one(admin,
                   "SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', $3, 'title', 'summary', "
                   "'{}')",
                   {tenant, agent, awp::test::random_name("k")});
    }
    std::string secret(const std::string& tenant, const std::string& gateway,
                       const std::string& key) {
        return one(admin,
                   "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) "
                   "VALUES ($1, $2, $3, 'enc:v1:aaaa.bbbb.cccc') RETURNING id",
                   {tenant, gateway, key});
    }
    std::string page(const std::string& tenant, const std::string& title) {
        return one(admin,
                   "INSERT INTO knowledge_items (tenant_id, kind, title, plain_text) "
                   "VALUES ($1, 'page', $2, 'text') RETURNING id",
                   {tenant, title});
    }
};

}  // namespace awp::schema_test
