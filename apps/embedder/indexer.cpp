// The embedder's indexing queue (indexer.hpp): lease -> extract -> chunk -> embed off the io
// thread -> mark indexed or failed; core::queue_driver drives it.
#include "indexer.hpp"

#include <charconv>
#include <cmath>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/gateway.hpp"
#include "awp/core/log.hpp"
#include "text.hpp"

namespace awp::embedder {

namespace log = core::log;
namespace pg = core::pg;
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

bool is_stale(const pg::sql_error& e) {
    return dynamic_cast<const pg::stale_source_hash*>(&e) ||
           dynamic_cast<const pg::lease_lost*>(&e) ||
           dynamic_cast<const pg::illegal_transition*>(&e);
}

}  // namespace

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

index_queue::index_queue(const config& cfg, std::string instance, infer_fn infer, stats& counters)
    : cfg_(cfg),
      instance_(std::move(instance)),
      infer_(std::move(infer)),
      stats_(counters),
      db_(cfg.common.database_url, "index") {}

net::awaitable<core::lease_batch<leased_item>> index_queue::lease(std::size_t room) {
    pg::result r;
    try {
        // GATEWAY_ID resolved once, then its id passed: which tenant's items this embedder
        // indexes never changes with what another tenant registers later.
        if (!cfg_.gateway.empty() && !gateway_id_) {
            gateway_id_ = (co_await core::gateway::resolve(db_, cfg_.gateway, std::nullopt)).id;
        }
        r = co_await db_.query_prepared(kLeaseSql, gateway_id_, static_cast<int>(room),
                                        cfg_.lease_seconds, instance_);
    } catch (const pg::connection_error&) {
        db_ok_ = false;
        throw;  // the driver retries with its back-off
    }
    db_ok_ = true;
    core::lease_batch<leased_item> batch;
    auto& items = batch.items;
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
    co_return batch;
}

net::awaitable<index_outcome> index_queue::work(leased_item& item, std::size_t) {
    index_outcome out;
    out.started = clock_type::now();
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
            auto got = co_await infer_(std::move(texts));
            for (auto& v : got) {
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
    if (!failure.empty()) co_return failed(item, std::move(failure));

    out.model = vecs.front().model;
    out.item_vector = vector_literal(vecs.front().vector);
    std::vector<embed::embedding_result> chunk_vecs(std::make_move_iterator(vecs.begin() + 1),
                                                    std::make_move_iterator(vecs.end()));
    vecs.clear();
    out.chunks = chunks_json(ch, chunk_vecs);
    chunk_vecs.clear();

    out.chunk_count = ch.chunks.size();
    out.indexed = true;
    co_return out;
}

index_outcome index_queue::failed(const leased_item&, std::string what) const {
    index_outcome out;
    out.failure = std::move(what);
    out.started = clock_type::now();
    return out;
}

net::awaitable<void> index_queue::finish(const leased_item& item, const index_outcome& out,
                                         std::size_t) {
    try {
        if (out.indexed) {
            try {
                co_await db_.query_prepared(kMarkIndexedSql, item.id, out.item_vector, out.model,
                                            kDimensions, item.source_hash, out.chunks,
                                            item.lease_token);
                co_return;
            } catch (const pg::sql_error& e) {
                if (is_stale(e)) {
                    // Edited (or its lease taken over) meanwhile: the edit put it back to
                    // pending and woke us; the old vectors are not stored.
                    out.stale = true;
                    out.failure = e.primary();
                    throw;
                }
                out.indexed = false;
                out.failure = std::string("storing the vectors failed: ") + e.what();
            }
        }
        co_await db_.query_prepared(kMarkFailedSql, item.id, out.failure, item.lease_token,
                                    item.source_hash);
    } catch (const pg::connection_error&) {
        db_ok_ = false;
        throw;  // retried by the driver (mark_indexed again, or straight to mark_failed)
    }
}

void index_queue::settled(const leased_item& item, const index_outcome& out,
                          core::finish_status status) {
    if (out.stale) {
        ++stats_.stale;
        log::info("item changed while being indexed; its vectors were discarded",
                  {{"item_id", item.id}, {"reason", out.failure}});
        return;
    }
    if (status != core::finish_status::written) return;  // the driver logged why
    if (out.indexed) {
        ++stats_.indexed;
        stats_.chunks += out.chunk_count;
        log::debug("indexed", {{"item_id", item.id},
                               {"model", out.model},
                               {"chunks", static_cast<unsigned long>(out.chunk_count)},
                               {"ms", ms_since(out.started)}});
    } else {
        ++stats_.failed;
        log::warn("indexing an item failed; it is retried after a back-off",
                  {{"item_id", item.id}, {"attempt", item.attempts}, {"error", out.failure}});
    }
}

}  // namespace awp::embedder
