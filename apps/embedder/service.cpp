// The embedder's service: the indexing queue (indexer.hpp) on the shared lease driver, the
// inference thread pool, and the HTTP endpoints POST /embed and GET /healthz.
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

namespace {

std::string what(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        return ex.what();
    } catch (...) {
        return "unknown exception";
    }
}

}  // namespace

service::service(net::io_context& ioc, config cfg, std::shared_ptr<embed::embedder> model)
    : ioc_(ioc),
      cfg_(std::move(cfg)),
      model_(std::move(model)),
      pool_(2),
      queue_(
          cfg_,
          cfg_.common.instance.empty() ? core::daemon::default_instance("embedder")
                                       : cfg_.common.instance,
          [this](std::vector<std::string> texts) { return infer(std::move(texts)); }, stats_),
      wake_(ioc.get_executor()),
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
    if (driver_) driver_->stop();
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
        core::queue_options qo;
        qo.name = "embed";
        qo.concurrency = 1;  // one item at a time: memory stays bounded by one item's chunks
        qo.batch = static_cast<std::size_t>(cfg_.batch_size);
        qo.retry.first = 500ms;
        qo.retry.cap = 10s;
        qo.retry.finish_for = std::chrono::seconds(cfg_.lease_seconds);
        qo.listen.dsn = cfg_.common.wake.listen_dsn(cfg_.common.database_url);
        qo.listen.channels = {std::string(core::channels::kEmbed)};
        qo.listen.safety_poll = cfg_.common.safety_poll();
        qo.listen.name = "embed";
        core::queue_hooks hooks;
        hooks.on_rescan = [this](core::rescan_reason) {
            queue_.set_db_ok(true);
            if (!ready_) {
                ready_ = true;
                core::daemon::notify_ready();
                log::info("ready", {{"port", static_cast<int>(port())}});
            }
        };
        driver_ =
            std::make_unique<core::queue_driver<index_queue>>(ex, queue_, qo, std::move(hooks));
        if (stopping_) driver_->stop();
        co_await driver_->run();
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
    w.String(!cfg_.indexing ? "unused" : (queue_.db_ok() ? "connected" : "disconnected"));
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
