// libs/realtime's socket side without sockets: Phoenix frames in both vsn, the limits that
// refuse hostile frames, postgres_changes bindings and filters, and the event data realtime-js
// reads (values typed as the platform types them).
#include <catch2/catch.hpp>

#include "awp/core/json.hpp"
#include "awp/realtime/binding.hpp"
#include "awp/realtime/phoenix.hpp"
#include "awp/realtime/record.hpp"

namespace realtime_protocol_test {

namespace rt = awp::realtime;
namespace phx = awp::realtime::phoenix;
namespace json = awp::core::json;

namespace {

rt::column_value col(std::string name, std::string type, std::optional<std::string> text,
                     bool key = false) {
    rt::column_value c;
    c.name = std::move(name);
    c.type = std::move(type);
    c.text = std::move(text);
    c.key = key;
    return c;
}

rt::binding binding_of(const std::string& text) {
    auto d = json::parse(text);
    return rt::parse_binding(d);
}

rt::change insert_row(std::vector<rt::column_value> row) {
    rt::change c;
    c.kind = rt::change_kind::insert;
    c.schema = "public";
    c.table = "agent_commands";
    c.commit_timestamp = "2026-11-26T23:40:35.758Z";
    c.new_row = std::move(row);
    return c;
}

}  // namespace

TEST_CASE("phoenix frames parse in vsn 2.0.0 arrays and 1.0.0 objects", "[realtime]") {
    auto m = phx::parse(R"(["1","2","realtime:room","phx_join",{"config":{}}])", phx::vsn::v2);
    CHECK(m.join_ref == "1");
    CHECK(m.ref == "2");
    CHECK(m.topic == "realtime:room");
    CHECK(m.event == "phx_join");
    REQUIRE(m.payload.IsObject());
    CHECK(m.payload.HasMember("config"));

    m = phx::parse(R"({"topic":"phoenix","event":"heartbeat","payload":{},"ref":7})", phx::vsn::v1);
    CHECK_FALSE(m.join_ref);
    CHECK(m.ref == "7");
    CHECK(m.topic == "phoenix");

    // A null payload is an empty object.
    m = phx::parse(R"([null,null,"t","e",null])", phx::vsn::v2);
    CHECK(m.payload.IsObject());

    CHECK(phx::parse_vsn(std::nullopt) == phx::vsn::v1);
    CHECK(phx::parse_vsn(std::string_view("2.0.0")) == phx::vsn::v2);
    CHECK_FALSE(phx::parse_vsn(std::string_view("3.0.0")));
}

TEST_CASE("phoenix frames that are not messages are refused with a reason", "[realtime]") {
    CHECK_THROWS_AS(phx::parse("not json", phx::vsn::v2), phx::frame_error);
    CHECK_THROWS_AS(phx::parse(R"(["1","2","t","e"])", phx::vsn::v2), phx::frame_error);
    CHECK_THROWS_AS(phx::parse(R"(["1","2","t","e",[]])", phx::vsn::v2), phx::frame_error);
    CHECK_THROWS_AS(phx::parse(R"(["1","2",3,"e",{}])", phx::vsn::v2), phx::frame_error);
    CHECK_THROWS_AS(phx::parse(R"(["1","2","","e",{}])", phx::vsn::v2), phx::frame_error);
    CHECK_THROWS_AS(phx::parse(R"({"topic":"t","event":"e"})", phx::vsn::v2), phx::frame_error);
    CHECK_THROWS_AS(phx::parse(R"(["1","2","t","e",{}])", phx::vsn::v1), phx::frame_error);
    CHECK_THROWS_AS(phx::parse(R"([{"a":1},"2","t","e",{}])", phx::vsn::v2), phx::frame_error);
    phx::limits l;
    l.max_topic = 8;
    CHECK_THROWS_WITH(phx::parse(R"([null,null,"realtime:long-topic","e",{}])", phx::vsn::v2, l),
                      Catch::Contains("topic is too long"));
    l = {};
    l.max_bytes = 64;
    CHECK_THROWS_WITH(
        phx::parse(std::string(R"([null,null,"t","e",{"a":")") + std::string(100, 'x') + "\"}]",
                   phx::vsn::v2, l),
        Catch::Contains("too large"));
    l = {};
    std::string deep = R"([null,null,"t","e",)";
    for (int i = 0; i < 40; ++i) deep += R"({"a":)";
    deep += "1";
    for (int i = 0; i < 40; ++i) deep += "}";
    deep += "]";
    CHECK_THROWS_AS(phx::parse(deep, phx::vsn::v2, l), phx::frame_error);
}

TEST_CASE("phoenix frames serialise in the socket's vsn", "[realtime]") {
    const auto payload = phx::reply_payload("ok", "{}");
    phx::outgoing o{std::string_view("1"), std::string_view("2"), "realtime:x", "phx_reply",
                    payload};
    CHECK(phx::serialize(o, phx::vsn::v2) ==
          R"(["1","2","realtime:x","phx_reply",{"status":"ok","response":{}}])");
    o.join_ref.reset();
    auto v1 = json::parse(phx::serialize(o, phx::vsn::v1));
    CHECK(v1["join_ref"].IsNull());
    CHECK(std::string(v1["ref"].GetString()) == "2");
    CHECK(std::string(v1["payload"]["status"].GetString()) == "ok");
}

TEST_CASE("a binding echoes what the client sent and refuses what it cannot serve", "[realtime]") {
    auto b = binding_of(
        R"({"event":"*","schema":"public","table":"agent_commands","filter":"agent_id=eq.7"})");
    b.id = 42;
    CHECK(b.events == rt::event_bit::all);
    auto reply = json::parse(b.reply_json());
    CHECK(reply["id"].GetUint64() == 42);
    CHECK(std::string(reply["event"].GetString()) == "*");
    CHECK(std::string(reply["filter"].GetString()) == "agent_id=eq.7");
    b = binding_of(R"({"event":"INSERT","schema":"public"})");
    CHECK(b.any_table());
    CHECK_FALSE(json::parse(b.reply_json()).HasMember("table"));
    CHECK_FALSE(json::parse(b.reply_json()).HasMember("filter"));
    CHECK_THROWS_AS(binding_of(R"({"event":"TRUNCATE","schema":"public"})"), rt::binding_error);
    CHECK_THROWS_AS(binding_of(R"({"event":"*"})"), rt::binding_error);
    CHECK_THROWS_AS(binding_of(R"({"event":"*","schema":"public","filter":"a=eq.1"})"),
                    rt::binding_error);
    CHECK_THROWS_WITH(binding_of(R"({"event":"*","schema":"public","table":"t",
                                    "filter":"a=like.x%"})"),
                      Catch::Contains("like is not supported"));
    CHECK_THROWS_AS(binding_of(R"({"event":"*","schema":"public","table":"t","filter":"a"})"),
                    rt::binding_error);
}

TEST_CASE("a binding covers its event, schema and table", "[realtime]") {
    auto b = binding_of(R"({"event":"UPDATE","schema":"public","table":"tasks"})");
    CHECK(b.covers(rt::change_kind::update, "public", "tasks"));
    CHECK_FALSE(b.covers(rt::change_kind::insert, "public", "tasks"));
    CHECK_FALSE(b.covers(rt::change_kind::update, "public", "agents"));
    CHECK_FALSE(b.covers(rt::change_kind::update, "other", "tasks"));
    auto all = binding_of(R"({"event":"*","schema":"*"})");
    CHECK(all.covers(rt::change_kind::remove, "x", "y"));
}

TEST_CASE("filters compare as the column's type compares", "[realtime]") {
    auto holds = [](const std::string& f, std::vector<rt::column_value> row) {
        auto b = binding_of(
            R"({"event":"*","schema":"public","table":"agent_commands","filter":")" + f + "\"}");
        return rt::filters_hold(b, insert_row(std::move(row)));
    };
    CHECK(holds("n=eq.7", {col("n", "int4", "7")}));
    CHECK_FALSE(holds("n=eq.7", {col("n", "int4", "8")}));
    CHECK(holds("n=gt.9", {col("n", "int4", "10")}));  // as numbers, not text
    CHECK_FALSE(holds("n=lt.9", {col("n", "int4", "10")}));
    CHECK(holds("n=gte.10", {col("n", "numeric", "10.00")}));
    CHECK(holds("n=lte.10", {col("n", "float8", "1e1")}));
    CHECK(holds("s=neq.b", {col("s", "text", "a")}));
    CHECK(holds(R"(s=in.(a,\"b,c\",d))", {col("s", "text", "b,c")}));
    CHECK_FALSE(holds("s=in.(a,d)", {col("s", "text", "b")}));
    CHECK(holds("ok=eq.true", {col("ok", "bool", "t")}));
    CHECK(holds("id=eq.AAAAAAAA-0000-0000-0000-000000000000",
                {col("id", "uuid", "aaaaaaaa-0000-0000-0000-000000000000")}));
    // NULL: no comparison holds, negated or not; is.null does.
    CHECK_FALSE(holds("s=eq.a", {col("s", "text", std::nullopt)}));
    CHECK_FALSE(holds("s=neq.a", {col("s", "text", std::nullopt)}));
    CHECK_FALSE(holds("s=not.eq.a", {col("s", "text", std::nullopt)}));
    CHECK(holds("s=is.null", {col("s", "text", std::nullopt)}));
    CHECK(holds("s=not.is.null", {col("s", "text", "x")}));
    // Several filters all hold; a comma inside a plain value stays in it.
    CHECK(holds("a=eq.1,b=eq.x", {col("a", "int4", "1"), col("b", "text", "x")}));
    CHECK_FALSE(holds("a=eq.1,b=eq.x", {col("a", "int4", "1"), col("b", "text", "y")}));
    CHECK(holds("b=eq.x,y", {col("b", "text", "x,y")}));
    // A column the row does not carry (unknown, or an unchanged TOAST value): no match.
    CHECK_FALSE(holds("zz=eq.1", {col("a", "int4", "1")}));
}

TEST_CASE("a DELETE is filtered on its identity columns only", "[realtime]") {
    auto b = binding_of(R"({"event":"DELETE","schema":"public","table":"t","filter":"id=eq.5"})");
    rt::change c;
    c.kind = rt::change_kind::remove;
    c.schema = "public";
    c.table = "t";
    c.old_keys = {col("id", "int8", "5", true)};
    CHECK(rt::filters_hold(b, c));
    auto other =
        binding_of(R"({"event":"DELETE","schema":"public","table":"t","filter":"x=eq.5"})");
    CHECK_FALSE(rt::filters_hold(other, c));
}

TEST_CASE("event data carries values typed as the platform types them", "[realtime]") {
    auto c = insert_row(
        {col("id", "int8", "12", true), col("ok", "bool", "f"), col("score", "numeric", "1.50"),
         col("nan", "float8", "NaN"), col("meta", "jsonb", R"({"a": [1, 2]})"),
         col("tags", "_text", R"({a,"b c",NULL})"), col("grid", "_int4", "{{1,2},{3,4}}"),
         col("note", "text", std::nullopt), col("at", "timestamptz", "2026-11-26 23:40:35.758+00"),
         col("local", "timestamp", "2026-11-26 23:40:35"),
         col("id2", "uuid", "aaaaaaaa-0000-0000-0000-000000000000")});
    auto d = json::parse(rt::change_data(c));
    CHECK(std::string(d["type"].GetString()) == "INSERT");
    CHECK(std::string(d["commit_timestamp"].GetString()) == "2026-11-26T23:40:35.758Z");
    CHECK(d["errors"].IsNull());
    CHECK_FALSE(d.HasMember("old_record"));
    REQUIRE(d["columns"].IsArray());
    CHECK(std::string(d["columns"][0]["type"].GetString()) == "int8");
    const auto& r = d["record"];
    CHECK(r["id"].GetInt64() == 12);
    CHECK(r["ok"].IsFalse());
    CHECK(r["score"].GetDouble() == 1.5);
    CHECK(std::string(r["nan"].GetString()) == "NaN");
    CHECK(r["meta"]["a"][1].GetInt() == 2);
    REQUIRE(r["tags"].IsArray());
    CHECK(std::string(r["tags"][1].GetString()) == "b c");
    CHECK(r["tags"][2].IsNull());
    CHECK(r["grid"][1][0].GetInt() == 3);
    CHECK(r["note"].IsNull());
    CHECK(std::string(r["at"].GetString()) == "2026-11-26T23:40:35.758+00:00");
    CHECK(std::string(r["local"].GetString()) == "2026-11-26T23:40:35");
    CHECK(std::string(r["id2"].GetString()) == "aaaaaaaa-0000-0000-0000-000000000000");
    // Text that is not UTF-8 (a SQL_ASCII database) never breaks the frame: U+FFFD for it.
    {
        json::writer w;
        rt::write_value(w, "text",
                        "a\xC0\xAF"
                        "b");
        CHECK(w.str() ==
              "\"a\xEF\xBF\xBD\xEF\xBF\xBD"
              "b\"");
    }
    // A number a double cannot hold stays text.
    {
        json::writer w;
        rt::write_value(w, "float8", "1e999");
        CHECK(w.str() == R"("1e999")");
    }
    // Not an array literal: kept as the text.
    json::writer j;
    rt::write_value(j, "_int4", "{1,2");
    CHECK(j.str() == R"("{1,2")");
}

TEST_CASE("UPDATE carries the old key, DELETE only the primary key", "[realtime]") {
    rt::change u;
    u.kind = rt::change_kind::update;
    u.schema = "public";
    u.table = "t";
    u.new_row = {col("id", "int8", "5", true), col("status", "text", "done")};
    auto d = json::parse(rt::change_data(u));
    CHECK(d["record"]["status"] == "done");
    CHECK(d["old_record"]["id"].GetInt() == 5);
    CHECK_FALSE(d["old_record"].HasMember("status"));

    rt::change del;
    del.kind = rt::change_kind::remove;
    del.schema = "public";
    del.table = "t";
    // REPLICA IDENTITY FULL: every old column comes; only the primary key goes out.
    del.old_keys = {col("id", "int8", "5", true), col("secret", "text", "x", true)};
    d = json::parse(rt::change_data(del, {"id"}));
    CHECK_FALSE(d.HasMember("record"));
    CHECK(d["old_record"]["id"].GetInt() == 5);
    CHECK_FALSE(d["old_record"].HasMember("secret"));

    auto p = json::parse(rt::change_payload({3, 9}, R"({"type":"DELETE"})"));
    CHECK(p["ids"][1].GetUint64() == 9);
    CHECK(std::string(p["data"]["type"].GetString()) == "DELETE");
}

}  // namespace realtime_protocol_test
