// Realtime end to end: the real gateway with its change capture on a scratch database, driven
// over /realtime/v1/websocket with the test websocket client as realtime-js would drive it:
// the Phoenix protocol in both vsn, the limits a hostile client meets, rows of two tenants on
// one table (each sees only its own: the test fails if the RLS check were skipped), filters,
// DELETE by privilege with its primary key only, a token that expires under a live socket, a
// socket that answers pings but never heartbeats, the caps per address and per user, and a slot
// per gateway (an abandoned one dropped by another), and a commit the slot has before new
// snapshots see it.
// The client library's own view is tests/data-api/realtime.test.mjs.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/json.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "support/api_process.hpp"
#include "support/child.hpp"
#include "support/private_cluster.hpp"
#include "support/test_db.hpp"
#include "support/ws_client.hpp"

namespace realtime_test {

namespace {

namespace crypto = awp::core::crypto;
using awp::test::api_gateway_process;
using awp::test::kApiJwtSecret;
using awp::test::random_name;
using awp::test::ws_client;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

long long now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string env(const char* name) {
    const char* v = std::getenv(name);
    REQUIRE(v != nullptr);
    return v;
}

std::string jwt(const std::string& role, const std::string& tenant = {}, long long ttl = 3600) {
    std::string claims = R"({"sub":")" + awp::core::uuid::generate_v4().to_string() +
                         R"(","role":")" + role + R"(","exp":)" + std::to_string(now_s() + ttl);
    if (!tenant.empty()) claims += R"(,"app_metadata":{"tenant_id":")" + tenant + R"("})";
    claims += "}";
    return crypto::jwt_sign_hs256(claims, kApiJwtSecret);
}

/// The scratch database, two tenants, and the replication slots of the test's own gateways
/// (REALTIME_SLOT is their prefix; slot names are the cluster's): dropped before the database
/// goes.
struct world {
    awp::test::scoped_database db;
    std::string tenant_a, tenant_b;
    std::string slot = random_name("rt_slot");
    world() {
        auto admin = db.admin();
        tenant_a = std::string(
            admin
                .exec("INSERT INTO tenants (name, slug) VALUES ('A', $1) RETURNING id::text",
                      {random_name("ta")})
                .text(0, 0));
        tenant_b = std::string(
            admin
                .exec("INSERT INTO tenants (name, slug) VALUES ('B', $1) RETURNING id::text",
                      {random_name("tb")})
                .text(0, 0));
    }
    ~world() {
        try {
            auto admin = db.admin();
            for (int i = 0; i < 50; ++i) {
                auto r = admin.exec(
                    "SELECT count(*) FILTER (WHERE active), "
                    "count(pg_drop_replication_slot(slot_name)) FILTER (WHERE NOT active) "
                    "FROM pg_replication_slots WHERE left(slot_name, length($1) + 1) = $1 || '_'",
                    {slot});
                if (r.text(0, 0) == "0") break;
                std::this_thread::sleep_for(milliseconds(100));
            }
        } catch (...) {
        }
    }
    api_gateway_process::env_map gateway_env(api_gateway_process::env_map extra = {}) const {
        extra.try_emplace("REALTIME_DATABASE_URL",
                          "postgresql://awp_realtime:" + env("AWP_PG_REALTIME_PASSWORD") +
                              "@127.0.0.1:" + env("AWP_PG_PORT") + "/" + db.name());
        extra.try_emplace("REALTIME_SLOT", slot);
        return extra;
    }
};

/// Waits until the gateway's capture streams (its slot made and read).
void wait_streaming(const api_gateway_process& gw) {
    const auto end = clock_type::now() + std::chrono::seconds(20);
    std::string last;
    while (clock_type::now() < end) {
        const auto h = gw.get("/api/health");
        last = h.body;
        auto d = awp::core::json::try_parse(h.body);
        if (d && d->IsObject() && d->HasMember("realtime") &&
            (*d)["realtime"]["capture"]["state"] == "streaming") {
            return;
        }
        std::this_thread::sleep_for(milliseconds(100));
    }
    FAIL("the capture never streamed: " << last);
}

/// A Phoenix client over ws_client (vsn 2.0.0 arrays unless told otherwise).
class phoenix_client {
public:
    phoenix_client(unsigned short port, const std::string& apikey, const std::string& vsn = "2.0.0")
        : ws_(port, "/realtime/v1/websocket?apikey=" + apikey + "&vsn=" + vsn),
          v2_(vsn == "2.0.0") {}
    [[nodiscard]] bool open() const { return ws_.open(); }
    ws_client& ws() { return ws_; }

    /// Sends a message; returns its ref.
    std::string push(const std::string& topic, const std::string& event, const std::string& payload,
                     std::optional<std::string> join_ref = {}) {
        const auto ref = std::to_string(++ref_);
        const auto jr = join_ref ? "\"" + *join_ref + "\"" : std::string("null");
        std::string frame;
        if (v2_) {
            frame =
                "[" + jr + ",\"" + ref + "\",\"" + topic + "\",\"" + event + "\"," + payload + "]";
        } else {
            frame = R"({"join_ref":)" + jr + R"(,"ref":")" + ref + R"(","topic":")" + topic +
                    R"(","event":")" + event + R"(","payload":)" + payload + "}";
        }
        REQUIRE(ws_.send_text(frame));
        return ref;
    }
    /// Joins `topic` with `config` (the config object's JSON) and returns the reply's payload.
    rapidjson::Document join(const std::string& topic, const std::string& config,
                             const std::string& extra = {}) {
        const auto jr = std::to_string(ref_ + 1);
        const auto ref = push(topic, "phx_join", R"({"config":)" + config + extra + "}", jr);
        auto m = wait([&](const msg& x) { return x.event == "phx_reply" && x.ref == ref; });
        REQUIRE(m);
        return std::move(m->payload);
    }

    struct msg {
        std::optional<std::string> join_ref, ref;
        std::string topic, event;
        rapidjson::Document payload;
    };
    /// The next message for which `pred` holds (others skipped); nullopt on timeout or close.
    std::optional<msg> wait(const std::function<bool(const msg&)>& pred,
                            milliseconds timeout = milliseconds(5000)) {
        const auto end = clock_type::now() + timeout;
        for (;;) {
            const auto left = std::chrono::duration_cast<milliseconds>(end - clock_type::now());
            if (left.count() <= 0) return std::nullopt;
            auto f = ws_.read_message(left);
            if (f && f->op == ws_client::close_frame) {
                UNSCOPED_INFO("closed by the server: " << f->close_code() << " "
                                                       << f->close_reason());
            }
            if (!f || f->op == ws_client::close_frame) return std::nullopt;
            auto m = decode(f->payload);
            if (pred(m)) return m;
        }
    }
    /// postgres_changes events for `topic` within `timeout` (all of them).
    std::vector<msg> changes(const std::string& topic, milliseconds timeout) {
        std::vector<msg> out;
        while (auto m = wait(
                   [&](const msg& x) { return x.topic == topic && x.event == "postgres_changes"; },
                   timeout)) {
            out.push_back(std::move(*m));
        }
        return out;
    }

private:
    msg decode(const std::string& text) const {
        auto d = awp::core::json::parse(text);
        msg m;
        auto str = [](const rapidjson::Value& v) -> std::optional<std::string> {
            if (v.IsString()) return std::string(v.GetString());
            return std::nullopt;
        };
        if (v2_) {
            REQUIRE(d.IsArray());
            REQUIRE(d.Size() == 5);
            m.join_ref = str(d[0]);
            m.ref = str(d[1]);
            m.topic = d[2].GetString();
            m.event = d[3].GetString();
            m.payload.CopyFrom(d[4], m.payload.GetAllocator());
        } else {
            REQUIRE(d.IsObject());
            m.join_ref = str(d["join_ref"]);
            m.ref = str(d["ref"]);
            m.topic = d["topic"].GetString();
            m.event = d["event"].GetString();
            m.payload.CopyFrom(d["payload"], m.payload.GetAllocator());
        }
        return m;
    }

    ws_client ws_;
    bool v2_;
    int ref_ = 0;
};

std::string status_of(const rapidjson::Document& reply) {
    return reply.IsObject() && reply.HasMember("status") ? reply["status"].GetString() : "";
}
std::string reason_of(const rapidjson::Document& reply) {
    if (!reply.IsObject() || !reply.HasMember("response")) return "";
    const auto& r = reply["response"];
    return r.IsObject() && r.HasMember("reason") && r["reason"].IsString() ? r["reason"].GetString()
                                                                           : "";
}

std::string agents_config(const std::string& event, const std::string& filter = {}) {
    std::string b = R"({"event":")" + event + R"(","schema":"public","table":"agents")";
    if (!filter.empty()) b += R"(,"filter":")" + filter + "\"";
    b += "}";
    return R"({"broadcast":{"ack":false,"self":false},"presence":{"enabled":false,"key":""},)"
           R"("postgres_changes":[)" +
           b + R"(],"private":false})";
}

}  // namespace

TEST_CASE("realtime speaks the Phoenix protocol of realtime-js in vsn 2.0.0 and 1.0.0",
          "[api][realtime]") {
    world w;
    api_gateway_process gw(w.db.api_dsn(), w.gateway_env());
    const auto a = jwt("authenticated", w.tenant_a);

    // The upgrade: no apikey is 401, an unknown vsn 400, a bad token 401.
    ws_client none(gw.port, "/realtime/v1/websocket?vsn=2.0.0");
    CHECK(none.answer().status == 401);
    ws_client bad_vsn(gw.port, "/realtime/v1/websocket?apikey=" + a + "&vsn=9.9.9");
    CHECK(bad_vsn.answer().status == 400);
    ws_client bad_key(gw.port, "/realtime/v1/websocket?apikey=x.y.z&vsn=2.0.0");
    CHECK(bad_key.answer().status == 401);

    for (const std::string vsn : {"2.0.0", "1.0.0"}) {
        CAPTURE(vsn);
        phoenix_client c(gw.port, a, vsn);
        REQUIRE(c.open());
        const auto hb = c.push("phoenix", "heartbeat", "{}");
        auto r = c.wait([&](const auto& m) { return m.event == "phx_reply" && m.ref == hb; });
        REQUIRE(r);
        CHECK(status_of(r->payload) == "ok");

        auto reply = c.join(
            "realtime:room",
            R"({"postgres_changes":[{"event":"*","schema":"public","table":"agents"},)"
            R"({"event":"INSERT","schema":"public","table":"agents","filter":"name=eq.x"}]})",
            R"(,"access_token":")" + a + "\"");
        REQUIRE(status_of(reply) == "ok");
        const auto& pc = reply["response"]["postgres_changes"];
        REQUIRE(pc.IsArray());
        REQUIRE(pc.Size() == 2);
        CHECK(pc[0]["event"] == "*");
        CHECK(pc[1]["filter"] == "name=eq.x");
        CHECK(pc[0]["id"].GetUint64() != pc[1]["id"].GetUint64());
        auto sys = c.wait([](const auto& m) { return m.event == "system"; });
        REQUIRE(sys);
        CHECK(sys->payload["status"] == "ok");
        CHECK(sys->payload["extension"] == "postgres_changes");

        // Refusals carry a reason realtime-js shows.
        reply = c.join("realtime:bad",
                       R"({"postgres_changes":[{"event":"*","schema":"public","table":"nope"}]})");
        CHECK(status_of(reply) == "error");
        CHECK(reason_of(reply).find("no table public.nope") != std::string::npos);
        reply = c.join(
            "realtime:badcol",
            R"({"postgres_changes":[{"event":"*","schema":"public","table":"agents","filter":"nope=eq.1"}]})");
        CHECK(reason_of(reply).find("no column nope") != std::string::npos);
        reply = c.join(
            "realtime:badop",
            R"({"postgres_changes":[{"event":"*","schema":"public","table":"agents","filter":"name=like.x"}]})");
        CHECK(reason_of(reply).find("not supported") != std::string::npos);
        reply = c.join("realtime:private", R"({"private":true})");
        CHECK(reason_of(reply).find("private channels") != std::string::npos);
        reply = c.join("realtime:expired", "{}",
                       R"(,"access_token":")" + jwt("authenticated", w.tenant_a, -3600) + "\"");
        CHECK(reason_of(reply).find("JWT expired") != std::string::npos);
        // Broadcast is not served, an unjoined topic is unmatched.
        const auto bc = c.push("realtime:room", "broadcast",
                               R"({"type":"broadcast","event":"x","payload":{}})");
        r = c.wait([&](const auto& m) { return m.event == "phx_reply" && m.ref == bc; });
        REQUIRE(r);
        CHECK(reason_of(r->payload).find("broadcast is not supported") != std::string::npos);
        const auto um = c.push("realtime:other", "access_token", R"({"access_token":"x"})");
        r = c.wait([&](const auto& m) { return m.event == "phx_reply" && m.ref == um; });
        REQUIRE(r);
        CHECK(reason_of(r->payload) == "unmatched topic");
        // Leave: ok, then phx_close.
        const auto lv = c.push("realtime:room", "phx_leave", "{}", "1");
        r = c.wait([&](const auto& m) { return m.event == "phx_reply" && m.ref == lv; });
        REQUIRE(r);
        CHECK(status_of(r->payload) == "ok");
        CHECK(c.wait([](const auto& m) { return m.event == "phx_close"; }));
    }
}

TEST_CASE("realtime limits channels, bindings, joins and message size per socket",
          "[api][realtime]") {
    world w;
    api_gateway_process gw(w.db.api_dsn(), w.gateway_env({{"REALTIME_MAX_CHANNELS", "2"},
                                                          {"REALTIME_MAX_BINDINGS", "2"},
                                                          {"REALTIME_JOINS_PER_SECOND", "2"},
                                                          {"REALTIME_MESSAGE_LIMIT", "2048"}}));
    const auto a = jwt("authenticated", w.tenant_a);
    {
        phoenix_client c(gw.port, a);
        REQUIRE(c.open());
        const std::string b = R"({"event":"*","schema":"public","table":"agents"})";
        auto reply =
            c.join("realtime:three", R"({"postgres_changes":[)" + b + "," + b + "," + b + "]}");
        CHECK(reason_of(reply).find("too many postgres_changes bindings") != std::string::npos);
        CHECK(status_of(c.join("realtime:one", "{}")) == "ok");
        CHECK(status_of(c.join("realtime:two", "{}")) == "ok");
        reply = c.join("realtime:three", "{}");
        CHECK(reason_of(reply).find("too many") != std::string::npos);
        // Joins beyond the rate (2 a second, bursts of 4) are refused.
        int refused = 0;
        for (int i = 0; i < 6; ++i) {
            auto r = c.join("realtime:one", "{}");
            if (reason_of(r).find("too many joins") != std::string::npos) ++refused;
        }
        CHECK(refused >= 1);
        // A message above the limit closes with 1009.
        c.push("realtime:one", "access_token",
               R"({"access_token":")" + std::string(4096, 'x') + "\"}");
        auto f = c.ws().read_until(
            [](const ws_client::frame& x) { return x.op == ws_client::close_frame; });
        REQUIRE(f);
        CHECK(f->close_code() == 1009);
    }
    phoenix_client c(gw.port, a);
    REQUIRE(c.open());
    REQUIRE(c.ws().send_text("{not phoenix"));
    auto f =
        c.ws().read_until([](const ws_client::frame& x) { return x.op == ws_client::close_frame; });
    REQUIRE(f);
    CHECK(f->close_code() == 1007);
}

TEST_CASE(
    "realtime delivers a row only where RLS lets the subscriber select it, DELETE by privilege",
    "[api][realtime]") {
    world w;
    api_gateway_process gw(w.db.api_dsn(), w.gateway_env());
    wait_streaming(gw);
    const auto ta = jwt("authenticated", w.tenant_a);
    const auto ta2 = jwt("authenticated", w.tenant_a);  // another user of A: another claims group
    const auto tb = jwt("authenticated", w.tenant_b);
    const auto anon = jwt("anon");
    phoenix_client a(gw.port, ta), a2(gw.port, ta2), b(gw.port, tb), n(gw.port, anon);
    for (auto* c : {&a, &a2, &b, &n}) REQUIRE(c->open());
    REQUIRE(status_of(a.join("realtime:agents", agents_config("*"))) == "ok");
    REQUIRE(status_of(a2.join("realtime:agents", agents_config("INSERT", "slug=eq.a-two"))) ==
            "ok");
    REQUIRE(status_of(b.join("realtime:agents", agents_config("*"))) == "ok");
    REQUIRE(status_of(n.join("realtime:agents", agents_config("*"))) == "ok");

    auto admin = w.db.admin();
    admin.exec(
        "INSERT INTO agents (tenant_id, name, slug) VALUES ($1, 'one', 'a-one'), "
        "($1, 'two', 'a-two')",
        {w.tenant_a});
    admin.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, 'bee', 'b-one')",
               {w.tenant_b});

    auto ea = a.changes("realtime:agents", milliseconds(3000));
    REQUIRE(ea.size() == 2);
    for (const auto& e : ea) {
        const auto& d = e.payload["data"];
        CHECK(d["type"] == "INSERT");
        CHECK(d["schema"] == "public");
        CHECK(d["table"] == "agents");
        CHECK(d["record"]["tenant_id"] == w.tenant_a.c_str());  // never B's row
        CHECK(d["errors"].IsNull());
        CHECK(e.payload["ids"].IsArray());
        CHECK(std::string(d["commit_timestamp"].GetString()).back() == 'Z');
    }
    auto eb = b.changes("realtime:agents", milliseconds(1000));
    REQUIRE(eb.size() == 1);
    CHECK(eb[0].payload["data"]["record"]["slug"] == "b-one");
    // The filtered user of A sees the one row its filter names.
    auto ea2 = a2.changes("realtime:agents", milliseconds(1000));
    REQUIRE(ea2.size() == 1);
    CHECK(ea2[0].payload["data"]["record"]["slug"] == "a-two");
    // anon may not select agents: nothing.
    CHECK(n.changes("realtime:agents", milliseconds(500)).empty());

    // UPDATE: the new row and the old key.
    admin.exec("UPDATE agents SET name = 'uno' WHERE slug = 'a-one'");
    auto up = a.changes("realtime:agents", milliseconds(3000));
    REQUIRE(up.size() == 1);
    const auto& ud = up[0].payload["data"];
    CHECK(ud["type"] == "UPDATE");
    CHECK(ud["record"]["name"] == "uno");
    CHECK(ud["old_record"].HasMember("id"));
    CHECK_FALSE(ud["old_record"].HasMember("name"));
    CHECK(b.changes("realtime:agents", milliseconds(500)).empty());

    // DELETE: to every group that may read the table, with the primary key only.
    const auto id = std::string(
        admin.exec("DELETE FROM agents WHERE slug = 'b-one' RETURNING id::text").text(0, 0));
    for (auto* c : {&a, &b}) {
        auto del = c->changes("realtime:agents", milliseconds(3000));
        REQUIRE(del.size() == 1);
        const auto& dd = del[0].payload["data"];
        CHECK(dd["type"] == "DELETE");
        CHECK(dd["old_record"]["id"] == id.c_str());
        CHECK(dd["old_record"].MemberCount() == 1);
        CHECK_FALSE(dd.HasMember("record"));
    }
    CHECK(n.changes("realtime:agents", milliseconds(500)).empty());

    // One visibility statement per group and table per transaction, not one per subscriber
    // (figures an operator reads: the service role).
    auto h = awp::core::json::parse(
        gw.get("/api/health", awp::test::bearer(awp::test::kApiServiceKey)).body);
    CHECK(h["realtime"]["sockets"].GetUint64() == 4);
    CHECK(h["realtime"]["channels"].GetUint64() == 4);
    CHECK(h["realtime"]["visibility_checks"].GetUint64() <= 4 + 4 + 1 + 4);
}

TEST_CASE("a realtime socket whose token expires is told why and disconnected", "[api][realtime]") {
    world w;
    api_gateway_process gw(w.db.api_dsn(), w.gateway_env());
    // The data API allows 30 s of clock skew: this token is past its exp, inside the skew for
    // about 3 s more.
    const auto soon = jwt("authenticated", w.tenant_a, -27);
    const auto lasting = jwt("authenticated", w.tenant_a);
    phoenix_client c(gw.port, lasting);
    REQUIRE(c.open());
    REQUIRE(status_of(c.join("realtime:agents", agents_config("*"),
                             R"(,"access_token":")" + soon + "\"")) == "ok");
    auto sys =
        c.wait([](const auto& m) { return m.event == "system" && m.payload["status"] == "error"; },
               milliseconds(10000));
    REQUIRE(sys);
    CHECK(std::string(sys->payload["message"].GetString()).find("JWT expired") !=
          std::string::npos);
    auto f =
        c.ws().read_until([](const ws_client::frame& x) { return x.op == ws_client::close_frame; },
                          milliseconds(5000));
    REQUIRE(f);
    CHECK(f->close_code() == 1008);

    // A refresh with a bad token closes the channel with a reason.
    phoenix_client d(gw.port, lasting);
    REQUIRE(d.open());
    REQUIRE(status_of(d.join("realtime:agents", agents_config("*"))) == "ok");
    d.push("realtime:agents", "access_token", R"({"access_token":"x.y.z"})", "1");
    CHECK(d.wait(
        [](const auto& m) { return m.event == "system" && m.payload["status"] == "error"; }));
    CHECK(d.wait([](const auto& m) { return m.event == "phx_close"; }));
}

TEST_CASE("REALTIME=off serves no realtime route and says so in /api/health", "[api][realtime]") {
    awp::test::scoped_database db;
    api_gateway_process gw(db.api_dsn(), {{"REALTIME", "off"}});
    ws_client c(gw.port, "/realtime/v1/websocket?apikey=" + jwt("anon") + "&vsn=2.0.0");
    CHECK(c.answer().status == 404);
    auto h = awp::core::json::parse(gw.get("/api/health").body);
    CHECK(h["realtime"]["enabled"].IsFalse());
    CHECK(h["realtime"]["capture"]["state"] == "off");
    // The rest of the gateway is untouched.
    CHECK(gw.get("/rest/v1/agents?select=id", {}).status < 500);
}

TEST_CASE("a realtime socket that answers pings but sends no Phoenix heartbeat is closed",
          "[api][realtime]") {
    world w;
    // The websocket's own idle timeout pings every 2 s and the client answers: only the
    // heartbeat rule can close it.
    api_gateway_process gw(w.db.api_dsn(), w.gateway_env({{"REALTIME_HEARTBEAT_TIMEOUT", "5"},
                                                          {"REALTIME_IDLE_TIMEOUT", "4"}}));
    const auto a = jwt("authenticated", w.tenant_a);
    phoenix_client silent(gw.port, a), beating(gw.port, a);
    REQUIRE(silent.open());
    REQUIRE(beating.open());
    REQUIRE(status_of(silent.join("realtime:agents", agents_config("*"))) == "ok");
    REQUIRE(status_of(beating.join("realtime:agents", agents_config("*"))) == "ok");
    const auto start = clock_type::now();
    std::optional<ws_client::frame> closed;
    int pings = 0;
    while (!closed && clock_type::now() - start < std::chrono::seconds(20)) {
        // The silent one only reads (and so answers pings); the other heartbeats every second.
        auto f = silent.ws().read_frame(milliseconds(1000));
        if (f && f->op == ws_client::ping) {
            ++pings;
            silent.ws().send_frame(ws_client::pong, f->payload);
        } else if (f && f->op == ws_client::close_frame) {
            closed = f;
        }
        beating.push("phoenix", "heartbeat", "{}");
        (void)beating.wait([](const auto& m) { return m.event == "phx_reply"; }, milliseconds(500));
    }
    REQUIRE(closed);
    CHECK(pings >= 1);  // it did answer the websocket's pings all along
    CHECK(closed->close_code() == 1008);
    CHECK(closed->close_reason().find("no heartbeat") != std::string::npos);
    const auto after = clock_type::now() - start;
    CHECK(after >= std::chrono::seconds(4));
    // The one that heartbeats is still served.
    const auto hb = beating.push("phoenix", "heartbeat", "{}");
    CHECK(beating.wait([&](const auto& m) { return m.event == "phx_reply" && m.ref == hb; }));
}

TEST_CASE("realtime caps the sockets of one client address and of one user", "[api][realtime]") {
    world w;
    api_gateway_process gw(w.db.api_dsn(), w.gateway_env({{"REALTIME_MAX_SOCKETS_PER_ADDRESS", "3"},
                                                          {"REALTIME_MAX_SOCKETS_PER_USER", "2"}}));
    // Two sessions of one user (one sub, two tokens) and a third: the third socket's join as that
    // user is refused; another user is not.
    const auto sub = awp::core::uuid::generate_v4().to_string();
    auto token_of = [&](const std::string& who) {
        const std::string claims = R"({"sub":")" + who + R"(","role":"authenticated","exp":)" +
                                   std::to_string(now_s() + 3600) + R"(,"session_id":")" +
                                   awp::core::uuid::generate_v4().to_string() +
                                   R"(","app_metadata":{"tenant_id":")" + w.tenant_a + R"("}})";
        return crypto::jwt_sign_hs256(claims, kApiJwtSecret);
    };
    const auto anon = jwt("anon");
    {
        phoenix_client s1(gw.port, anon), s2(gw.port, anon), s3(gw.port, anon);
        for (auto* c : {&s1, &s2, &s3}) REQUIRE(c->open());
        REQUIRE(status_of(s1.join("realtime:a", "{}",
                                  R"(,"access_token":")" + token_of(sub) + "\"")) == "ok");
        REQUIRE(status_of(s2.join("realtime:a", "{}",
                                  R"(,"access_token":")" + token_of(sub) + "\"")) == "ok");
        const auto refused =
            s3.join("realtime:a", "{}", R"(,"access_token":")" + token_of(sub) + "\"");
        CHECK(reason_of(refused).find("too many realtime sockets for this user") !=
              std::string::npos);
        CHECK(status_of(s3.join("realtime:b", "{}",
                                R"(,"access_token":")" +
                                    token_of(awp::core::uuid::generate_v4().to_string()) + "\"")) ==
              "ok");
        // A fourth socket from this address is refused at the upgrade, with Retry-After.
        ws_client fourth(gw.port, "/realtime/v1/websocket?apikey=" + anon + "&vsn=2.0.0");
        CHECK(fourth.answer().status == 429);
        CHECK(fourth.answer().head.find("retry-after: 5") != std::string::npos);
    }
    // Closed sockets give their places back (the server notices the close).
    bool reopened = false;
    for (int i = 0; i < 50 && !reopened; ++i) {
        phoenix_client again(gw.port, anon);
        if (again.open()) {
            reopened = status_of(again.join("realtime:a", "{}",
                                            R"(,"access_token":")" + token_of(sub) + "\"")) == "ok";
        }
        if (!reopened) std::this_thread::sleep_for(milliseconds(100));
    }
    CHECK(reopened);
}

TEST_CASE("each gateway reads a slot of its own, and an abandoned one is dropped by another",
          "[api][realtime]") {
    world w;
    auto admin = w.db.admin();
    auto slots = [&] {
        std::vector<std::string> out;
        auto r = admin.exec(
            "SELECT slot_name || ':' || active FROM pg_replication_slots "
            "WHERE left(slot_name, length($1) + 1) = $1 || '_' ORDER BY 1",
            {w.slot});
        for (int i = 0; i < r.size(); ++i) out.emplace_back(r.text(i, 0));
        return out;
    };
    {
        api_gateway_process one(w.db.api_dsn(), w.gateway_env({{"REALTIME_INSTANCE", "one"}}));
        wait_streaming(one);
        CHECK(slots() == std::vector<std::string>{w.slot + "_one:true"});
        CHECK(one.stop() == 0);
    }
    CHECK(slots() == std::vector<std::string>{w.slot + "_one:false"});  // kept for its return
    // A second gateway: a slot of its own beside it; the first's, inactive at one position past
    // REALTIME_SLOT_ABANDON, is dropped (it would hold WAL for nobody).
    api_gateway_process two(w.db.api_dsn(), w.gateway_env({{"REALTIME_INSTANCE", "two"},
                                                           {"REALTIME_SLOT_ABANDON", "1"}}));
    wait_streaming(two);
    const auto end = clock_type::now() + std::chrono::seconds(60);
    while (slots().size() > 1 && clock_type::now() < end) {
        std::this_thread::sleep_for(milliseconds(250));
    }
    CHECK(slots() == std::vector<std::string>{w.slot + "_two:true"});
    auto h = awp::core::json::parse(
        two.get("/api/health", awp::test::bearer(awp::test::kApiServiceKey)).body);
    CHECK(h["realtime"]["capture"]["slots_dropped"].GetUint64() == 1);
    CHECK(h["realtime"]["capture"]["slot"] == (w.slot + "_two").c_str());
    // A prefix or instance that cannot make a slot name is bad configuration (exit 78).
    awp::test::child bad({AWP_BIN_DIR "/awp-api-gateway"},
                         {{"REALTIME_SLOT", "Bad-Name"},
                          {"AWP_API_DATABASE_URL", w.db.api_dsn()},
                          {"JWT_SECRET", kApiJwtSecret},
                          {"API_PORT", "0"}});
    CHECK(bad.wait(std::chrono::seconds(20)) == 78);
}

TEST_CASE("realtime delivers a commit that the slot has before new snapshots see it",
          "[realtime][commit]") {
    // The commit record is flushed (the slot streams it) a moment before the committing session
    // leaves Postgres' running transactions; a check run then does not see the row. Synchronous
    // replication to a standby that never comes holds a session in that moment for as long as
    // the test wants (a private cluster: the setting is the server's; other sessions commit
    // locally).
    namespace pg = awp::core::pg;
    awp::test::private_cluster pgc(true);
    {
        auto c = pg::connection::connect(pgc.dsn());
        c.exec("ALTER SYSTEM SET wal_level = logical");
        c.exec("ALTER SYSTEM SET synchronous_standby_names = 'awp_nobody'");
        c.exec("ALTER DATABASE awp SET synchronous_commit = local");
        c.exec("CREATE ROLE awp_api LOGIN NOINHERIT");
        c.exec("GRANT anon, authenticated, service_role TO awp_api");
        c.exec("CREATE ROLE awp_realtime LOGIN REPLICATION");
    }
    pgc.restart();
    auto admin = pg::connection::connect(pgc.dsn());
    const auto tenant = std::string(
        admin.exec("INSERT INTO tenants (name, slug) VALUES ('A', 'a') RETURNING id::text")
            .text(0, 0));
    const auto url = "@127.0.0.1:" + std::to_string(pgc.port()) + "/awp";
    api_gateway_process gw("postgresql://awp_api" + url,
                           {{"REALTIME_DATABASE_URL", "postgresql://awp_realtime" + url},
                            {"REALTIME_SLOT", "awp_rt_commit"}});
    wait_streaming(gw);
    phoenix_client a(gw.port, jwt("authenticated", tenant));
    REQUIRE(a.open());
    REQUIRE(status_of(a.join("realtime:agents", agents_config("INSERT"))) == "ok");
    auto realtime_health = [&] {
        return awp::core::json::parse(
            gw.get("/api/health", awp::test::bearer(awp::test::kApiServiceKey)).body);
    };
    auto waits = [&] { return realtime_health()["realtime"]["commit_waits"].GetUint64(); };
    REQUIRE(waits() == 0);
    CHECK(realtime_health()["realtime"]["lag_ms"]["transactions"].GetUint64() == 0);

    // The insert commits (in the WAL) and waits for the standby, still a running transaction.
    std::atomic<int> pid{0};
    std::thread writer([&] {
        try {
            auto c = pg::connection::connect(pgc.dsn());
            pid = std::stoi(std::string(c.exec("SELECT pg_backend_pid()").text(0, 0)));
            c.exec("SET synchronous_commit = remote_write");
            c.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, 'held', 'held')",
                   {tenant});
        } catch (const std::exception& e) {
            UNSCOPED_INFO("the held insert: " << e.what());
        }
    });
    auto waiting = [&] {
        return pid != 0 && admin.exec(
                                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 "
                                    "AND wait_event = 'SyncRep'",
                                    {std::to_string(pid.load())})
                                   .text(0, 0) == "1";
    };
    auto end = clock_type::now() + std::chrono::seconds(20);
    while (!waiting() && clock_type::now() < end) std::this_thread::sleep_for(milliseconds(20));
    REQUIRE(waiting());
    // The gateway has the change and found that no new snapshot sees it yet.
    end = clock_type::now() + std::chrono::seconds(20);
    while (waits() == 0 && clock_type::now() < end) std::this_thread::sleep_for(milliseconds(20));
    REQUIRE(waits() > 0);
    CHECK(admin.exec("SELECT count(*) FROM agents WHERE slug = 'held'").text(0, 0) == "0");
    // Released (the commit was local already): now every snapshot sees it, and so does the check.
    std::this_thread::sleep_for(milliseconds(300));
    admin.exec("SELECT pg_cancel_backend($1)", {std::to_string(pid.load())});
    writer.join();
    auto got = a.changes("realtime:agents", milliseconds(5000));
    REQUIRE(got.size() == 1);
    CHECK(got[0].payload["data"]["record"]["slug"] == "held");
    // The server's part of its latency, commit to queued, counts the whole hold (>= 300 ms).
    auto lag = realtime_health()["realtime"]["lag_ms"].GetObject();
    CHECK(lag["transactions"].GetUint64() == 1);
    CHECK(lag["max"].GetDouble() >= 300.0);
    CHECK(lag["p50"].GetDouble() == lag["max"].GetDouble());
    gw.stop();
    admin.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots");
}

}  // namespace realtime_test
