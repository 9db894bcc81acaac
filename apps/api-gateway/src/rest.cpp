// The data API's HTTP side (/rest/v1): the request handed to awp::rest (parse → prepare), its
// statement run under the caller's role and claims in one round trip on the gateway's own
// database, the answer shaped as PostgREST's; and the schema cache, loaded from the catalog and
// reloaded on `NOTIFY pgrst, 'reload schema'` (what awpctl migrate and PostgREST tooling send),
// after every reconnect of that LISTEN, and every API_REST_SCHEMA_POLL seconds.
#include <chrono>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "awp/rest/query.hpp"
#include "awp/rest/request.hpp"
#include "gateway.hpp"
#include "json.hpp"
#include "rest_state.hpp"
#include "sql_text.hpp"

namespace awp::api {

/// The request's headers as PostgREST hands them to SQL (request.headers): lower-case names,
/// the cookie header left out, the first of repeated names kept.
std::string request_headers_json(const request& r) {
    core::json::writer j;
    j.w.StartObject();
    std::vector<std::string> seen;
    for (const auto& [name, value] : r.header.fields()) {
        std::string n = name;
        for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (n == "cookie" || std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
        seen.push_back(n);
        j.kv(n, value);
    }
    j.w.EndObject();
    return j.str();
}

namespace {

response to_response(const rest::api_error& e) {
    auto res = response::json(e.status(), e.body());
    res.reason = std::string(rest::reason_phrase(e.status()));
    res.header.set("Content-Type", "application/json; charset=utf-8");
    for (const auto& [k, v] : e.headers) res.header.add(k, v);
    return res;
}

std::optional<std::string_view> header_of(const request& r, std::string_view name) {
    return r.header.get(name);
}

}  // namespace

void add_data_api_cors(const request& r, response& res) {
    if (!r.header.get("origin")) return;
    // The data API takes no cookie: a bearer token proves who calls, so any origin may read
    // the answer (the hosted platform answers the same). Nothing ambient crosses sites.
    res.header.set("Access-Control-Allow-Origin", "*");
    res.header.set("Access-Control-Expose-Headers",
                   "Content-Encoding, Content-Location, Content-Range, Content-Type, Date, "
                   "Location, Server, Transfer-Encoding, Range-Unit, Content-Profile, "
                   "Preference-Applied, Proxy-Status, Retry-After, X-Supabase-Api-Version");
}

net::awaitable<void> gateway::reload_schema(std::string why) {
    const auto started = std::chrono::steady_clock::now();
    std::shared_ptr<const rest::schema_cache> cache;
    std::string failure;
    try {
        auto c = co_await pg::connection::async_connect(cfg_.database_url);
        // Types and defaults outside pg_catalog come out schema-qualified (catalog_query); no JIT
        // for a statement run once (its cost estimate made Postgres spend 3 s compiling it).
        co_await c.async_exec(
            "SELECT set_config('search_path', '', false), set_config('jit', 'off', false)");
        auto res = co_await c.async_query(std::string(rest::catalog_query()),
                                          sql_text::text_array(cfg_.rest_schemas));
        if (res.empty() || res.is_null(0, 0))
            throw core::error("the catalog statement returned no row");
        cache = rest::decode(res.text(0, 0), cfg_.rest_schemas);
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!cache) {
        core::log::warn("schema cache not loaded", {{"reason", why}, {"error", failure}});
        co_return;
    }
    const auto ms = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
    {
        std::lock_guard lock(rest_->mu);
        rest_->cache = cache;
        ++rest_->loads;
    }
    std::size_t fns = 0;
    for (const auto& [k, v] : cache->functions) fns += v.size();
    core::log::info("schema cache loaded", {{"reason", why},
                                            {"tables", cache->tables.size()},
                                            {"functions", fns},
                                            {"ms", static_cast<double>(ms) / 1000.0}});
}

net::awaitable<std::shared_ptr<const rest::schema_cache>> gateway::schema_cache() {
    {
        std::lock_guard lock(rest_->mu);
        if (rest_->cache) co_return rest_->cache;
    }
    co_await reload_schema("first request");
    std::lock_guard lock(rest_->mu);
    if (!rest_->cache) {
        throw rest::api_error(503, "PGRST002",
                              "Could not query the database for the schema cache. Retrying.");
    }
    co_return rest_->cache;
}

void gateway::start_schema_listener() {
    core::listener_options o;
    // LISTEN needs a session: behind a transaction pooler it is the direct DSN.
    o.dsn = cfg_.wake_database_url.empty() ? cfg_.database_url : cfg_.wake_database_url;
    o.channels = {"pgrst"};
    o.name = "schema-cache";
    o.safety_poll = std::chrono::milliseconds(static_cast<long>(cfg_.rest_schema_poll_s * 1000));
    auto on_notify = [this](const pg::notification& n) {
        // PostgREST's channel: 'reload schema' (or an empty payload) reloads; 'reload config'
        // has nothing to reload here.
        if (n.payload.empty() || n.payload == "reload schema") {
            net::co_spawn(ioc_, reload_schema("NOTIFY pgrst"), net::detached);
        }
    };
    auto on_rescan = [this](core::rescan_reason why) {
        net::co_spawn(
            ioc_,
            reload_schema(why == core::rescan_reason::connected ? "LISTEN connected" : "periodic"),
            net::detached);
    };
    rest_->listener = std::make_unique<core::listener>(o, on_notify, on_rescan);
    net::co_spawn(ioc_, rest_->listener->run(), net::detached);
}

net::awaitable<response> gateway::rest_request(request r) {
    // CORS preflight: answered before anything else (it carries no token).
    if (r.method == "OPTIONS" && r.header.get("access-control-request-method")) {
        response res;
        res.status = 200;
        res.header.set("Access-Control-Allow-Origin", "*");
        res.header.set("Access-Control-Allow-Methods",
                       "GET, POST, PATCH, PUT, DELETE, OPTIONS, HEAD");
        res.header.set("Access-Control-Allow-Headers",
                       "Authorization, apikey, Content-Type, Accept, Accept-Profile, "
                       "Content-Profile, Prefer, Range, Range-Unit, x-client-info, "
                       "x-supabase-api-version");
        res.header.set("Access-Control-Max-Age", "86400");
        co_return res;
    }
    std::optional<rest::api_error> refusal;
    std::optional<pg::sql_error> sql_failure;
    bool has_jwt = false;
    response res;
    try {
        const auto who = data_api_principal(r);
        has_jwt = who.has_jwt;
        // Request rates (limits.hpp) before any other work. The service role is not limited:
        // it holds every key already.
        if (who.role != "service_role") {
            if (auto no = rates_->take(rate_surface::rest, r.remote, who.sub)) {
                rest::api_error e(429, "over_request_rate_limit", "Too many requests", no->message,
                                  "Wait the seconds Retry-After gives, then retry.");
                e.headers.emplace_back("Retry-After", std::to_string(no->retry_after));
                throw e;
            }
        }
        rest::raw_request in;
        in.method = r.method;
        const std::string_view full = r.path;
        in.path = full.size() > 8 ? full.substr(8) : std::string_view("/");  // after /rest/v1
        in.query = r.query;
        in.accept = header_of(r, "accept");
        in.content_type = header_of(r, "content-type");
        for (const auto& [k, v] : r.header.fields()) {
            if (k.size() == 6 && (k == "Prefer" || k == "prefer" || k == "PREFER")) {
                in.prefer.push_back(v);
            } else if (k.size() == 6) {
                std::string low = k;
                for (auto& c : low)
                    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                if (low == "prefer") in.prefer.push_back(v);
            }
        }
        in.range = header_of(r, "range");
        in.range_unit = header_of(r, "range-unit");
        in.accept_profile = header_of(r, "accept-profile");
        in.content_profile = header_of(r, "content-profile");
        in.body = r.body;
        // The grammar and its bounds (embeds, select items, conditions ...) first: a request
        // refused there never waits for the schema cache or reaches Postgres.
        rest::limits bounds;
        bounds.max_embeds = cfg_.limits.max_embeds;
        auto parsed = rest::parse(in, cfg_.rest_schemas, bounds);
        const auto cache = co_await schema_cache();
        rest::options opts;
        if (cfg_.rest_max_rows > 0) {
            opts.max_rows = cfg_.rest_max_rows;
        } else {
            opts.max_rows.reset();
        }
        opts.tx_override = cfg_.rest_tx_override;
        opts.aggregates = cfg_.rest_aggregates;
        opts.plan = cfg_.rest_plan;
        opts.max_joins = cfg_.limits.max_joins;
        if (auto it = cache->roles.find(who.role); it != cache->roles.end()) {
            opts.role_bypasses_rls = it->second.bypass_rls;
        }
        auto prepared = rest::prepare(std::move(parsed), *cache, opts);
        rest::outcome out;
        if (prepared.req.action == rest::action::info) {
            out = rest::respond(prepared, rest::main_row{}, std::nullopt, opts);
        } else {
            // The transaction's setup: role, claims, request facts, search_path, timeouts, and
            // READ ONLY for GET/HEAD (nothing changes state on GET, whatever it calls).
            rest::session_facts facts;
            facts.role = who.role;
            facts.claims_json = who.claims_json;
            facts.sub = who.sub;
            facts.method = r.method;
            facts.path = r.path;
            facts.headers_json = request_headers_json(r);
            facts.search_path = rest::search_path(prepared.req.schema, cfg_.rest_extra_search_path);
            if (auto it = cache->roles.find(who.role); it != cache->roles.end()) {
                facts.role_settings = it->second.settings;
            }
            // Each role's time budget (limits.hpp) unless the role sets its own.
            facts.default_statement_timeout =
                who.role == "anon"            ? cfg_.limits.anon_statement_timeout
                : who.role == "authenticated" ? cfg_.limits.authenticated_statement_timeout
                                              : cfg_.rest_statement_timeout;
            facts.read_only = prepared.req.read_only;
            const auto setup = rest::setup_statement(facts);
            pg::params sp;
            for (const auto& v : setup.params) sp.emplace_back(v);
            std::vector<pg::connection::pipelined> stmts;
            if (prepared.planned_count) {
                pg::params pp;
                for (auto& v : prepared.planned_count->params) pp.emplace_back(v);
                stmts.push_back({prepared.planned_count->sql, std::move(pp)});
            }
            pg::params mp;
            for (auto& v : prepared.main.params) mp.emplace_back(v);
            stmts.push_back({prepared.main.sql, std::move(mp)});
            pg::connection::pipelined setup_stmt{setup.sql,
                                                 std::move(sp)};  // a named local: GCC 12
            auto t = co_await db_->begin_own(std::move(setup_stmt));
            auto results = co_await t.run(std::move(stmts), prepared.decide_after);
            const auto& main = results.back();
            rest::main_row row;
            std::optional<std::int64_t> planned;
            if (prepared.out.kind == rest::media::plan) {
                std::string plan;
                for (int i = 0; i < main.size(); ++i) {
                    plan += std::string(main.text(i, 0));
                    if (i + 1 < main.size()) plan += "\n";
                }
                row.body = plan;
                row.page_total = 0;
            } else if (!main.empty()) {
                row.total = main.get_optional<std::string>(0, "total_result_set");
                row.page_total = main.get<std::int64_t>(0, "page_total");
                row.body = main.get_optional<std::string>(0, "body").value_or("");
                row.response_headers = main.get_optional<std::string>(0, "response_headers");
                row.response_status = main.get_optional<std::string>(0, "response_status");
                row.location = main.get_optional<std::string>(0, "location");
                row.inserted = main.get_optional<std::string>(0, "inserted");
            }
            if (prepared.planned_count) {
                planned = rest::planned_rows(results.front().text(0, 0));
            }
            std::optional<rest::api_error> late;
            try {
                out = rest::respond(prepared, std::move(row), planned, opts);
            } catch (const rest::api_error& e) {
                late = e;
            }
            if (prepared.decide_after) {
                if (late || !out.commit) {
                    co_await t.rollback();
                } else {
                    co_await t.commit();
                }
            }
            if (late) throw *late;
        }
        res.status = out.status;
        res.reason = std::string(rest::reason_phrase(out.status));
        for (auto& [k, v] : out.headers) res.header.add(k, v);
        res.body = std::move(out.body);
    } catch (const rest::api_error& e) {
        refusal = e;
    } catch (const pg::sql_error& e) {
        sql_failure = e;
    } catch (const pg::connection_error& e) {
        core::log::warn("data API: database unreachable", {{"error", e.what()}});
        refusal = rest::api_error(503, "PGRST000", "Database connection error.");
    }
    if (refusal) res = to_response(*refusal);
    if (sql_failure) {
        res =
            to_response(rest::from_sql_error(sql_failure->sqlstate(), sql_failure->primary(),
                                             sql_failure->detail(), sql_failure->hint(), has_jwt));
    }
    add_data_api_cors(r, res);
    co_return res;
}

}  // namespace awp::api
