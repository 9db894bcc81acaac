// The pgoutput decoder and the transactions it assembles, on real bytes a PostgreSQL 15 sent
// (tests/fixtures/pgoutput/stream.txt): every message kind, values exactly as committed, key
// changes, unchanged TOAST, REPLICA IDENTITY FULL, truncates reported and not delivered; and the
// bounds: any cut or lie in a message is a decode_error naming an offset inside it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "awp/realtime/assembler.hpp"
#include "awp/realtime/pgoutput.hpp"
#include "awp/realtime/walsender.hpp"
#include "support/pgoutput_fixture.hpp"

namespace realtime_pgoutput_test {

namespace {

namespace rt = awp::realtime;
namespace pgo = awp::realtime::pgoutput;

// pg_type's names of the built-in types the fixture's tables use, as the reader's lookup gives.
const std::map<std::uint32_t, std::string> kBuiltins = {
    {16, "bool"},    {17, "bytea"},         {20, "int8"},      {23, "int4"},   {25, "text"},
    {1009, "_text"}, {1184, "timestamptz"}, {1700, "numeric"}, {2950, "uuid"}, {3802, "jsonb"}};

struct replay {
    std::vector<rt::transaction> transactions;
    std::vector<std::vector<std::string>> truncated;  // per transaction
    std::vector<std::vector<std::uint32_t>> asked;    // unknown types per relation message
};

// Feeds the whole fixture, answering type questions as the reader does.
replay run_fixture(rt::assembler& a) {
    replay r;
    std::vector<std::string> truncated;
    for (const auto& line : awp::test::pgoutput_stream()) {
        auto s = a.feed(line.bytes);
        if (!s.unknown_types.empty()) {
            r.asked.push_back(s.unknown_types);
            for (const auto oid : s.unknown_types) {
                const auto it = kBuiltins.find(oid);
                REQUIRE(it != kBuiltins.end());
                a.set_type_name(oid, it->second);
            }
        }
        truncated.insert(truncated.end(), s.truncated.begin(), s.truncated.end());
        if (s.out) {
            REQUIRE(s.final);  // the fixture's transactions are far below the part size
            r.transactions.push_back(std::move(*s.out));
            r.truncated.push_back(std::move(truncated));
            truncated.clear();
        }
    }
    return r;
}

const rt::column_value& col(const std::vector<rt::column_value>& row, const std::string& name) {
    for (const auto& c : row)
        if (c.name == name) return c;
    FAIL("no column " << name);
    static const rt::column_value none;
    return none;
}

}  // namespace

TEST_CASE("every message of a real pgoutput stream decodes, and every kind is in it",
          "[realtime]") {
    std::set<char> kinds;
    for (const auto& line : awp::test::pgoutput_stream()) {
        INFO("message at " << line.lsn << " starting with " << line.bytes[0]);
        REQUIRE_NOTHROW(pgo::decode(line.bytes));
        kinds.insert(line.bytes[0]);
    }
    CHECK(kinds == std::set<char>{'B', 'C', 'R', 'Y', 'I', 'U', 'D', 'T', 'O', 'M'});
}

TEST_CASE("a real stream becomes the committed transactions, in order, with their values",
          "[realtime]") {
    rt::assembler a;
    const auto r = run_fixture(a);
    // capture.sh commits 13 transactions (its 5th and 8th steps are two each).
    REQUIRE(r.transactions.size() == 13);
    for (std::size_t i = 1; i < r.transactions.size(); ++i) {
        CHECK(r.transactions[i].commit_lsn > r.transactions[i - 1].commit_lsn);
    }
    for (const auto& t : r.transactions) {
        for (const auto& c : t.changes) {
            CHECK(c.lsn == t.commit_lsn);
            CHECK(c.commit_timestamp == t.commit_timestamp);
        }
        // ISO 8601 UTC with milliseconds, as the client expects.
        CHECK(t.commit_timestamp.size() == 24);
        CHECK(t.commit_timestamp[10] == 'T');
        CHECK(t.commit_timestamp.back() == 'Z');
    }

    SECTION("an insert carries every column as text, typed, the key marked") {
        const auto& t = r.transactions[0];
        REQUIRE(t.changes.size() == 1);
        const auto& c = t.changes[0];
        CHECK(c.kind == rt::change_kind::insert);
        CHECK(c.schema == "public");
        CHECK(c.table == "rt_items");
        CHECK(c.old_keys.empty());
        REQUIRE(c.new_row.size() == 11);
        CHECK(col(c.new_row, "id").text == "11111111-1111-4111-8111-111111111111");
        CHECK(col(c.new_row, "id").type == "uuid");
        CHECK(col(c.new_row, "id").type_oid == 2950);
        CHECK(col(c.new_row, "id").key);
        CHECK_FALSE(col(c.new_row, "title").key);
        CHECK(col(c.new_row, "title").text == "first");
        CHECK(col(c.new_row, "title").type == "text");
        CHECK(col(c.new_row, "n").text == "42");
        CHECK(col(c.new_row, "n").type == "int4");
        CHECK(col(c.new_row, "body").text == R"({"k": "v", "n": [1, 2]})");
        CHECK(col(c.new_row, "body").type == "jsonb");
        CHECK(col(c.new_row, "at").text == "2026-11-26 23:40:35.758+00");
        CHECK(col(c.new_row, "at").type == "timestamptz");
        CHECK(col(c.new_row, "flag").text == "t");
        CHECK(col(c.new_row, "amount").text == "1234.50");
        CHECK(col(c.new_row, "amount").type == "numeric");
        CHECK(col(c.new_row, "tags").text == R"({a,"b c"})");
        CHECK(col(c.new_row, "tags").type == "_text");
        // The enum's name came in a Type message, not from a lookup.
        CHECK(col(c.new_row, "status").text == "pending");
        CHECK(col(c.new_row, "status").type == "rt_status");
        CHECK(col(c.new_row, "raw").text == "\\x00ff0a");
        CHECK(col(c.new_row, "big").text == "small");
    }
    SECTION("NULL is nullopt, not an empty string") {
        const auto& c = r.transactions[1].changes.at(0);
        CHECK(col(c.new_row, "id").text == "22222222-2222-4222-8222-222222222222");
        CHECK_FALSE(col(c.new_row, "title").text.has_value());
        CHECK_FALSE(col(c.new_row, "n").text.has_value());
        CHECK(c.new_row.size() == 11);
    }
    SECTION("an update that keeps its key carries no old row; text is byte for byte") {
        const auto& c = r.transactions[2].changes.at(0);
        CHECK(c.kind == rt::change_kind::update);
        CHECK(c.old_keys.empty());
        CHECK(col(c.new_row, "title").text == "line\nnext \"quoted\"");
        CHECK(col(c.new_row, "status").text == "running");
    }
    SECTION("an update of the key carries the old key, and only the key") {
        const auto& c = r.transactions[3].changes.at(0);
        CHECK(c.kind == rt::change_kind::update);
        REQUIRE(c.old_keys.size() == 1);
        CHECK(c.old_keys[0].name == "id");
        CHECK(c.old_keys[0].key);
        CHECK(c.old_keys[0].text == "22222222-2222-4222-8222-222222222222");
        CHECK(col(c.new_row, "id").text == "33333333-3333-4333-8333-333333333333");
    }
    SECTION("an unchanged TOASTed value is left out of the row, not sent as NULL") {
        const auto& big = r.transactions[4].changes.at(0);
        CHECK(col(big.new_row, "big").text == std::string(10000, 'x'));
        const auto& c = r.transactions[5].changes.at(0);
        CHECK(col(c.new_row, "status").text == "done");
        CHECK(c.new_row.size() == 10);
        for (const auto& v : c.new_row) CHECK(v.name != "big");
    }
    SECTION("a delete carries the primary key only") {
        const auto& c = r.transactions[6].changes.at(0);
        CHECK(c.kind == rt::change_kind::remove);
        CHECK(c.new_row.empty());
        REQUIRE(c.old_keys.size() == 1);
        CHECK(c.old_keys[0].name == "id");
        CHECK(c.old_keys[0].type == "uuid");
        CHECK(c.old_keys[0].text == "33333333-3333-4333-8333-333333333333");
    }
    SECTION("one transaction over two tables keeps its order; names arrive as written") {
        const auto& t = r.transactions[7];
        REQUIRE(t.changes.size() == 2);
        CHECK(t.changes[0].table == "Odd \"Name\"");
        CHECK(col(t.changes[0].new_row, "clé").text == "9007199254740993");
        CHECK(col(t.changes[0].new_row, "clé").type == "int8");
        CHECK(col(t.changes[0].new_row, "note text").text == "ünïcode ✓");
        CHECK(t.changes[1].table == "rt_full");
    }
    SECTION("REPLICA IDENTITY FULL: update and delete carry the whole old row") {
        const auto& u = r.transactions[8].changes.at(0);
        REQUIRE(u.old_keys.size() == 2);
        CHECK(col(u.old_keys, "b").text == "one");
        CHECK(col(u.new_row, "b").text == "uno");
        const auto& d = r.transactions[9].changes.at(0);
        CHECK(d.kind == rt::change_kind::remove);
        CHECK(col(d.old_keys, "a").text == "1");
        CHECK(col(d.old_keys, "b").text == "uno");
    }
    SECTION("a truncate is reported by table name and delivers no change") {
        CHECK(r.transactions[10].changes.empty());
        CHECK(r.truncated[10] == std::vector<std::string>{"public.rt_full"});
        for (std::size_t i = 0; i < r.truncated.size(); ++i) {
            if (i != 10) CHECK(r.truncated[i].empty());
        }
    }
    SECTION("a logical message and a replication origin deliver only the row changes") {
        REQUIRE(r.transactions[11].changes.size() == 1);
        CHECK(col(r.transactions[11].changes[0].new_row, "b").text == "two");
        REQUIRE(r.transactions[12].changes.size() == 1);
        CHECK(col(r.transactions[12].changes[0].new_row, "b").text == "three");
    }
}

TEST_CASE("a relation's unknown column types are asked for once, Type messages answer the rest",
          "[realtime]") {
    rt::assembler a;
    const auto r = run_fixture(a);
    std::set<std::uint32_t> asked;
    for (const auto& list : r.asked) {
        for (const auto oid : list) CHECK(asked.insert(oid).second);  // never twice
    }
    CHECK(asked.size() == kBuiltins.size());
    CHECK(a.type_count() == kBuiltins.size() + 1);  // + rt_status from its Type message
    // A new session forgets relations (the server announces them again), keeps type names.
    a.reset();
    CHECK(a.relation_count() == 0);
    CHECK(a.type_count() == kBuiltins.size() + 1);
    const auto again = run_fixture(a);
    CHECK(again.asked.empty());
    CHECK(again.transactions.size() == 13);
}

TEST_CASE("a message cut anywhere is a decode_error naming an offset inside it", "[realtime]") {
    for (const auto& line : awp::test::pgoutput_stream()) {
        // The 10 kB TOAST value: every cut inside it fails the same way; its edges suffice.
        const std::size_t step = line.bytes.size() > 4096 ? 97 : 1;
        for (std::size_t n = 0; n < line.bytes.size(); n += step) {
            INFO("message " << line.bytes[0] << " at " << line.lsn << " cut to " << n);
            try {
                (void)pgo::decode(std::string_view(line.bytes).substr(0, n));
                FAIL("decoded a cut message");
            } catch (const pgo::decode_error& e) {
                CHECK(e.offset() <= n);
                CHECK(std::string(e.what()).find("(at byte ") != std::string::npos);
            }
        }
        // And a byte too many.
        CHECK_THROWS_AS(pgo::decode(line.bytes + '\0'), pgo::decode_error);
    }
}

TEST_CASE("lengths and counts the message cannot hold are refused before anything is allocated",
          "[realtime]") {
    auto be32 = [](std::uint32_t v) {
        return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                           static_cast<char>(v >> 8), static_cast<char>(v)};
    };
    auto be16 = [](std::uint16_t v) {
        return std::string{static_cast<char>(v >> 8), static_cast<char>(v)};
    };
    const std::string rel = be32(16384);
    SECTION("a value longer than the message") {
        const auto m = "I" + rel + "N" + be16(1) + "t" + be32(0x7fffffff) + "abc";
        REQUIRE_THROWS_AS(pgo::decode(m), pgo::decode_error);
        try {
            (void)pgo::decode(m);
        } catch (const pgo::decode_error& e) {
            CHECK(e.offset() == 13);  // where the value would start
        }
    }
    SECTION("a negative value length") {
        CHECK_THROWS_WITH(pgo::decode("I" + rel + "N" + be16(1) + "t" + be32(0xffffffff)),
                          Catch::Contains("negative value length"));
    }
    SECTION("more columns than a row may have") {
        CHECK_THROWS_WITH(pgo::decode("I" + rel + "N" + be16(0xffff)),
                          Catch::Contains("over the limit"));
    }
    SECTION("a truncate of more relations than the message holds") {
        CHECK_THROWS_WITH(pgo::decode("T" + be32(0xffffffff) + std::string(1, '\0') + be32(1)),
                          Catch::Contains("does not fit"));
    }
    SECTION("an unknown column kind, row tag and message type") {
        CHECK_THROWS_WITH(pgo::decode("I" + rel + "N" + be16(1) + "x"),
                          Catch::Contains("unknown column kind 0x78"));
        CHECK_THROWS_WITH(pgo::decode("I" + rel + "Q" + be16(0)), Catch::Contains("row tag"));
        CHECK_THROWS_WITH(pgo::decode("Z"), Catch::Contains("unknown message type 0x5a"));
        CHECK_THROWS_AS(pgo::decode(""), pgo::decode_error);
    }
    SECTION("a name without its terminator") {
        CHECK_THROWS_WITH(pgo::decode("Y" + be32(1) + "public"), Catch::Contains("unterminated"));
    }
}

TEST_CASE("changes that do not fit the stream are a stream_error, not a guess", "[realtime]") {
    const auto lines = awp::test::pgoutput_stream();
    // lines[0] Begin, [1] Type, [2] Relation, [3] Insert, [4] Commit of the first transaction.
    REQUIRE(lines[0].bytes[0] == 'B');
    REQUIRE(lines[2].bytes[0] == 'R');
    REQUIRE(lines[3].bytes[0] == 'I');
    REQUIRE(lines[4].bytes[0] == 'C');
    SECTION("a change outside a transaction") {
        rt::assembler a;
        a.feed(lines[2].bytes);
        CHECK_THROWS_AS(a.feed(lines[3].bytes), rt::stream_error);
    }
    SECTION("a change of a relation never announced") {
        rt::assembler a;
        a.feed(lines[0].bytes);
        CHECK_THROWS_WITH(a.feed(lines[3].bytes), Catch::Contains("never announced"));
    }
    SECTION("a Begin inside a transaction, a Commit of another") {
        rt::assembler a;
        a.feed(lines[0].bytes);
        CHECK_THROWS_AS(a.feed(lines[0].bytes), rt::stream_error);
        rt::assembler b;
        b.feed(lines[5].bytes);  // the second transaction's Begin
        CHECK_THROWS_AS(b.feed(lines[4].bytes), rt::stream_error);
    }
    SECTION("a row whose column count is not its relation's") {
        rt::assembler a;
        a.feed(lines[0].bytes);
        a.feed(lines[2].bytes);
        // The same insert with its column count lowered by one and the last column cut off.
        auto ins = pgo::decode(lines[3].bytes);
        auto& row = std::get<pgo::insert>(ins).new_row;
        row.pop_back();
        CHECK_THROWS_WITH(a.apply(ins), Catch::Contains("with 10 columns, its relation has 11"));
    }
    SECTION("a binary value (the reader never asks for them)") {
        rt::assembler a;
        a.feed(lines[0].bytes);
        a.feed(lines[2].bytes);
        auto ins = pgo::decode(lines[3].bytes);
        std::get<pgo::insert>(ins).new_row[1].what = pgo::cell::kind::binary;
        CHECK_THROWS_WITH(a.apply(ins), Catch::Contains("binary value in column title"));
    }
}

TEST_CASE("a large transaction is handed on in bounded parts, only the last carries its LSN",
          "[realtime]") {
    const auto lines = awp::test::pgoutput_stream();
    rt::assembler a(4096);
    for (const auto& [oid, name] : kBuiltins) a.set_type_name(oid, name);
    a.feed(lines[0].bytes);
    a.feed(lines[1].bytes);
    a.feed(lines[2].bytes);
    std::vector<rt::transaction> parts;
    std::size_t most_pending = 0;
    for (int i = 0; i < 200; ++i) {
        auto s = a.feed(lines[3].bytes);  // the same real insert, 200 times in one transaction
        most_pending = std::max(most_pending, a.pending_bytes());
        CHECK_FALSE(s.final);
        if (s.out) parts.push_back(std::move(*s.out));
    }
    auto last = a.feed(lines[4].bytes);
    REQUIRE(last.final);
    REQUIRE(last.out);
    CHECK(most_pending < 4096);
    REQUIRE(parts.size() >= 10);
    std::size_t total = last.out->changes.size();
    for (const auto& p : parts) {
        CHECK(p.commit_lsn == 0);
        CHECK_FALSE(p.changes.empty());
        CHECK(p.commit_timestamp == last.out->commit_timestamp);
        for (const auto& c : p.changes) CHECK(c.lsn == 0);
        total += p.changes.size();
    }
    CHECK(total == 200);
    const auto commit = std::get<pgo::commit>(pgo::decode(lines[4].bytes));
    CHECK(last.out->commit_lsn == commit.end_lsn);
    CHECK_FALSE(a.in_transaction());
}

TEST_CASE("commit times and LSNs are written as the client and Postgres write them", "[realtime]") {
    CHECK(rt::format_commit_time(0) == "2000-01-01T00:00:00.000Z");
    CHECK(rt::format_commit_time(849'051'635'758'123) == "2026-11-26T23:40:35.758Z");
    CHECK(rt::format_commit_time(-1) == "1999-12-31T23:59:59.999Z");
    // A damaged time is clamped, never overflows.
    CHECK(rt::format_commit_time(INT64_MIN) == "1900-01-01T00:00:00.000Z");
    CHECK(rt::format_commit_time(INT64_MAX) == "2200-01-01T00:00:00.000Z");
    CHECK(rt::format_lsn(0x16B374D848ULL) == "16/B374D848");
    CHECK(rt::format_lsn(0) == "0/0");
    CHECK(rt::parse_lsn("16/B374D848") == 0x16B374D848ULL);
    CHECK(rt::parse_lsn("0/0") == 0ULL);
    CHECK(rt::parse_lsn("FFFFFFFF/FFFFFFFF") == ~0ULL);
    for (const char* bad : {"", "/", "1/", "/1", "x/1", "1/1/1", "123456789/0", "-1/0", "1 /0"}) {
        INFO(bad);
        CHECK_FALSE(rt::parse_lsn(bad).has_value());
    }
}

TEST_CASE("the replication stream's framing: XLogData, keepalives, status updates", "[realtime]") {
    namespace ws = awp::realtime::walsender;
    auto be64 = [](std::uint64_t v) {
        std::string s;
        for (int shift = 56; shift >= 0; shift -= 8) s.push_back(static_cast<char>(v >> shift));
        return s;
    };
    // parse() hands back views into the bytes it was given: they live as long as the test reads.
    const std::string w_bytes = "w" + be64(0x100) + be64(0x200) + be64(7) + "Bpayload";
    const auto w = ws::parse(w_bytes);
    REQUIRE(std::holds_alternative<ws::xlog_data>(w));
    CHECK(std::get<ws::xlog_data>(w).start == 0x100);
    CHECK(std::get<ws::xlog_data>(w).wal_end == 0x200);
    CHECK(std::get<ws::xlog_data>(w).payload == "Bpayload");
    const std::string k_bytes = "k" + be64(0x300) + be64(9) + std::string(1, '\1');
    const auto k = ws::parse(k_bytes);
    REQUIRE(std::holds_alternative<ws::keepalive>(k));
    CHECK(std::get<ws::keepalive>(k).wal_end == 0x300);
    CHECK(std::get<ws::keepalive>(k).reply_requested);
    CHECK_THROWS_AS(ws::parse("w" + be64(1)), awp::realtime::pgoutput::decode_error);
    CHECK_THROWS_AS(ws::parse("k" + be64(1)), awp::realtime::pgoutput::decode_error);
    CHECK_THROWS_AS(ws::parse("x"), awp::realtime::pgoutput::decode_error);
    CHECK_THROWS_AS(ws::parse(""), awp::realtime::pgoutput::decode_error);
    // 'r', written = flushed = applied = the decided LSN, the clock, the reply flag.
    const auto r = ws::status_update(0x0123456789ABCDEFULL, 5, true);
    CHECK(r == "r" + be64(0x0123456789ABCDEFULL) + be64(0x0123456789ABCDEFULL) +
                   be64(0x0123456789ABCDEFULL) + be64(5) + std::string(1, '\1'));
    CHECK(ws::pg_now() > 849'051'635'758'123 - 400LL * 24 * 3600 * 1'000'000);
}

}  // namespace realtime_pgoutput_test
