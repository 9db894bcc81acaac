// awp-embedder as a real process against a real database: items are indexed and searchable,
// edits never leave a stale vector, failures back off and stop, HTTP errors, kill -9 mid-batch,
// Postgres restart.
#include <signal.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "awp/http/client.hpp"
#include "support/child.hpp"
#include "support/private_cluster.hpp"
#include "support/test_db.hpp"

namespace embedder_test {

using awp::test::child;
namespace pg = awp::core::pg;
namespace http = awp::http;
using namespace std::chrono_literals;

namespace {

const std::string kEmbedder = std::string(AWP_BIN_DIR) + "/awp-embedder";

struct daemon_proc {
    std::unique_ptr<child> proc;
    int port = 0;
    std::string url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(port) + path;
    }
};

daemon_proc start_embedder(const std::string& dsn, std::vector<std::string> args = {},
                           std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv{kEmbedder, "--port", "0", "--safety-poll", "0.5"};
    argv.insert(argv.end(), args.begin(), args.end());
    env["DATABASE_URL"] = dsn;
    env.emplace("EMBEDDING_MODEL_DIR", "");
    daemon_proc d;
    d.proc = std::make_unique<child>(argv, env);
    REQUIRE(d.proc->wait_for_log("\"msg\":\"http listening\"", 10s));
    std::smatch m;
    const std::string log = d.proc->log();
    REQUIRE(std::regex_search(log, m, std::regex("\"msg\":\"http listening\".*?\"port\":(\\d+)")));
    d.port = std::stoi(m[1].str());
    return d;
}

bool wait_until(const std::function<bool()>& f, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (f()) return true;
        std::this_thread::sleep_for(50ms);
    }
    return f();
}

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    if (r.empty() || r.is_null(0, 0)) return {};
    return std::string(r.text(0, 0));
}

long count(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    return std::stol(one(c, sql, p));
}

http::response post_embed(const daemon_proc& d, const std::string& body,
                          const std::string& content_type = "application/json",
                          const std::string& token = {}) {
    http::client_request r;
    r.method = "POST";
    r.url = d.url("/embed");
    r.body = body;
    if (!content_type.empty()) r.header.set("Content-Type", content_type);
    if (!token.empty()) r.header.set("Authorization", "Bearer " + token);
    return http::fetch_sync(r);
}

// The "embedding" array of an /embed answer, as pgvector text.
std::string embedding_of(const http::response& r) {
    const auto b = r.body.find("\"embedding\":");
    REQUIRE(b != std::string::npos);
    const auto s = r.body.find('[', b);
    const auto e = r.body.find(']', s);
    return r.body.substr(s, e - s + 1);
}

std::string embed_text(const daemon_proc& d, const std::string& text) {
    auto r = post_embed(d, "{\"input\":" + http::json_quote(text) + "}");
    REQUIRE(r.status == 200);
    return embedding_of(r);
}

std::string insert_item(pg::connection& c, const std::string& title, const std::string& plain,
                        const std::string& tags = "{}", const std::string& kind = "page") {
    return one(c,
               "INSERT INTO knowledge_items (title, plain_text, tags, kind) "
               "VALUES ($1, NULLIF($2, ''), $3::text[], $4) RETURNING id",
               {title, plain, tags, kind});
}

bool indexed(pg::connection& c, const std::string& id) {
    return one(c, "SELECT embedding_status FROM knowledge_items WHERE id = $1", {id}) == "indexed";
}

}  // namespace

TEST_CASE("items inserted through SQL are indexed and found by the four searches", "[embedder]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const std::string folder =
        one(admin, "INSERT INTO knowledge_folders (name) VALUES ('Ops') RETURNING id");
    // As a gateway host runs it: the default gateway's own login (its tenant's knowledge).
    auto d = start_embedder(db.gateway_dsn("default"));
    REQUIRE(d.proc->wait_for_log("\"msg\":\"ready\"", 10s));

    std::string long_text = "# Password reset\n\n";
    for (int i = 0; i < 120; ++i) {
        long_text += "To reset a forgotten password open the account page and follow step " +
                     std::to_string(i) + ". ";
        if (i % 10 == 9) long_text += "\n\n";
    }
    long_text += "\n\n## Billing\n\nInvoices are sent monthly by email to the billing contact.";
    const std::string pw = insert_item(admin, "Password reset guide", long_text, "{ops,auth}");
    admin.exec("UPDATE knowledge_items SET folder_id = $1 WHERE id = $2", {folder, pw});
    const std::string rich =
        one(admin,
            "INSERT INTO knowledge_items (title, kind, content) VALUES ('Deploy runbook', 'skill', "
            "$1::jsonb) RETURNING id",
            {R"({"type":"doc","content":[{"type":"heading","attrs":{"level":1},"content":[)"
             R"({"type":"text","text":"Kubernetes deploy"}]},{"type":"paragraph","content":[)"
             R"({"type":"text","text":"Roll out the helm chart with canary pods."}]}]})"});
    const std::string other = insert_item(admin, "Lunch menu", "Pasta on Monday, fish on Friday.");

    if (!wait_until(
            [&] { return indexed(admin, pw) && indexed(admin, rich) && indexed(admin, other); },
            20s)) {
        FAIL(d.proc->log());
    }
    // Vectors name their model, dimensions and the hash of the source they were made from.
    auto r = admin.exec(
        "SELECT embedding_model, embedding_dimensions, embedding_source_hash = source_hash, "
        "chunk_status, chunk_count, chunk_source_hash = source_hash, processing_status, "
        "embedding_attempts FROM knowledge_items WHERE id = $1",
        {pw});
    CHECK(r.get<std::string>(0, 0) == "awp-hash-384-v1");
    CHECK(r.get<int>(0, 1) == 384);
    CHECK(r.get<bool>(0, 2));
    CHECK(r.get<std::string>(0, 3) == "indexed");
    CHECK(r.get<int>(0, 4) >= 3);
    CHECK(r.get<bool>(0, 5));
    CHECK(r.get<std::string>(0, 6) == "ready");
    CHECK(r.get<int>(0, 7) == 0);
    // Chunk offsets cut plain_text exactly; every chunk has a vector; headings give sections.
    CHECK(count(admin,
                "SELECT count(*) FROM knowledge_chunks c JOIN knowledge_items k ON "
                "k.id = c.knowledge_item_id WHERE k.id = $1 AND (c.content <> substr(k.plain_text, "
                "c.char_start + 1, c.char_end - c.char_start) OR c.embedding IS NULL OR "
                "c.embedding_model <> 'awp-hash-384-v1')",
                {pw}) == 0);
    CHECK(one(admin,
              "SELECT section_path::text FROM knowledge_chunks WHERE knowledge_item_id = $1 "
              "AND chunk_index = 0",
              {pw}) == "{\"Password reset\"}");
    CHECK(one(admin,
              "SELECT section_path::text FROM knowledge_chunks WHERE knowledge_item_id = $1 "
              "AND chunk_index = 0",
              {rich}) == "{\"Kubernetes deploy\"}");

    const std::string q = embed_text(d, "how do I reset my password");
    CHECK(one(admin, "SELECT id FROM search_knowledge_items($1::vector, 3)", {q}) == pw);
    CHECK(count(admin, "SELECT count(*) FROM search_knowledge_items($1::vector, 5, '{auth}')",
                {q}) == 1);
    CHECK(count(admin, "SELECT count(*) FROM search_knowledge_items($1::vector, 5, NULL, $2::uuid)",
                {q, folder}) == 1);
    CHECK(one(admin, "SELECT id FROM search_knowledge_items($1::vector, 5, NULL, NULL, 'skill')",
              {q}) == rich);
    CHECK(one(admin, "SELECT id FROM search_knowledge_items_text('password reset', 5)") == pw);
    CHECK(one(admin, "SELECT knowledge_item_id FROM search_knowledge_chunks($1::vector, 1)", {q}) ==
          pw);
    const std::string qk = embed_text(d, "helm canary deploy");
    CHECK(one(admin,
              "SELECT knowledge_item_id FROM search_knowledge_chunks($1::vector, 5, NULL, NULL, "
              "'skill')",
              {qk}) == rich);
    CHECK(count(admin,
                "SELECT count(*) FROM search_knowledge_chunks($1::vector, 50, NULL, NULL, NULL, "
                "$2::uuid) WHERE knowledge_item_id <> $2::uuid",
                {qk, other}) == 0);
    CHECK(one(admin, "SELECT knowledge_item_id FROM search_knowledge_chunks_text('invoices', 5)") ==
          pw);
    d.proc->signal(SIGTERM);
    CHECK(d.proc->wait(10s) == 0);
}

TEST_CASE("an edited item re-indexes and a stale vector is never stored", "[embedder]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    // Each inference call takes 1.5 s, so the edit lands while the old text is being embedded.
    auto d = start_embedder(db.daemon_dsn(), {"--inference-delay-ms", "1500"});
    REQUIRE(d.proc->wait_for_log("\"msg\":\"ready\"", 10s));
    const std::string id = insert_item(admin, "Router setup", "Old instructions about modems.");
    REQUIRE(wait_until(
        [&] {
            return !one(admin, "SELECT embedding_lease_token FROM knowledge_items WHERE id = $1",
                        {id})
                        .empty();
        },
        10s));
    admin.exec(
        "UPDATE knowledge_items SET plain_text = 'New guide: configure the wifi mesh.' "
        "WHERE id = $1",
        {id});
    REQUIRE(wait_until([&] { return indexed(admin, id); }, 20s));
    CHECK(d.proc->log().find("item changed while being indexed") != std::string::npos);
    CHECK(one(admin,
              "SELECT embedding_source_hash = source_hash FROM knowledge_items WHERE id = $1",
              {id}) == "t");
    CHECK(one(admin,
              "SELECT string_agg(content, ' ') FROM knowledge_chunks WHERE "
              "knowledge_item_id = $1",
              {id}) == "New guide: configure the wifi mesh.");
    // The stored vector is the new text's, not the old one's.
    const std::string fresh = embed_text(d, "Router setup\n\nNew guide: configure the wifi mesh.");
    const std::string old = embed_text(d, "Router setup\n\nOld instructions about modems.");
    CHECK(std::stod(one(admin,
                        "SELECT 1 - (embedding <=> $1::vector) FROM knowledge_items WHERE id = $2",
                        {fresh, id})) > 0.9999);
    CHECK(std::stod(one(admin,
                        "SELECT 1 - (embedding <=> $1::vector) FROM knowledge_items WHERE id = $2",
                        {old, id})) < 0.99);
}

TEST_CASE("a failing item backs off, stops after its attempts and blocks nothing", "[embedder]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    // A storage failure the daemon cannot avoid: every write of this item's chunks is refused.
    admin.exec_script(R"(
      CREATE FUNCTION public.test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.content LIKE '%POISON%' THEN RAISE EXCEPTION 'test: poisoned chunk refused'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER test_poison BEFORE INSERT ON public.knowledge_chunks
        FOR EACH ROW EXECUTE FUNCTION public.test_poison();)");
    auto d = start_embedder(db.daemon_dsn());
    REQUIRE(d.proc->wait_for_log("\"msg\":\"ready\"", 10s));
    const std::string bad = insert_item(admin, "Bad", "This text is POISON for the store.");
    const std::string good = insert_item(admin, "Good", "Perfectly fine text.");
    REQUIRE(wait_until([&] { return indexed(admin, good); }, 10s));
    for (int attempt = 1; attempt <= 5; ++attempt) {
        INFO("attempt " << attempt);
        REQUIRE(wait_until(
            [&] {
                return one(admin,
                           "SELECT embedding_status || ':' || embedding_attempts FROM "
                           "knowledge_items WHERE id = $1",
                           {bad}) == "failed:" + std::to_string(attempt);
            },
            10s));
        CHECK(one(admin, "SELECT embedding_error FROM knowledge_items WHERE id = $1", {bad})
                  .find("poisoned chunk refused") != std::string::npos);
        if (attempt == 1) {
            CHECK(one(admin,
                      "SELECT embedding_not_before > now() + interval '50 seconds' FROM "
                      "knowledge_items WHERE id = $1",
                      {bad}) == "t");
        }
        // No tight loop: nothing happens to it during its back-off (safety poll is 0.5 s).
        std::this_thread::sleep_for(1500ms);
        CHECK(one(admin, "SELECT embedding_attempts FROM knowledge_items WHERE id = $1", {bad}) ==
              std::to_string(attempt));
        // Fast-forward the back-off.
        admin.exec(
            "UPDATE knowledge_items SET embedding_not_before = now() - interval '1 second' "
            "WHERE id = $1",
            {bad});
    }
    std::this_thread::sleep_for(2s);
    CHECK(one(admin,
              "SELECT embedding_status || ':' || embedding_attempts FROM knowledge_items "
              "WHERE id = $1",
              {bad}) == "failed:5");
    CHECK(count(admin, "SELECT count(*) FROM knowledge_chunks WHERE knowledge_item_id = $1",
                {bad}) == 0);
    // An edit makes it a new item: attempts reset, indexed once the text is fine.
    admin.exec("UPDATE knowledge_items SET plain_text = 'Clean now.' WHERE id = $1", {bad});
    REQUIRE(wait_until([&] { return indexed(admin, bad); }, 10s));
}

TEST_CASE("POST /embed and GET /healthz answer with JSON, errors included", "[embedder]") {
    auto d = start_embedder("postgresql://nobody@127.0.0.1:1/none",
                            {"--indexing", "false", "--max-body", "2048"},
                            {{"EMBEDDER_TOKEN", "s3cret-token"}});
    REQUIRE(d.proc->wait_for_log("\"msg\":\"ready\"", 10s));
    CHECK(d.proc->log().find("s3cret-token") == std::string::npos);

    auto ok = post_embed(d, R"({"input":"hello world"})", "application/json", "s3cret-token");
    REQUIRE(ok.status == 200);
    CHECK(ok.body.find("\"model\":\"awp-hash-384-v1\"") != std::string::npos);
    CHECK(ok.body.find("\"dimensions\":384") != std::string::npos);
    CHECK(ok.body.find("\"truncated\":false") != std::string::npos);
    const auto vec = embedding_of(ok);
    CHECK(std::count(vec.begin(), vec.end(), ',') == 383);

    const auto code_of = [](const http::response& r) {
        const auto p = r.body.find("\"code\":\"");
        if (p == std::string::npos) return std::string();
        return r.body.substr(p + 8, r.body.find('"', p + 8) - p - 8);
    };
    auto r = post_embed(d, R"({"input":"x"})");
    CHECK(r.status == 401);
    CHECK(code_of(r) == "unauthorized");
    r = post_embed(d, R"({"input":"x"})", "application/json", "wrong-token");
    CHECK(r.status == 401);
    r = post_embed(d, R"({"input":"x"})", "text/plain", "s3cret-token");
    CHECK(r.status == 415);
    CHECK(code_of(r) == "unsupported_media_type");
    r = post_embed(d, R"({"input":)", "application/json", "s3cret-token");
    CHECK(r.status == 400);
    CHECK(code_of(r) == "invalid_json");
    r = post_embed(d, R"({"input":"   "})", "application/json", "s3cret-token");
    CHECK(r.status == 400);
    CHECK(code_of(r) == "input_required");
    r = post_embed(d, R"({"text":"x"})", "application/json", "s3cret-token");
    CHECK(r.status == 400);
    CHECK(code_of(r) == "invalid_request");
    r = post_embed(d, "{\"input\":\"" + std::string(4000, 'a') + "\"}", "application/json",
                   "s3cret-token");
    CHECK(r.status == 413);
    CHECK(r.body.find("\"error\"") != std::string::npos);
    std::string words;
    for (int i = 0; i < 300; ++i) words += "w ";
    r = post_embed(d, "{\"input\":\"" + words + "\"}", "application/json", "s3cret-token");
    CHECK(r.status == 200);

    http::client_request g;
    g.url = d.url("/healthz");
    auto h = http::fetch_sync(g);
    CHECK(h.status == 200);
    CHECK(h.body.find("\"status\":\"degraded\"") != std::string::npos);
    CHECK(h.body.find("\"model_status\":\"fallback\"") != std::string::npos);
    CHECK(h.body.find("\"dimensions\":384") != std::string::npos);
    g.url = d.url("/embed");
    CHECK(http::fetch_sync(g).status == 405);
    g.url = d.url("/nope");
    CHECK(http::fetch_sync(g).status == 404);
    d.proc->signal(SIGTERM);
    CHECK(d.proc->wait(10s) == 0);
}

TEST_CASE("over-long input is truncated to the model's maximum and says so", "[embedder]") {
    auto d = start_embedder("postgresql://nobody@127.0.0.1:1/none",
                            {"--indexing", "false", "--max-body", "1000000"});
    std::string words;
    for (int i = 0; i < 9000; ++i) words += "word" + std::to_string(i % 50) + " ";
    auto r = post_embed(d, "{\"input\":\"" + words + "\"}");
    REQUIRE(r.status == 200);
    CHECK(r.body.find("\"truncated\":true") != std::string::npos);
}

TEST_CASE("bad configuration exits 78", "[embedder]") {
    child a({kEmbedder, "--chunk-chars", "1000", "--chunk-overlap", "600"});
    CHECK(a.wait(10s) == 78);
    child b({kEmbedder, "--model-dir", "/nonexistent/model"});
    CHECK(b.wait(10s) == 78);
    child c({kEmbedder, "--port", "0", "--bind", "256.1.1.1"},
            {{"DATABASE_URL", "postgresql:///x"}});
    CHECK(c.wait(10s) == 78);
}

TEST_CASE("kill -9 mid-batch: the items are leased again after the lease and indexed once",
          "[embedder]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    admin.exec_script(R"(
      CREATE TABLE public.test_index_audit (item_id uuid, at timestamptz DEFAULT clock_timestamp());
      CREATE FUNCTION public.test_audit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
      BEGIN
        INSERT INTO public.test_index_audit (item_id) VALUES (NEW.id);
        RETURN NULL;
      END $$;
      CREATE TRIGGER test_audit AFTER UPDATE ON public.knowledge_items FOR EACH ROW
        WHEN (NEW.embedding_status = 'indexed' AND OLD.embedding_status <> 'indexed')
        EXECUTE FUNCTION public.test_audit();)");
    std::vector<std::string> ids;
    for (int i = 0; i < 12; ++i) {
        ids.push_back(
            insert_item(admin, "Item " + std::to_string(i), "Body of item " + std::to_string(i)));
    }
    auto first = start_embedder(db.daemon_dsn(), {"--batch-size", "6", "--lease-seconds", "4",
                                                  "--inference-delay-ms", "400"});
    REQUIRE(wait_until([&] { return count(admin, "SELECT count(*) FROM test_index_audit") >= 2; },
                       15s));
    first.proc->signal(SIGKILL);
    REQUIRE(first.proc->wait(5s).has_value());
    // What the dead daemon still held.
    auto held = admin.exec(
        "SELECT id::text, embedding_lease_expires_at::text FROM knowledge_items "
        "WHERE embedding_lease_token IS NOT NULL AND embedding_status = 'pending'");
    REQUIRE(held.size() >= 1);

    auto second = start_embedder(db.daemon_dsn());
    REQUIRE(wait_until(
        [&] {
            return count(
                       admin,
                       "SELECT count(*) FROM knowledge_items WHERE embedding_status = 'indexed'") ==
                   12;
        },
        30s));
    for (int i = 0; i < held.size(); ++i) {
        INFO("held item " << held.get<std::string>(i, 0));
        CHECK(one(admin,
                  "SELECT bool_and(a.at >= $2::timestamptz) FROM test_index_audit a WHERE "
                  "a.item_id = $1::uuid",
                  {held.get<std::string>(i, 0), held.get<std::string>(i, 1)}) == "t");
    }
    CHECK(count(admin, "SELECT count(*) FROM test_index_audit") == 12);
    CHECK(count(admin, "SELECT count(DISTINCT item_id) FROM test_index_audit") == 12);
    CHECK(count(admin, "SELECT count(*) FROM knowledge_chunks") == 12);
}

TEST_CASE("the embedder survives a Postgres restart", "[embedder]") {
    awp::test::private_cluster pgc(true);
    auto d = start_embedder(pgc.dsn());
    REQUIRE(d.proc->wait_for_log("\"msg\":\"ready\"", 15s));
    std::string a;
    {
        auto c = pg::connection::connect(pgc.dsn());
        a = insert_item(c, "Before restart", "Indexed before the restart.");
        REQUIRE(wait_until([&] { return indexed(c, a); }, 15s));
    }
    pgc.restart();
    // /embed does not need the database.
    CHECK(post_embed(d, R"({"input":"still here"})").status == 200);
    auto c = pg::connection::connect(pgc.dsn());
    const std::string b = insert_item(c, "After restart", "Indexed after the restart.");
    CHECK(wait_until([&] { return indexed(c, b); }, 30s));
    CHECK(d.proc->running());
    d.proc->signal(SIGTERM);
    CHECK(d.proc->wait(10s) == 0);
}

TEST_CASE("hostile knowledge items and /embed bodies never stop the embedder", "[embedder]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    auto d = start_embedder(db.daemon_dsn());
    REQUIRE(d.proc->wait_for_log("\"msg\":\"ready\"", 10s));
    std::string big;
    for (int i = 0; i < 200000; ++i) big += "word" + std::to_string(i % 97) + " ";  // ~1.3 MB
    std::string combining = "a";
    for (int i = 0; i < 100000; ++i) combining += "\xcc\x81";  // one letter, 100k accents
    const std::vector<std::string> texts{
        big,
        combining,
        std::string(300000, '['),
        "\x01\x02\x1b[31m\x7f control \t\r\n",
        "\xf0\x9f\x98\x80\xe2\x80\x8b\xef\xbb\xbf emoji, zero-width, BOM",
        std::string(50000, ' '),
        "\\u0000 \\ud800 not escapes in plain text",
    };
    std::vector<std::string> ids;
    for (const auto& t : texts) ids.push_back(insert_item(admin, "hostile", t));
    for (const auto& id : ids) {
        INFO(id);
        CHECK(wait_until(
            [&] {
                const auto st =
                    one(admin, "SELECT embedding_status FROM knowledge_items WHERE id = $1", {id});
                return st == "indexed" || st == "failed";
            },
            60s));
    }
    // The HTTP face: bodies that are not what /embed takes get a 4xx with a JSON error.
    std::string deep(100000, '[');
    for (const std::string& body : std::vector<std::string>{
             deep, "{\"input\":", "\xff\xfe", R"({"input":"\ud800"})", R"({"input":[1,{},null]})",
             R"({"input":123})", "null", "[]", R"({"input":"a","input":"b"})"}) {
        INFO(body.substr(0, 30));
        auto r = post_embed(d, body);
        CHECK(r.status < 500);
        if (r.status >= 400) CHECK(r.body.find("\"error\"") != std::string::npos);
    }
    CHECK(d.proc->running());
    // Still serving: a plain item is indexed, /healthz answers.
    const auto plain = insert_item(admin, "Plain", "An ordinary note about routers.");
    CHECK(wait_until([&] { return indexed(admin, plain); }, 20s));
    http::client_request h;
    h.method = "GET";
    h.url = d.url("/healthz");
    CHECK(http::fetch_sync(h).status == 200);
}

}  // namespace embedder_test
