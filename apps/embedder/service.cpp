// The embedder's indexing loop (lease -> extract -> chunk -> embed off the io thread -> mark) and
// its HTTP endpoints.
#include "service.hpp"

#include <charconv>
#include <chrono>
#include <thread>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/channels.hpp"
#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/gateway.hpp"
#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "text.hpp"

namespace awp::embedder {

namespace log = core::log;
namespace pg = core::pg;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr const char* kLeaseSql = R"(
SELECT l.id::text, l.kind, l.title, l.content::text, l.plain_text, l.tags::text, l.source_hash,
       l.lease_token::text, l.attempts
  FROM public.lease_knowledge_items_for_indexing($1, $2::integer, $3::integer, NULL, $4) l)";

constexpr const char* kMarkIndexedSql = R"(
SELECT m.embedding_status, m.chunk_status, m.chunk_count
  FROM public.mark_knowledge_item_indexed($1::uuid, $2::vector, $3, $4::integer, $5, $6::jsonb,
                                          $7::uuid) m)";

constexpr const char* kMarkFailedSql = R"(
SELECT m.embedding_status FROM public.mark_knowledge_item_failed($1::uuid, $2, $3::uuid, $4) m)";

constexpr int kDimensions = 384;

long ms_since(clock_type::time_point t) {
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t).count());
}

void append_float(std::string& out, float f) {
    char buf[32];
    auto [p, ec] = std::to_chars(buf, buf + sizeof buf, f);
    if (ec != std::errc()) {
        out += '0';
        return;
    }
    out.append(buf, p);
}

// pgvector's text form, which is also a JSON array: "[0.1,-0.2,...]".
std::string vector_literal(const std::vector<float>& v) {
    std::string out;
    out.reserve(v.size() * 12 + 2);
    out += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += ',';
        append_float(out, v[i]);
    }
    out += ']';
    return out;
}

bool finite(const std::vector<float>& v) {
    for (float f : v) {
        if (!std::isfinite(f)) return false;
    }
    return true;
}

// What a chunk's vector is made from: the item's title and section give it context; the stored
// content stays the exact slice of the body.
std::string chunk_embedding_text(const std::string& title, const chunk& c) {
    std::string s = title;
    if (!c.section_path.empty()) {
        s += "\n";
        for (std::size_t i = 0; i < c.section_path.size(); ++i) {
            if (i) s += " > ";
            s += c.section_path[i];
        }
    }
    s += "\n\n";
    s += c.content;
    return s;
}

std::string chunks_json(const chunking& ch, const std::vector<embed::embedding_result>& vecs) {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    w.StartArray();
    for (std::size_t i = 0; i < ch.chunks.size(); ++i) {
        const auto& c = ch.chunks[i];
        w.StartObject();
        w.Key("chunk_index");
        w.Int(c.index);
        w.Key("content");
        w.String(c.content.data(), static_cast<rapidjson::SizeType>(c.content.size()));
        w.Key("content_hash");
        const auto hash = core::crypto::sha256_hex(c.content);
        w.String(hash.data(), static_cast<rapidjson::SizeType>(hash.size()));
        w.Key("char_start");
        w.Uint64(c.char_start);
        w.Key("char_end");
        w.Uint64(c.char_end);
        if (c.page_number) {
            w.Key("page_number");
            w.Int(*c.page_number);
        }
        if (!c.section_path.empty()) {
            w.Key("section_path");
            w.StartArray();
            for (const auto& s : c.section_path) {
                w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
            }
            w.EndArray();
        }
        w.Key("meta");
        w.StartObject();
        w.Key("chunk_count");
        w.Uint64(ch.chunks.size());
        w.Key("token_count");
        w.Int(vecs[i].token_count);
        if (vecs[i].truncated) {
            w.Key("embedding_truncated");
            w.Bool(true);
        }
        if (ch.truncated && i + 1 == ch.chunks.size()) {
            // Nothing is dropped silently: the last chunk says where indexing stopped.
            w.Key("body_truncated_at");
            w.Uint64(ch.covered_until);
            w.Key("body_chars");
            w.Uint64(ch.length);
        }
        w.EndObject();
        w.Key("embedding");
        const auto lit = vector_literal(vecs[i].vector);
        w.RawValue(lit.data(), lit.size(), rapidjson::kArrayType);
        w.EndObject();
    }
    w.EndArray();
    return {buf.GetString(), buf.GetSize()};
}

std::string what(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        return ex.what();
    } catch (...) {
        return "unknown exception";
    }
}

bool is_stale(const pg::sql_error& e) {
    return dynamic_cast<const pg::stale_source_hash*>(&e) ||
           dynamic_cast<const pg::lease_lost*>(&e) ||
           dynamic_cast<const pg::illegal_transition*>(&e);
}

}  // namespace

service::service(net::io_context& ioc, config cfg, std::shared_ptr<embed::embedder> model)
    : ioc_(ioc),
      cfg_(std::move(cfg)),
      model_(std::move(model)),
      pool_(2),
      db_(cfg_.common.database_url, "index"),
      instance_(cfg_.common.instance.empty() ? core::daemon::default_instance("embedder")
                                             : cfg_.common.instance),
      wake_(ioc.get_executor()),
      indexing_done_(ioc.get_executor()),
      listener_done_(ioc.get_executor()),
      server_done_(ioc.get_executor()) {
    if (model_->dimensions() != kDimensions) {
        throw core::config_error("the model makes " + std::to_string(model_->dimensions()) +
                                 "-dimensional vectors; knowledge embeddings have 384");
    }
    http::router r;
    http::route_options small;
    small.body_limit = 0;
    http::route_options body;
    body.body_limit = static_cast<std::size_t>(cfg_.max_body);
    r.add(
        "POST", "/embed", [this](http::request req) { return embed_handler(std::move(req)); },
        body);
    r.add(
        "GET", "/healthz", [this](http::request req) { return healthz_handler(std::move(req)); },
        small);
    http::server_options o;
    o.bind = cfg_.bind;
    o.port = static_cast<unsigned short>(cfg_.port);
    o.name = "awp-embedder";
    server_ = std::make_unique<http::server>(ioc_, std::move(r), o);
}

service::~service() {
    pool_.stop();
    pool_.join();
}

void service::listen() { server_->listen(); }
unsigned short service::port() const { return server_->port(); }

void service::request_stop() {
    stopping_ = true;
    if (listener_) listener_->stop();
    server_->stop();
    wake_.set();
}

net::awaitable<void> service::sleep_for(std::chrono::milliseconds d) {
    net::steady_timer t(ioc_, d);
    boost::system::error_code ec;
    co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
}

// Runs embed_batch on the pool; the result (or the exception, as a value) comes back to the
// calling coroutine's executor, where the awaitable rethrows it. Deliberately not a coroutine:
// GCC 12 destroyed a shared_ptr local twice when a coroutine frame held the captured state.
net::awaitable<std::vector<embed::embedding_result>> service::infer(
    std::vector<std::string> texts) {
    using result_type = std::vector<embed::embedding_result>;
    return net::async_initiate<const net::use_awaitable_t<>&,
                               void(std::exception_ptr, result_type)>(
        [pool_ex = pool_.get_executor(), model = model_, delay = cfg_.inference_delay()](
            auto handler, std::vector<std::string> t) {
            net::post(pool_ex, [model, delay, t = std::move(t), h = std::move(handler)]() mutable {
                std::exception_ptr failure;
                result_type out;
                try {
                    if (delay.count() > 0) std::this_thread::sleep_for(delay);
                    out = model->embed_batch(t);
                    if (out.size() != t.size()) {
                        throw core::error("the model returned " + std::to_string(out.size()) +
                                          " vectors for " + std::to_string(t.size()) + " texts");
                    }
                } catch (...) {
                    failure = std::current_exception();
                }
                auto ex = net::get_associated_executor(h);
                net::post(ex, [h = std::move(h), failure, out = std::move(out)]() mutable {
                    std::move(h)(failure, std::move(out));
                });
            });
        },
        net::use_awaitable, std::move(texts));
}

net::awaitable<void> service::run() {
    auto ex = co_await net::this_coro::executor;
    log::info("starting", {{"model", model_->model_name()},
                           {"fallback", model_->is_fallback()},
                           {"dimensions", model_->dimensions()},
                           {"max_tokens", model_->max_tokens()},
                           {"indexing", cfg_.indexing},
                           {"gateway", cfg_.gateway},
                           {"batch_size", cfg_.batch_size},
                           {"lease_seconds", cfg_.lease_seconds},
                           {"auth", !cfg_.token.empty()}});
    if (model_->is_fallback()) {
        log::warn(
            "no model folder (EMBEDDING_MODEL_DIR): vectors come from the lexical fallback "
            "awp-hash-384-v1, which matches words, not meaning; set EMBEDDING_MODEL_DIR to "
            "a bge-small-en-v1.5 or all-MiniLM-L6-v2 folder",
            {{"model", model_->model_name()}});
    }
    log::info("http listening", {{"bind", cfg_.bind}, {"port", static_cast<int>(port())}});
    net::co_spawn(ex, server_->run(), [this](std::exception_ptr e) {
        if (e) log::error("http server ended with an error", {{"error", what(e)}});
        server_done_.set();
    });

    if (cfg_.indexing) {
        core::listener_options lo;
        lo.dsn = cfg_.common.database_url;
        lo.channels = {std::string(core::channels::kEmbed)};
        lo.safety_poll = cfg_.common.safety_poll();
        lo.name = "embed";
        listener_ = std::make_unique<core::listener>(
            lo, [this](const pg::notification&) { wake_.set(); },
            [this](core::rescan_reason) {
                db_ok_ = true;
                if (!ready_) {
                    ready_ = true;
                    core::daemon::notify_ready();
                    log::info("ready", {{"port", static_cast<int>(port())}});
                }
                wake_.set();
            });
        net::co_spawn(ex, listener_->run(), [this](std::exception_ptr e) {
            // The core listener ends with "multiple exceptions" when stopped mid-wait.
            if (e && !stopping_) log::error("listener ended with an error", {{"error", what(e)}});
            listener_done_.set();
        });
        if (stopping_) listener_->stop();
        co_await indexing_loop();
        listener_->stop();
        co_await listener_done_.wait();
    } else {
        ready_ = true;
        core::daemon::notify_ready();
        log::info("ready", {{"port", static_cast<int>(port())}});
        while (!stopping_) co_await wake_.wait();
    }
    server_->stop();
    co_await server_done_.wait();
    log::info("stopped", {{"indexed", stats_.indexed},
                          {"failed", stats_.failed},
                          {"stale", stats_.stale},
                          {"embed_requests", stats_.embed_requests}});
}

net::awaitable<void> service::indexing_loop() {
    pg::backoff backoff(500ms, 10s);
    while (!stopping_) {
        if (!ready_) {
            co_await wake_.wait();
            continue;
        }
        const int n = co_await index_batch();
        if (stopping_) break;
        if (n < 0) {
            co_await sleep_for(backoff.next());
            continue;
        }
        backoff.reset();
        if (n == 0) co_await wake_.wait();
    }
}

net::awaitable<int> service::index_batch() {
    pg::result r;
    std::string failure;
    try {
        // GATEWAY_ID resolved once, then its id passed: which tenant's items this embedder
        // indexes never changes with what another tenant registers later.
        if (!cfg_.gateway.empty() && !gateway_id_) {
            gateway_id_ = (co_await core::gateway::resolve(db_, cfg_.gateway, std::nullopt)).id;
        }
        r = co_await db_.query_prepared(kLeaseSql, gateway_id_, cfg_.batch_size, cfg_.lease_seconds,
                                        instance_);
    } catch (const pg::connection_error& e) {
        db_.reset();
        db_ok_ = false;
        failure = e.what();
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty()) {
        log::warn("lease failed, retrying", {{"error", failure}});
        co_return -1;
    }
    db_ok_ = true;
    if (r.empty()) co_return 0;
    std::vector<leased_item> items;
    for (int i = 0; i < r.size(); ++i) {
        leased_item it;
        it.id = r.get<std::string>(i, 0);
        it.kind = r.get<std::string>(i, 1);
        it.title = r.get<std::string>(i, 2);
        it.content = r.get_optional<std::string>(i, 3);
        it.plain_text = r.get_optional<std::string>(i, 4);
        if (auto tags = r.get_optional<std::string>(i, 5)) it.tags = parse_text_array(*tags);
        it.source_hash = r.get<std::string>(i, 6);
        it.lease_token = r.get<std::string>(i, 7);
        it.attempts = r.get<int>(i, 8);
        items.push_back(std::move(it));
    }
    stats_.leased += items.size();
    const auto started = clock_type::now();
    const auto before = stats_;
    // One item at a time: memory stays bounded by one item's chunks, and a stop finishes the
    // item in hand; leased items not reached go back to the pool when their lease expires.
    for (auto& it : items) {
        if (stopping_) break;
        co_await index_item(std::move(it));
        if (!db_ok_) break;
    }
    log::info("batch done", {{"leased", static_cast<unsigned long>(items.size())},
                             {"indexed", stats_.indexed - before.indexed},
                             {"chunks", stats_.chunks - before.chunks},
                             {"failed", stats_.failed - before.failed},
                             {"stale", stats_.stale - before.stale},
                             {"ms", ms_since(started)}});
    co_return db_ok_ ? static_cast<int>(items.size()) : -1;
}

net::awaitable<void> service::index_item(leased_item item) {
    const auto started = clock_type::now();
    body_text body = item_body(item.plain_text, item.content);
    const std::string text = item_text(item.title, item.tags, body.text);
    chunk_options co;
    co.size = static_cast<std::size_t>(cfg_.chunk_chars);
    co.overlap = static_cast<std::size_t>(cfg_.chunk_overlap);
    co.max_chunks = static_cast<std::size_t>(cfg_.max_chunks);
    chunking ch = make_chunks(body, co);
    body = body_text{};
    if (ch.truncated) {
        log::warn("item text exceeds the chunk limit: the rest is not chunked",
                  {{"item_id", item.id},
                   {"max_chunks", cfg_.max_chunks},
                   {"chunked_until", static_cast<unsigned long>(ch.covered_until)},
                   {"body_chars", static_cast<unsigned long>(ch.length)}});
    }

    // Item vector first, then the chunks, in bounded inference calls.
    std::vector<embed::embedding_result> vecs;
    vecs.reserve(ch.chunks.size() + 1);
    std::string failure;
    const auto batch = static_cast<std::size_t>(cfg_.embed_batch);
    std::size_t next = 0;  // 0: the item text; k: chunk k - 1
    const std::size_t total = ch.chunks.size() + 1;
    while (next < total && failure.empty()) {
        std::vector<std::string> texts;
        for (; next < total && texts.size() < batch; ++next) {
            texts.push_back(next == 0 ? text
                                      : chunk_embedding_text(item.title, ch.chunks[next - 1]));
        }
        try {
            auto out = co_await infer(std::move(texts));
            for (auto& v : out) {
                if (static_cast<int>(v.vector.size()) != kDimensions || !finite(v.vector)) {
                    throw core::error("the model returned an invalid vector (" +
                                      std::to_string(v.vector.size()) + " values)");
                }
                vecs.push_back(std::move(v));
            }
        } catch (const std::exception& e) {
            failure = std::string("embedding failed: ") + e.what();
        }
    }
    if (!failure.empty()) {
        co_await mark_failed(std::move(item), failure);
        co_return;
    }

    const std::string model = vecs.front().model;
    const std::string item_vector = vector_literal(vecs.front().vector);
    std::vector<embed::embedding_result> chunk_vecs(std::make_move_iterator(vecs.begin() + 1),
                                                    std::make_move_iterator(vecs.end()));
    vecs.clear();
    const std::string chunks = chunks_json(ch, chunk_vecs);
    chunk_vecs.clear();

    pg::result r;
    bool stale = false;
    try {
        r = co_await db_.query_prepared(kMarkIndexedSql, item.id, item_vector, model, kDimensions,
                                        item.source_hash, chunks, item.lease_token);
    } catch (const pg::connection_error& e) {
        db_.reset();
        db_ok_ = false;
        failure = e.what();
    } catch (const pg::sql_error& e) {
        if (is_stale(e)) {
            stale = true;
            failure = e.primary();
        } else {
            failure = std::string("storing the vectors failed: ") + e.what();
        }
    } catch (const std::exception& e) {
        failure = std::string("storing the vectors failed: ") + e.what();
    }
    if (!db_ok_) {
        log::warn(
            "database lost while marking an item; its lease will expire and it is leased "
            "again",
            {{"item_id", item.id}, {"error", failure}});
        co_return;
    }
    if (stale) {
        // The item was edited (or its lease taken over) meanwhile: the old vectors are not
        // stored; the edit put it back to pending and woke us.
        ++stats_.stale;
        log::info("item changed while being indexed; its vectors were discarded",
                  {{"item_id", item.id}, {"reason", failure}});
        co_return;
    }
    if (!failure.empty()) {
        co_await mark_failed(std::move(item), failure);
        co_return;
    }
    ++stats_.indexed;
    stats_.chunks += ch.chunks.size();
    log::debug("indexed", {{"item_id", item.id},
                           {"model", model},
                           {"chunks", static_cast<unsigned long>(ch.chunks.size())},
                           {"ms", ms_since(started)}});
}

net::awaitable<void> service::mark_failed(leased_item item, std::string reason) {
    ++stats_.failed;
    log::warn("indexing an item failed; it is retried after a back-off",
              {{"item_id", item.id}, {"attempt", item.attempts}, {"error", reason}});
    std::string failure;
    try {
        co_await db_.query_prepared(kMarkFailedSql, item.id, reason, item.lease_token,
                                    item.source_hash);
    } catch (const pg::connection_error& e) {
        db_.reset();
        db_ok_ = false;
        failure = e.what();
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty()) {
        log::warn("cannot mark the item failed", {{"item_id", item.id}, {"error", failure}});
    }
}

net::awaitable<http::response> service::healthz_handler(http::request) {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    const std::string_view model = model_->model_name();
    w.StartObject();
    w.Key("status");
    w.String(model_->is_fallback() ? "degraded" : "ok");
    w.Key("model");
    w.String(model.data(), static_cast<rapidjson::SizeType>(model.size()));
    w.Key("dimensions");
    w.Int(model_->dimensions());
    w.Key("model_status");
    w.String(model_->is_fallback() ? "fallback" : "ready");
    w.Key("max_tokens");
    w.Int(model_->max_tokens());
    w.Key("indexing");
    w.Bool(cfg_.indexing);
    w.Key("database");
    w.String(!cfg_.indexing ? "unused" : (db_ok_ ? "connected" : "disconnected"));
    w.Key("chunk_chars");
    w.Int(cfg_.chunk_chars);
    w.Key("chunk_overlap");
    w.Int(cfg_.chunk_overlap);
    w.Key("max_chunks");
    w.Int(cfg_.max_chunks);
    w.Key("batch_size");
    w.Int(cfg_.batch_size);
    w.Key("stats");
    w.StartObject();
    w.Key("leased");
    w.Uint64(stats_.leased);
    w.Key("indexed");
    w.Uint64(stats_.indexed);
    w.Key("chunks");
    w.Uint64(stats_.chunks);
    w.Key("failed");
    w.Uint64(stats_.failed);
    w.Key("stale");
    w.Uint64(stats_.stale);
    w.Key("embed_requests");
    w.Uint64(stats_.embed_requests);
    w.EndObject();
    w.EndObject();
    co_return http::response::json(200, std::string(buf.GetString(), buf.GetSize()));
}

net::awaitable<http::response> service::embed_handler(http::request req) {
    if (!cfg_.token.empty()) {
        const auto auth = req.get("Authorization");
        const std::string_view prefix = "Bearer ";
        const bool ok = auth && auth->size() > prefix.size() && auth->starts_with(prefix) &&
                        core::crypto::constant_time_equal(auth->substr(prefix.size()), cfg_.token);
        if (!ok) {
            auto r = http::response::error(401, "unauthorized",
                                           "POST /embed needs Authorization: Bearer <token>");
            r.header.set("WWW-Authenticate", "Bearer");
            co_return r;
        }
    }
    if (req.media_type() != "application/json") {
        co_return http::response::error(415, "unsupported_media_type",
                                        "the body must be application/json");
    }
    rapidjson::Document doc;
    try {
        doc = core::json::parse(req.body, core::json::kRequestBody);
    } catch (const core::json::parse_error& e) {
        co_return http::response::error(400, "invalid_json",
                                        std::string("the body is not valid JSON: ") + e.what());
    }
    if (!doc.IsObject() || !doc.HasMember("input") || !doc["input"].IsString()) {
        co_return http::response::error(400, "invalid_request",
                                        "the body must be {\"input\": \"<text>\"}");
    }
    std::string input(doc["input"].GetString(), doc["input"].GetStringLength());
    if (input.find_first_not_of(" \t\r\n\f\v") == std::string::npos) {
        co_return http::response::error(400, "input_required", "input must not be empty");
    }
    ++stats_.embed_requests;
    std::vector<std::string> texts;
    texts.push_back(std::move(input));
    std::vector<embed::embedding_result> out;
    std::string failure;
    try {
        out = co_await infer(std::move(texts));
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty() || out.empty()) {
        log::error("embedding failed", {{"error", failure}});
        co_return http::response::error(500, "embedding_failed", "the model failed: " + failure);
    }
    const auto& v = out.front();
    std::string body = "{\"embedding\":" + vector_literal(v.vector) +
                       ",\"model\":" + http::json_quote(v.model) +
                       ",\"dimensions\":" + std::to_string(v.vector.size()) +
                       ",\"truncated\":" + (v.truncated ? "true" : "false") +
                       ",\"token_count\":" + std::to_string(v.token_count) + "}";
    co_return http::response::json(200, std::move(body));
}

}  // namespace awp::embedder
