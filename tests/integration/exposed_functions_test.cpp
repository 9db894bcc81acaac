// Nothing internal is callable by the data API's users (issue 37, finding 3): every function of
// an exposed schema that anon or authenticated may EXECUTE (granted to them, to PUBLIC, or to a
// role they are members of) is listed here on purpose, so a new one fails this test until
// someone decides it may be called by anyone on the internet; no API role may raise a NOTIFY on
// a channel of its choosing (awp_notify_gateway, pgrst); and the database still raises every
// wake-up itself, whoever writes the row (a user, a gateway's own login, the pool login).
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "awp/core/channels.hpp"
#include "awp/core/pg.hpp"
#include "gateway.hpp"
#include "support/test_db.hpp"

namespace exposed_functions_test {

namespace pg = awp::core::pg;
namespace channels = awp::core::channels;
using namespace std::chrono_literals;

namespace {

/// Who may call a function: "anon", "authenticated" or "anon, authenticated".
using allowlist = std::map<std::string, std::string>;

/// awp's functions that the API roles may call, and why each may be: none changes another
/// tenant's rows (row-level security and their own checks hold), none raises a NOTIFY on a
/// channel the caller names, none reads a secret.
const allowlist& awp_functions() {
    static const allowlist list = {
        // The spec's RPCs and the queries of the UI (STABLE, under RLS).
        {"public.agent_reports_chain(uuid,integer)", "authenticated"},
        {"public.get_task_relations(uuid)", "authenticated"},
        {"public.get_agent_daily_usage(uuid,date,date)", "authenticated"},
        {"public.search_knowledge_items(vector,integer,text[],uuid,text,uuid)", "authenticated"},
        {"public.search_knowledge_items_text(text,integer,text[],uuid,text,uuid)", "authenticated"},
        {"public.search_knowledge_chunks(vector,integer,text[],uuid,text,uuid,uuid)",
         "authenticated"},
        {"public.search_knowledge_chunks_text(text,integer,text[],uuid,text,uuid,uuid)",
         "authenticated"},
        {"public.routine_next_occurrence(text,integer,smallint[],integer,text,text,timestamp "
         "with time zone)",
         "authenticated"},
        // A user cancels its own tenant's command (RLS decides which).
        {"public.cancel_command(uuid)", "authenticated"},
        // The original product's RPCs its UI calls (sql/0037, 0038): SECURITY INVOKER, so
        // row-level security confines each to the caller's tenant (schema_product_test).
        {"public.complete_setup(text,text,text,text,text,text,jsonb,jsonb,jsonb,uuid)",
         "authenticated"},
        {"public.spawn_due_task_instances()", "authenticated"},
        {"public.recompute_agent_budget(uuid)", "authenticated"},
        // Their helpers, evaluated as the user by the triggers, defaults and the overdue index:
        // functions of their arguments (and a series row the caller already reads).
        {"public.awp_task_series_next(task_series,timestamp with time zone)", "authenticated"},
        {"public.awp_time_zone_or_utc(text)", "authenticated"},
        {"public.awp_budget_status(numeric,integer,numeric,integer,integer)", "authenticated"},
        {"public.awp_task_deadline(timestamp with time zone,timestamp with time zone)",
         "authenticated"},
        // A gateway's one-time registration token: anyone holding one may register (the token
        // is the credential; SECURITY DEFINER, checked, spent once).
        {"public.consume_gateway_token(text,text,text,uuid)", "anon, authenticated"},
        // Policies, column defaults and checks call these as the user: its tenant, whether it
        // is an operator, AW009 without a tenant, the search arguments, time zones, payloads.
        {"public.current_tenant_id()", "authenticated"},
        {"public.current_is_operator()", "authenticated"},
        {"public.awp_session_tenant_id()", "authenticated"},
        {"public.awp_no_tenant()", "authenticated"},
        {"public.awp_check_command_payload(command_action,jsonb)", "authenticated"},
        {"public.awp_check_search_args(text,integer,text)", "authenticated"},
        {"public.awp_hnsw_iterative_scan()", "authenticated"},
        {"public.awp_check_time_zone(text)", "authenticated"},
        {"public.awp_local_to_utc(timestamp without time zone,text)", "authenticated"},
        {"public.awp_event_entity_table(text)", "authenticated"},
        {"public.awp_text_array_to_string(text[])", "authenticated"},
        {"public.awp_sha256_hex(text)", "authenticated"},
        // The gateway-key policies (sql/0026) are evaluated for a user too: a user has no key
        // to present (awp_present_gateway_key is the gateway logins' alone), so these answer
        // NULL for it.
        {"public.awp_key_binding()", "authenticated"},
        {"public.awp_session_gateway_tenant()", "authenticated"},
        {"public.awp_transaction_mark()", "authenticated"},
    };
    return list;
}

/// Extensions whose functions may sit in an exposed schema (pgvector lives in public on a plain
/// cluster, in extensions on a hosted project): functions of their arguments only (see the
/// test: none SECURITY DEFINER, none VOLATILE but the index support functions, which take an
/// `internal` argument no caller can pass).
const std::set<std::string> kExtensions = {"vector"};

std::string one(pg::connection& c, const std::string& sql) {
    auto r = c.exec(sql);
    return r.empty() || r.is_null(0, 0) ? std::string() : std::string(r.text(0, 0));
}

std::string sqlstate_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const pg::sql_error& e) {
        return e.sqlstate();
    }
    return "none";
}

/// Every notification on `c` within `wait` (it LISTENs on the channels asked).
std::set<std::string> heard(pg::connection& c, std::chrono::milliseconds wait) {
    std::set<std::string> out;
    const auto end = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < end) {
        for (const auto& n : c.drain_notifications()) out.insert(n.channel + " " + n.payload);
        std::this_thread::sleep_for(20ms);
    }
    return out;
}

}  // namespace

TEST_CASE(
    "integration: every function of an exposed schema that anon or authenticated may execute "
    "is listed on purpose",
    "[security][integration]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto exposed = awp::api::gateway_config{}.rest_schemas;  // API_REST_SCHEMAS' default
    REQUIRE_FALSE(exposed.empty());
    std::string schemas = "{";
    for (const auto& s : exposed) schemas += (schemas.size() > 1 ? "," : "") + s;
    schemas += "}";
    // Types unqualified whichever of the two schemas an extension's live in.
    admin.exec("SET search_path = public, extensions");
    // has_function_privilege counts grants to PUBLIC and through role membership.
    auto r = admin.exec(
        "SELECT n.nspname || '.' || p.proname || '(' || "
        "       pg_catalog.array_to_string(ARRAY(SELECT pg_catalog.format_type(t, NULL) "
        "         FROM unnest(p.proargtypes) t), ',') || ')', "
        "       concat_ws(', ', CASE WHEN has_function_privilege('anon', p.oid, 'EXECUTE') "
        "                            THEN 'anon' END, "
        "                       CASE WHEN has_function_privilege('authenticated', p.oid, "
        "                                 'EXECUTE') THEN 'authenticated' END), "
        "       coalesce(e.extname, ''), p.provolatile::text, p.prosecdef::text, "
        "       ('internal'::regtype = ANY (p.proargtypes::oid[]))::text "
        "FROM pg_catalog.pg_proc p "
        "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
        "LEFT JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass "
        "     AND d.objid = p.oid AND d.deptype = 'e' "
        "LEFT JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid "
        "WHERE n.nspname = ANY($1::text[]) "
        "  AND (has_function_privilege('anon', p.oid, 'EXECUTE') "
        "       OR has_function_privilege('authenticated', p.oid, 'EXECUTE')) "
        "ORDER BY 1",
        {schemas});
    std::set<std::string> seen;
    for (int i = 0; i < r.size(); ++i) {
        const std::string sig(r.text(i, 0));
        const std::string who(r.text(i, 1));
        const std::string ext(r.text(i, 2));
        CAPTURE(sig, who, ext);
        if (!ext.empty()) {
            // An extension's own functions: only the listed extensions, and only functions that
            // change nothing and run as the caller.
            CHECK(kExtensions.contains(ext));
            CHECK((std::string(r.text(i, 3)) != "v" || std::string(r.text(i, 5)) == "true"));
            CHECK(std::string(r.text(i, 4)) == "false");
            continue;
        }
        seen.insert(sig);
        const auto it = awp_functions().find(sig);
        if (it == awp_functions().end()) {
            FAIL_CHECK("not on the list: " + sig + " is callable by " + who +
                       " through /rest/v1/rpc; list it here with a reason, or REVOKE it");
            continue;
        }
        CHECK(who == it->second);
    }
    // The list holds nothing stale: each entry is still callable by whom it says.
    for (const auto& [sig, who] : awp_functions()) {
        CAPTURE(sig);
        CHECK(seen.contains(sig));
    }
}

TEST_CASE(
    "integration: no API role and no gateway login may NOTIFY a channel of its choosing, and "
    "the queue triggers still wake every gateway whoever writes",
    "[security][integration][notify]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const std::string tenant = "00000000-0000-0000-0000-000000000000";
    const auto gw = one(admin, "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('" +
                                   tenant + "', '" + awp::test::random_name("gw") +
                                   "', 'G', 'ready') RETURNING id::text");
    const auto agent = std::string(
        admin
            .exec("INSERT INTO agents (tenant_id, name, slug, gateway_id, status) VALUES ($1, "
                  "'Ana', $2, $3, 'ready') RETURNING id::text",
                  {tenant, awp::test::random_name("ana"), gw})
            .text(0, 0));
    auto listener = db.daemon();
    for (const auto& ch : {channels::commands(gw), std::string("pgrst")}) {
        listener.exec("LISTEN " + listener.quote_identifier(ch));
    }

    // Nobody but the database raises a gateway's wake-up or a schema reload.
    auto user = db.api();
    awp::test::as_user(user, tenant, "00000000-0000-0000-0000-0000000000aa");
    CHECK(sqlstate_of([&] {
              user.exec("SELECT awp_notify_gateway($1, 'x')", {channels::commands(gw)});
          }) == "42501");
    CHECK(sqlstate_of([&] { user.exec("SELECT awp_notify_gateway('pgrst', 'reload schema')"); }) ==
          "42501");
    auto anon = db.api();
    awp::test::as_anon(anon);
    CHECK(sqlstate_of([&] { anon.exec("SELECT awp_notify_gateway('pgrst', '')"); }) == "42501");
    auto own = pg::connection::connect(db.gateway_dsn(gw));
    CHECK(sqlstate_of([&] {
              own.exec("SELECT awp_notify_gateway($1, 'x')", {channels::commands(gw)});
          }) == "42501");
    CHECK(heard(listener, 300ms).empty());

    // A user's write wakes the gateway (the trigger runs as its owner).
    user.exec(
        "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) VALUES ($1, $2, "
        "'update', '{}')",
        {tenant, agent});
    auto got = heard(listener, 500ms);
    CHECK(got.size() == 1);
    CHECK(got.begin()->rfind(channels::commands(gw) + " ", 0) == 0);

    // A gateway's own login and the shared pool login wake it too: a lease that expired goes
    // back to pending through awp_expire_command_leases, each time under one of them.
    auto expire_as = [&](pg::connection& c) {
        const auto id = one(admin,
                            "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) "
                            "VALUES ('" +
                                tenant + "', '" + agent + "', 'update', '{}') RETURNING id::text");
        admin.exec(
            "UPDATE agent_commands SET status = 'leased', lease_token = gen_random_uuid(), "
            "leased_by = 't', leased_at = now() - interval '2 min', lease_expires_at = now() - "
            "interval '1 min' WHERE id = $1",
            {id});
        (void)heard(listener, 200ms);  // the insert's own wake-up
        c.exec("SELECT * FROM awp_expire_command_leases($1::uuid)", {gw});
        return heard(listener, 500ms).contains(channels::commands(gw) + " " + id);
    };
    CHECK(expire_as(own));
    const auto host = db.pool_login(gw);
    auto pool = pg::connection::connect(host.dsn);
    pool.set_gateway_key(host.key);
    CHECK(sqlstate_of([&] { pool.exec("SELECT awp_notify_gateway('pgrst', '')"); }) == "42501");
    CHECK(expire_as(pool));
}

}  // namespace exposed_functions_test
