// Knowledge: the embedding pipeline (lease, stale-hash refusal, fencing, back-off), the awp_embed
// wake-up, skill versions, and the four search RPCs.
#include <chrono>
#include <thread>

#include "schema_helpers.hpp"

namespace schema_knowledge_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

namespace {

// A 384-dimension vector pointing mostly along axis `hot`, a little along `near`.
std::string vec(int hot, int near = -1, double weight = 0.0) {
    std::string s = "[";
    for (int i = 0; i < 384; ++i) {
        if (i) s += ',';
        s += i == hot ? "1" : (i == near ? std::to_string(weight) : "0");
    }
    return s + "]";
}

std::string chunk(int index, const std::string& content, const std::string& embedding) {
    return "{\"chunk_index\":" + std::to_string(index) + ",\"content\":\"" + content +
           "\",\"char_start\":0,\"char_end\":" + std::to_string(content.size()) +
           ",\"section_path\":[\"Intro\"],\"embedding\":" + embedding + "}";
}

}  // namespace

TEST_CASE("the embedder leases, indexes with chunks, and an edit meanwhile is refused as stale",
          "[schema][knowledge]") {
    scoped_database db;
    auto admin = db.admin();
    auto api = db.api();
    awp::test::as_user(api, kDefaultTenant, "7d1c0a52-0000-4000-8000-000000000001");
    auto listener = db.daemon();
    listener.exec("LISTEN awp_embed");
    auto item = one(api,
                    "INSERT INTO knowledge_items (title, plain_text, tags) VALUES "
                    "('Deploy guide', 'How we deploy the gateway', '{ops}') RETURNING id");
    std::vector<pg::notification> n;
    for (int i = 0; i < 50 && n.empty(); ++i) {
        n = listener.drain_notifications();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE(n.size() == 1);
    CHECK(n[0].payload == item);

    auto d = db.daemon();
    auto lease = d.exec("SELECT * FROM lease_knowledge_items_for_indexing('default', 10, 300)");
    REQUIRE(lease.size() == 1);
    auto hash = lease.get<std::string>(0, "source_hash");
    auto token = lease.get<std::string>(0, "lease_token");
    CHECK(d.exec("SELECT * FROM lease_knowledge_items_for_indexing('default', 10, 300)").empty());

    // The user edits the item while it is being embedded: the old result is refused.
    api.exec(
        "UPDATE knowledge_items SET plain_text = 'How we deploy the gateway, v2' WHERE id = $1",
        {item});
    CHECK(sqlstate_of([&] {
              d.exec(
                  "SELECT * FROM mark_knowledge_item_indexed($1, $2::vector, 'bge-small', 384, $3)",
                  {item, vec(1), hash});
          }) == "AW005");
    CHECK(sqlstate_of([&] {
              d.exec(
                  "SELECT * FROM mark_knowledge_item_indexed($1, $2::vector, 'bge-small', 384, $3, "
                  "NULL, $4)",
                  {item, vec(1),
                   one(d, "SELECT source_hash FROM knowledge_items WHERE id = $1", {item}), token});
          }) == "AW002");
    CHECK(one(d, "SELECT embedding_status FROM knowledge_items WHERE id = $1", {item}) ==
          "pending");

    lease = d.exec(
        "SELECT * FROM lease_knowledge_items_for_indexing('default', 10, 300, NULL, 'embedder-1')");
    REQUIRE(lease.size() == 1);
    hash = lease.get<std::string>(0, "source_hash");
    token = lease.get<std::string>(0, "lease_token");
    auto chunks =
        "[" + chunk(0, "How we deploy", vec(1)) + "," + chunk(1, "the gateway v2", vec(2)) + "]";
    auto r = d.exec(
        "SELECT * FROM mark_knowledge_item_indexed($1, $2::vector, 'bge-small', 384, $3, "
        "$4::jsonb, $5)",
        {item, vec(1), hash, chunks, token});
    CHECK(r.get<std::string>(0, "embedding_status") == "indexed");
    CHECK(r.get<std::string>(0, "chunk_status") == "indexed");
    CHECK(r.get<int>(0, "chunk_count") == 2);
    CHECK(one(d,
              "SELECT embedding_model || '/' || embedding_dimensions || '/' || "
              "(embedding_source_hash = source_hash) "
              "FROM knowledge_items WHERE id = $1",
              {item}) == "bge-small/384/true");
    CHECK(count(d,
                "SELECT count(*) FROM knowledge_chunks WHERE knowledge_item_id = $1 AND embedding "
                "IS NOT NULL "
                "AND chunk_id = id",
                {item}) == 2);
    // indexed is not pending: a second mark is an illegal transition.
    CHECK(sqlstate_of([&] {
              d.exec("SELECT * FROM mark_knowledge_item_failed($1, 'x')", {item});
          }) == "AW001");
    // Bad arguments.
    CHECK(sqlstate_of([&] {
              d.exec("SELECT * FROM mark_knowledge_item_indexed($1, $2::vector, 'm', 512, 'h')",
                     {item, vec(1)});
          }) == "AW004");
    CHECK(sqlstate_of([&] {
              d.exec("SELECT * FROM mark_knowledge_item_failed($1, 'x')",
                     {"5b0f4a1e-0000-4000-8000-000000000001"});
          }) == "AW003");
}

TEST_CASE("embedding failures back off and stop after a bounded number of tries",
          "[schema][knowledge]") {
    scoped_database db;
    auto admin = db.admin();
    auto d = db.daemon();
    auto item = one(admin, "INSERT INTO knowledge_items (title) VALUES ('Broken') RETURNING id");
    for (int attempt = 1; attempt <= 5; ++attempt) {
        auto lease = d.exec("SELECT * FROM lease_knowledge_items_for_indexing(NULL, 10, 300)");
        REQUIRE(lease.size() == 1);
        CHECK(lease.get<int>(0, "attempts") == attempt);
        d.exec("SELECT * FROM mark_knowledge_item_failed($1, 'model not loaded', $2)",
               {item, lease.get<std::string>(0, "lease_token")});
        CHECK(one(d, "SELECT embedding_status FROM knowledge_items WHERE id = $1", {item}) ==
              "failed");
        CHECK(d.exec("SELECT * FROM lease_knowledge_items_for_indexing(NULL, 10, 300)").empty());
        admin.exec("UPDATE knowledge_items SET embedding_not_before = now() - interval '1 second'");
    }
    CHECK(d.exec("SELECT * FROM lease_knowledge_items_for_indexing(NULL, 10, 300)").empty());
    // An edit starts over.
    admin.exec("UPDATE knowledge_items SET title = 'Fixed' WHERE id = $1", {item});
    CHECK(d.exec("SELECT * FROM lease_knowledge_items_for_indexing(NULL, 10, 300)").size() == 1);
}

TEST_CASE("vector and full-text search over items and chunks, with filters",
          "[schema][knowledge]") {
    scoped_database db;
    auto admin = db.admin();
    auto folder = one(admin, "INSERT INTO knowledge_folders (name) VALUES ('Ops') RETURNING id");
    auto add = [&](const std::string& title, const std::string& text, const std::string& kind,
                   const std::string& tags, int axis) {
        auto id = one(
            admin,
            "INSERT INTO knowledge_items (title, plain_text, kind, tags, folder_id) "
            "VALUES ($1, $2, $3, $4::text[], CASE WHEN $3 = 'page' THEN $5::uuid END) RETURNING id",
            {title, text, kind, tags, folder});
        admin.exec(
            "SELECT * FROM mark_knowledge_item_indexed($1, $2::vector, 'test', 384, "
            "(SELECT source_hash FROM knowledge_items WHERE id = $1), $3::jsonb)",
            {id, vec(axis), "[" + chunk(0, text, vec(axis)) + "]"});
        return id;
    };
    auto deploy = add("Deploy guide", "rolling deploys of the gateway", "page", "{ops}", 1);
    auto near = add("Rollback guide", "rolling back a broken release", "page", "{ops}", 2);
    auto skill = add("Write release notes", "summarise merged changes", "skill", "{writing}", 3);
    admin.exec("UPDATE knowledge_items SET embedding = $2::vector WHERE id = $1",
               {near, vec(2, 1, 1.0)});

    auto c = db.api();
    awp::test::as_user(c, kDefaultTenant, "7d1c0a52-0000-4000-8000-000000000001");
    auto r = c.exec("SELECT id, similarity FROM search_knowledge_items($1::vector, 5)", {vec(1)});
    REQUIRE(r.size() == 3);
    CHECK(r.get<std::string>(0, "id") == deploy);
    CHECK(r.get<double>(0, "similarity") == Approx(1.0));
    CHECK(r.get<std::string>(1, "id") == near);
    CHECK(r.get<double>(1, "similarity") == Approx(0.7071).epsilon(0.001));
    CHECK(c.exec("SELECT id FROM search_knowledge_items($1::vector, 5, '{writing}')", {vec(1)})
              .size() == 1);
    CHECK(c.exec("SELECT id FROM search_knowledge_items($1::vector, 5, NULL, NULL, 'skill')",
                 {vec(1)})
              .get<std::string>(0, "id") == skill);
    CHECK(c.exec("SELECT id FROM search_knowledge_items($1::vector, 5, NULL, $2)", {vec(1), folder})
              .size() == 2);
    CHECK(sqlstate_of([&] {
              c.exec("SELECT * FROM search_knowledge_items($1::vector, 5, NULL, NULL, 'video')",
                     {vec(1)});
          }) == "AW004");

    auto t = c.exec("SELECT id, similarity FROM search_knowledge_items_text('deploy gateway', 10)");
    REQUIRE(t.size() == 1);
    CHECK(t.get<std::string>(0, "id") == deploy);
    CHECK(t.get<double>(0, "similarity") > 0);
    CHECK(c.exec("SELECT id FROM search_knowledge_items_text('', 10)").size() == 3);

    auto ch = c.exec("SELECT * FROM search_knowledge_chunks($1::vector, 2)", {vec(3)});
    REQUIRE(ch.size() == 2);
    CHECK(ch.get<std::string>(0, "knowledge_item_id") == skill);
    CHECK(ch.get<std::string>(0, "section_path") == "{Intro}");
    CHECK(
        c.exec("SELECT * FROM search_knowledge_chunks($1::vector, 5, NULL, NULL, 'page')", {vec(3)})
            .size() == 2);
    CHECK(c.exec("SELECT * FROM search_knowledge_chunks($1::vector, 5, NULL, NULL, NULL, $2)",
                 {vec(3), deploy})
              .size() == 1);
    auto ct = c.exec("SELECT * FROM search_knowledge_chunks_text('release')");
    CHECK(ct.size() == 1);
}

TEST_CASE("every saved change of a skill is a version with its reason", "[schema][knowledge]") {
    scoped_database db;
    auto d = db.daemon();
    d.exec("BEGIN");
    d.exec(
        "SELECT set_config('awp.change_reason', 'first draft', true), set_config('awp.changed_by', "
        "'agent:alice', true)");
    auto id = one(d,
                  "INSERT INTO knowledge_items (kind, title, plain_text) VALUES ('skill', "
                  "'Triage', 'v1') RETURNING id");
    d.exec("COMMIT");
    d.exec("UPDATE knowledge_items SET pinned = true WHERE id = $1", {id});
    d.exec("BEGIN");
    d.exec("SELECT set_config('awp.change_reason', 'clearer steps', true)");
    d.exec("UPDATE knowledge_items SET plain_text = 'v2' WHERE id = $1", {id});
    d.exec("COMMIT");
    auto v = d.exec(
        "SELECT version, plain_text, reason, changed_by FROM knowledge_item_versions "
        "WHERE knowledge_item_id = $1 ORDER BY version",
        {id});
    REQUIRE(v.size() == 2);
    CHECK(v.get<std::string>(0, "reason") == "first draft");
    CHECK(v.get<std::string>(0, "changed_by") == "agent:alice");
    CHECK(v.get<int>(1, "version") == 2);
    CHECK(v.get<std::string>(1, "plain_text") == "v2");
    CHECK(v.get<std::string>(1, "reason") == "clearer steps");
}

}  // namespace schema_knowledge_test
