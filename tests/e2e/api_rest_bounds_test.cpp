// The data API closed to a hostile caller (issue 37), each attack sent to a real gateway process
// on a real database: finding 3 (a user NOTIFYing another tenant's gateway or every gateway's
// schema cache through /rest/v1/rpc), finding 4 (hundreds of embeds burning seconds of database
// CPU before privileges are checked), finding 5 (planned counts telling another tenant's row
// count), finding 7 (413 in PostgREST's shape), `limit=-1abc`, catalog probes through reg*
// casts, the statement time of each role, and what /api/health tells anyone.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>

#include <rapidjson/document.h>

#include "awp/core/channels.hpp"
#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/test_db.hpp"

namespace api_rest_bounds_test {

namespace {

namespace http = awp::http;
namespace crypto = awp::core::crypto;
using awp::test::api_gateway_process;
using awp::test::kApiJwtSecret;
using awp::test::kApiServiceKey;
using awp::test::random_name;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

long long now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string jwt(const std::string& role, const std::string& tenant = {}) {
    std::string claims = R"({"sub":")" + awp::core::uuid::generate_v4().to_string() +
                         R"(","role":")" + role + R"(","exp":)" + std::to_string(now_s() + 3600);
    if (!tenant.empty()) claims += R"(,"app_metadata":{"tenant_id":")" + tenant + R"("})";
    return crypto::jwt_sign_hs256(claims + "}", kApiJwtSecret);
}

http::headers auth(const std::string& token) {
    http::headers h;
    h.add("Authorization", "Bearer " + token);
    h.add("apikey", token);
    return h;
}

rapidjson::Document parse(const std::string& body) {
    rapidjson::Document d;
    d.Parse(body.c_str(), body.size());
    return d;
}

/// PostgREST's error body: {code, details, hint, message} and nothing else; its code.
std::string postgrest_code(const std::string& body) {
    auto d = parse(body);
    INFO(body);
    REQUIRE_FALSE(d.HasParseError());
    REQUIRE(d.IsObject());
    CHECK(d.MemberCount() == 4);
    for (const char* k : {"code", "details", "hint", "message"}) CHECK(d.HasMember(k));
    REQUIRE(d["code"].IsString());
    CHECK(d["message"].IsString());
    return d["code"].GetString();
}

/// Sends raw bytes on a fresh connection and reads until the server closes it (or 10 s).
std::string raw_exchange(unsigned short port, const std::string& bytes) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
    std::string out;
    char buf[8192];
    for (;;) {
        const auto n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return out;
}

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string body_of(const std::string& raw) {
    const auto end = raw.find("\r\n\r\n");
    return end == std::string::npos ? std::string() : raw.substr(end + 4);
}

struct world {
    awp::test::scoped_database db;
    std::string tenant_a, tenant_b, gateway_b;
    world() {
        auto admin = db.admin();
        tenant_a = std::string(admin
                                   .exec("INSERT INTO tenants (name, slug) VALUES ('A', $1) "
                                         "RETURNING id::text",
                                         {random_name("ta")})
                                   .text(0, 0));
        tenant_b = std::string(admin
                                   .exec("INSERT INTO tenants (name, slug) VALUES ('B', $1) "
                                         "RETURNING id::text",
                                         {random_name("tb")})
                                   .text(0, 0));
        gateway_b = std::string(
            admin
                .exec("INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, "
                      "'B', 'ready') RETURNING id::text",
                      {tenant_b, random_name("gwb")})
                .text(0, 0));
        admin.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, 'a', 'a-agent')",
                   {tenant_a});
        // Tenant B is big, and the planner knows it.
        admin.exec(
            "INSERT INTO agents (tenant_id, name, slug) SELECT $1, 'b' || g, 'b-agent-' || g "
            "FROM generate_series(1, 2006) g",
            {tenant_b});
        admin.exec("ANALYZE agents");
    }
};

std::string embeds(int n, const std::string& what = "agents(*)") {
    std::string s = "select=id";
    for (int i = 0; i < n; ++i) s += ",a" + std::to_string(i) + ":" + what;
    return s;
}

}  // namespace

TEST_CASE(
    "finding 4: 200 embeds answer 400 at once, as anon and as a user, before Postgres plans "
    "anything",
    "[api][rest][bounds]") {
    world w;
    api_gateway_process gw(w.db.api_dsn());
    const auto target = "/rest/v1/tasks?" + embeds(200);
    CHECK(target.size() > 2800);  // the 2.9 KB request of the finding
    for (const auto& who : {std::string(), jwt("authenticated", w.tenant_a)}) {
        CAPTURE(who.empty() ? "anon" : "user");
        http::headers h;
        if (!who.empty()) h = auth(who);
        const auto started = clock_type::now();
        const auto r = gw.get(target, h);
        const auto ms =
            std::chrono::duration<double, std::milli>(clock_type::now() - started).count();
        CHECK(r.status == 400);
        CHECK(postgrest_code(r.body) == "PGRST100");
        CHECK(parse(r.body)["message"] == "Too many embedded resources");
        // The goal is 50 ms (bench/api/hostile.sh measures it); a loaded test machine gets room.
        WARN("finding 4's request answered in " << ms << " ms");
        CHECK(ms < 2000);
    }
    // Within the bound it is served (and the joins' bound holds too: 20 embeds, 20 joins).
    const auto ok =
        gw.get("/rest/v1/tasks?" + embeds(20, "agents!tasks_assignee_agent_id_fkey(id)"),
               auth(jwt("authenticated", w.tenant_a)));
    CHECK(ok.status == 200);
    // The operator can tighten it.
    api_gateway_process tight(w.db.api_dsn(), {{"API_REST_MAX_EMBEDS", "2"}});
    CHECK(tight.get("/rest/v1/tasks?" + embeds(3)).status == 400);
}

TEST_CASE(
    "finding 3: a user cannot NOTIFY another tenant's gateway or every gateway's schema cache "
    "through /rest/v1/rpc, by POST or GET",
    "[api][rest][bounds]") {
    world w;
    auto listener = w.db.daemon();
    const auto commands_b = awp::core::channels::commands(w.gateway_b);
    for (const auto& ch : {commands_b, std::string("pgrst"), std::string("awp_wake")}) {
        listener.exec("LISTEN " + listener.quote_identifier(ch));
    }
    api_gateway_process gw(w.db.api_dsn());
    const auto a = jwt("authenticated", w.tenant_a);
    http::headers post = auth(a);
    post.add("Content-Type", "application/json");
    for (const auto& [channel, payload] :
         {std::pair<std::string, std::string>{commands_b, ""}, {"pgrst", "reload schema"}}) {
        CAPTURE(channel);
        const auto body = R"({"p_channel":")" + channel + R"(","p_payload":")" + payload + "\"}";
        const auto p = gw.request("POST", "/rest/v1/rpc/awp_notify_gateway", post, body);
        CHECK(p.status == 403);
        CHECK(postgrest_code(p.body) == "42501");
        http::headers json;
        json.add("Content-Type", "application/json");
        const auto anon = gw.request("POST", "/rest/v1/rpc/awp_notify_gateway", json, body);
        CHECK(anon.status == 401);
        // GET: a VOLATILE function is not called read-only at all (PostgREST's 405 and code).
        const auto g = gw.get(
            "/rest/v1/rpc/awp_notify_gateway?p_channel=" + channel + "&p_payload=x", auth(a));
        CHECK(g.status == 405);
        CHECK(postgrest_code(g.body) == "25006");
        CHECK(g.header.get("allow").value_or("") == "OPTIONS,POST");
    }
    // Nothing was heard by anyone listening.
    std::this_thread::sleep_for(300ms);
    CHECK(listener.drain_notifications().empty());
    // A user's real write still wakes the gateway it is for (the trigger runs as its owner).
    const auto user_b = jwt("authenticated", w.tenant_b);
    http::headers pb = auth(user_b);
    pb.add("Content-Type", "application/json");
    const auto ins = gw.request(
        "POST", "/rest/v1/agent_commands", pb,
        R"({"gateway_id":")" + w.gateway_b + R"(","action":"list_models","status":"pending"})");
    CHECK(ins.status == 201);
    bool woken = false;
    for (int i = 0; i < 100 && !woken; ++i) {
        for (const auto& n : listener.drain_notifications())
            woken = woken || n.channel == commands_b;
        if (!woken) std::this_thread::sleep_for(20ms);
    }
    CHECK(woken);
}

TEST_CASE(
    "finding 5: count=planned and estimated tell a user only the rows it may see, and the service "
    "role gets the planner's estimate",
    "[api][rest][bounds]") {
    world w;
    api_gateway_process gw(w.db.api_dsn());
    const auto a = jwt("authenticated", w.tenant_a);
    for (const std::string count : {"count=planned", "count=estimated"}) {
        CAPTURE(count);
        auto h = auth(a);
        h.add("Prefer", count);
        // Tenant B's 2,006 agents, asked for by tenant A's user.
        const auto r =
            gw.request("HEAD", "/rest/v1/agents?select=id&tenant_id=eq." + w.tenant_b, h);
        CHECK(r.status == 200);
        CHECK(r.header.get("content-range").value_or("") == "*/0");
        CHECK(r.header.get("preference-applied").value_or("") == "count=exact");
        // Its own: the exact count.
        const auto own = gw.request("HEAD", "/rest/v1/agents?select=id", h);
        CHECK(own.header.get("content-range").value_or("") == "0-0/1");
    }
    // The service role sees every row: the estimate is what it asked for, and it is B's size.
    auto s = auth(kApiServiceKey);
    s.add("Prefer", "count=planned");
    const auto svc = gw.request("HEAD", "/rest/v1/agents?select=id&tenant_id=eq." + w.tenant_b, s);
    CHECK(svc.header.get("preference-applied").value_or("") == "count=planned");
    const auto range = std::string(svc.header.get("content-range").value_or(""));
    REQUIRE(range.rfind("0-", 0) == 0);
    const auto total = std::stol(range.substr(range.find('/') + 1));
    CHECK(total > 1000);
}

TEST_CASE(
    "finding 7: a body over the limit is refused before it is read, in PostgREST's shape on "
    "/rest/v1 and GoTrue's on /auth/v1",
    "[api][rest][bounds]") {
    world w;
    api_gateway_process gw(w.db.api_dsn(), {{"API_REST_BODY_LIMIT", "1024"}});
    const auto token = jwt("authenticated", w.tenant_a);
    // Content-Length over the limit and no body sent: answered at once from the header.
    const auto r = raw_exchange(gw.port,
                                "POST /rest/v1/agents HTTP/1.1\r\nHost: x\r\n"
                                "Authorization: Bearer " +
                                    token +
                                    "\r\nOrigin: https://ui.example\r\n"
                                    "Content-Type: application/json\r\n"
                                    "Content-Length: 2000000\r\n\r\n");
    INFO(r);
    CHECK(r.rfind("HTTP/1.1 413 ", 0) == 0);
    CHECK(postgrest_code(body_of(r)) == "PGRST102");
    CHECK(lower(r).find("access-control-allow-origin: *") != std::string::npos);
    // Chunked: refused once the limit is passed.
    const std::string chunk(2048, 'x');
    char size[16];
    std::snprintf(size, sizeof size, "%zx", chunk.size());
    const auto c = raw_exchange(gw.port,
                                "POST /rest/v1/agents HTTP/1.1\r\nHost: x\r\n"
                                "Content-Type: application/json\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n" +
                                    std::string(size) + "\r\n" + chunk + "\r\n0\r\n\r\n");
    INFO(c);
    CHECK(c.rfind("HTTP/1.1 413 ", 0) == 0);
    CHECK(postgrest_code(body_of(c)) == "PGRST102");
    // /auth/v1: GoTrue's body for the client's API version.
    const auto g = raw_exchange(gw.port,
                                "POST /auth/v1/token?grant_type=password HTTP/1.1\r\n"
                                "Host: x\r\nX-Supabase-Api-Version: 2024-01-01\r\n"
                                "Content-Type: application/json\r\n"
                                "Content-Length: 100000\r\n\r\n");
    INFO(g);
    CHECK(g.rfind("HTTP/1.1 413 ", 0) == 0);
    auto d = parse(body_of(g));
    REQUIRE(d.IsObject());
    CHECK(d["code"] == "validation_failed");
    CHECK(d.HasMember("msg"));
    CHECK(lower(g).find("x-supabase-api-version: 2024-01-01") != std::string::npos);
    // Nothing was written, and the gateway still serves.
    CHECK(gw.get("/rest/v1/agents?select=id", auth(token)).status == 200);
}

TEST_CASE("limit and offset that are not integers answer 400, never every row",
          "[api][rest][bounds]") {
    world w;
    api_gateway_process gw(w.db.api_dsn());
    const auto s = auth(kApiServiceKey);
    for (const std::string q : {"limit=-1abc", "limit=abc", "offset=1x", "limit=2.5"}) {
        CAPTURE(q);
        const auto r = gw.get("/rest/v1/agents?select=id&" + q, s);
        CHECK(r.status == 400);
        CHECK(postgrest_code(r.body) == "PGRST100");
    }
    const auto ok = gw.get("/rest/v1/agents?select=id&limit=2", s);
    CHECK(ok.status == 200);
    CHECK(parse(ok.body).Size() == 2);
}

TEST_CASE("casts to reg* types cannot probe the catalog's names", "[api][rest][bounds]") {
    world w;
    api_gateway_process gw(w.db.api_dsn());
    auto admin = w.db.admin();
    // A user's own row names what it probes for: a role that exists and one that does not.
    const auto a = jwt("authenticated", w.tenant_a);
    admin.exec(
        "INSERT INTO agents (tenant_id, name, slug) VALUES ($1, 'awp_api', 'probe1'), "
        "($1, 'no_such_role_x', 'probe2')",
        {w.tenant_a});
    std::set<std::string> answers;
    for (const std::string cast : {"regrole", "regclass", "regproc", "regnamespace", "regtype"}) {
        for (const std::string slug : {"probe1", "probe2"}) {
            CAPTURE(cast, slug);
            const auto r =
                gw.get("/rest/v1/agents?select=name::" + cast + "&slug=eq." + slug, auth(a));
            CHECK(r.status == 400);
            CHECK(postgrest_code(r.body) == "PGRST100");
            answers.insert(std::to_string(r.status) + r.body);
        }
    }
    // The same answer whether the name exists or not (one per cast, never per name).
    CHECK(answers.size() == 5);
}

TEST_CASE(
    "each role has its own statement time: a user's slow call is cancelled where the service "
    "role's runs",
    "[api][rest][bounds]") {
    world w;
    auto admin = w.db.admin();
    admin.exec(
        "CREATE FUNCTION public.rest_test_slow(s float8) RETURNS int LANGUAGE sql STABLE AS "
        "$$ SELECT 1 FROM pg_sleep(s) $$");
    admin.exec(
        "GRANT EXECUTE ON FUNCTION public.rest_test_slow(float8) TO anon, authenticated, "
        "service_role");
    api_gateway_process gw(w.db.api_dsn(), {{"API_REST_AUTHENTICATED_STATEMENT_TIMEOUT", "300ms"},
                                            {"API_REST_ANON_STATEMENT_TIMEOUT", "300ms"},
                                            {"API_REST_STATEMENT_TIMEOUT", "30s"}});
    const auto user =
        gw.get("/rest/v1/rpc/rest_test_slow?s=3", auth(jwt("authenticated", w.tenant_a)));
    CHECK(user.status == 500);
    CHECK(postgrest_code(user.body) == "57014");
    const auto anon = gw.get("/rest/v1/rpc/rest_test_slow?s=3");
    CHECK(postgrest_code(anon.body) == "57014");
    const auto svc = gw.get("/rest/v1/rpc/rest_test_slow?s=1", auth(kApiServiceKey));
    CHECK(svc.status == 200);
    // A role's own setting still wins (the hosted platform's way: ALTER ROLE ... SET).
    admin.exec("ALTER ROLE authenticated IN DATABASE " + admin.quote_identifier(w.db.name()) +
               " SET statement_timeout = '20s'");
    admin.exec("NOTIFY pgrst, 'reload schema'");
    bool served = false;
    for (int i = 0; i < 50 && !served; ++i) {
        served = gw.get("/rest/v1/rpc/rest_test_slow?s=1", auth(jwt("authenticated", w.tenant_a)))
                     .status == 200;
        if (!served) std::this_thread::sleep_for(100ms);
    }
    CHECK(served);
}

TEST_CASE("/api/health tells anyone only that the gateway is up, and operators get the figures",
          "[api][bounds]") {
    world w;
    api_gateway_process gw(w.db.api_dsn());
    auto pub = parse(gw.get("/api/health").body);
    REQUIRE(pub.IsObject());
    CHECK(pub["ok"].IsTrue());
    REQUIRE(pub.HasMember("realtime"));
    CHECK(pub["realtime"].HasMember("enabled"));
    CHECK(pub["realtime"]["capture"].HasMember("state"));
    for (const char* figure : {"sockets", "channels", "delivered", "visibility_checks"}) {
        CHECK_FALSE(pub["realtime"].HasMember(figure));
    }
    CHECK(pub["realtime"]["capture"].MemberCount() == 1);
    CHECK_FALSE(pub.HasMember("rate_limit_buckets"));
    // A user who is no operator: the same.
    auto user = parse(gw.get("/api/health", auth(jwt("authenticated", w.tenant_a))).body);
    CHECK_FALSE(user["realtime"].HasMember("sockets"));
    // The service role: every figure.
    auto op = parse(gw.get("/api/health", auth(kApiServiceKey)).body);
    for (const char* figure : {"sockets", "channels", "delivered", "visibility_checks"}) {
        CHECK(op["realtime"].HasMember(figure));
    }
    CHECK(op.HasMember("rate_limit_buckets"));
}

}  // namespace api_rest_bounds_test
