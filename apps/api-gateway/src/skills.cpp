// Skills of an agent (service-role routes): knowledge items of kind skill, scope agent, with
// every change kept in knowledge_item_versions (who, when, why).
#include "awp/core/uuid.hpp"
#include "gateway.hpp"
#include "json.hpp"

namespace awp::api {

using http::http_error;

namespace {

/// The agent's (tenant, id); X-Tenant-Id narrows a slug that several tenants use.
net::awaitable<std::pair<std::string, std::string>> find_agent(db_pool::tx& t, std::string slug,
                                                               std::string tenant) {
    const pg::param tenant_param = tenant.empty() ? pg::param(std::nullopt) : pg::param(tenant);
    auto rows = co_await t.query(
        "SELECT tenant_id::text, id::text FROM public.agents "
        "WHERE slug = $1 AND ($2::uuid IS NULL OR tenant_id = $2::uuid) LIMIT 2",
        slug, tenant_param);
    if (rows.empty()) throw http_error(404, "not_found", "agent not found");
    if (rows.size() > 1) {
        throw http_error(409, "ambiguous_agent",
                         "several tenants have an agent with this slug; send X-Tenant-Id");
    }
    co_return std::make_pair(rows.get<std::string>(0, 0), rows.get<std::string>(0, 1));
}

std::string tenant_header(const request& r) {
    auto h = r.header.get("x-tenant-id");
    if (!h) return {};
    if (!core::is_valid_uuid(*h))
        throw http_error(422, "invalid_field", "X-Tenant-Id must be a UUID");
    return std::string(*h);
}

}  // namespace

net::awaitable<response> gateway::skills_get(request r) {
    auto p = require_service(r);
    auto tenant = tenant_header(r);
    auto t = co_await db_->begin(p);
    auto [tid, agent] = co_await find_agent(t, r.param("slug"), tenant);
    auto rows = co_await t.query_and_commit(
        "SELECT coalesce(json_agg(json_build_object('id', k.id, 'title', k.title, 'kind', k.kind, "
        "'scope', k.scope, 'plain_text', k.plain_text, 'created_at', k.created_at, "
        "'updated_at', k.updated_at, 'version', (SELECT max(v.version) FROM "
        "public.knowledge_item_versions v WHERE v.knowledge_item_id = k.id)) "
        "ORDER BY k.updated_at DESC), '[]')::text FROM public.knowledge_items k "
        "WHERE k.tenant_id = $1 AND k.agent_id = $2 AND k.kind = 'skill' AND k.scope = 'agent' "
        "AND k.archived_at IS NULL",
        tid, agent);
    co_return response::json(200, rows.get<std::string>(0, 0));
}

net::awaitable<response> gateway::skill_versions(request r) {
    auto p = require_service(r);
    auto tenant = tenant_header(r);
    const auto id = r.param("id");
    if (!core::is_valid_uuid(id)) throw http_error(404, "not_found", "skill not found");
    auto t = co_await db_->begin(p);
    auto [tid, agent] = co_await find_agent(t, r.param("slug"), tenant);
    auto rows = co_await t.query_and_commit(
        "SELECT (SELECT coalesce(json_agg(json_build_object('version', v.version, 'title', "
        "v.title, 'plain_text', v.plain_text, 'reason', v.reason, 'changed_by', v.changed_by, "
        "'changed_at', v.changed_at) ORDER BY v.version DESC), '[]') FROM "
        "public.knowledge_item_versions v WHERE v.knowledge_item_id = k.id)::text "
        "FROM public.knowledge_items k WHERE k.id = $1 AND k.tenant_id = $2 AND k.agent_id = $3 "
        "AND k.kind = 'skill'",
        id, tid, agent);
    if (rows.empty()) throw http_error(404, "not_found", "skill not found");
    co_return response::json(200, rows.get<std::string>(0, 0));
}

net::awaitable<response> gateway::skills_post(request r) {
    auto p = require_service(r);
    auto tenant = tenant_header(r);
    if (r.media_type() != "application/json") {
        throw http_error(415, "unsupported_media_type", "send application/json");
    }
    auto body = parse_object_body(r.body);
    auto title = req_string(body, "title");
    auto content = req_string(body, "content");
    auto action = req_string(body, "action");
    if (action != "create" && action != "update") {
        throw http_error(422, "invalid_field", "action must be 'create' or 'update'");
    }
    auto reason = opt_string(body, "reason").value_or("");
    auto item = opt_string(body, "knowledge_item_id");
    if (action == "update" && (!item || item->empty())) {
        throw http_error(422, "invalid_field", "knowledge_item_id is required for updates");
    }
    if (item && !core::is_valid_uuid(*item)) {
        throw http_error(422, "invalid_field", "knowledge_item_id must be a UUID");
    }
    const auto slug = r.param("slug");
    auto t = co_await db_->begin(p);
    auto [tid, agent] = co_await find_agent(t, slug, tenant);
    auto actor = r.header.get("x-actor").value_or("");
    // Named, not a ?: temporary inside the co_await: GCC 12 frees such a temporary twice
    // (docs/coroutines.md).
    const std::string changed_by = actor.empty() ? "agent:" + slug : std::string(actor);
    co_await t.query(
        "SELECT set_config('awp.change_reason', $1, true), set_config('awp.changed_by', $2, true)",
        reason, changed_by);
    std::string id;
    if (action == "create") {
        auto row = co_await t.query(
            "INSERT INTO public.knowledge_items (tenant_id, kind, title, plain_text, scope, "
            "agent_id) VALUES ($1, 'skill', btrim($2), btrim($3), 'agent', $4) RETURNING id::text",
            tid, title, content, agent);
        id = row.get<std::string>(0, 0);
    } else {
        auto row = co_await t.query(
            "UPDATE public.knowledge_items SET title = btrim($1), plain_text = btrim($2) "
            "WHERE id = $3 AND tenant_id = $4 AND agent_id = $5 AND kind = 'skill' "
            "AND scope = 'agent' RETURNING id::text",
            title, content, *item, tid, agent);
        if (row.empty()) throw http_error(404, "not_found", "no such skill of this agent");
        id = row.get<std::string>(0, 0);
    }
    auto v = co_await t.query_and_commit(
        "SELECT coalesce(max(version), 0) FROM public.knowledge_item_versions "
        "WHERE knowledge_item_id = $1",
        id);
    json_out o;
    o.w.StartObject();
    o.kv("id", id);
    o.kv("action", action == "create" ? "created" : "updated");
    o.key("version");
    o.w.Int(v.get<int>(0, 0));
    o.w.EndObject();
    co_return response::json(action == "create" ? 201 : 200, o.str());
}

}  // namespace awp::api
