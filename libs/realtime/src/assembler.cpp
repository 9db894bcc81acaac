// Transactions out of pgoutput messages: relation and type caches, changes in commit order,
// large transactions in bounded parts.
#include "awp/realtime/assembler.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>

#include "awp/core/time.hpp"

namespace awp::realtime {
namespace {

// What a change costs beyond its values' bytes (strings, vectors, the optional): the bound
// counts it so that many small changes weigh what they take.
constexpr std::size_t kChangeOverhead = 160;
constexpr std::size_t kColumnOverhead = 96;

std::size_t weight(const change& c) {
    std::size_t n = kChangeOverhead + c.schema.size() + c.table.size();
    for (const auto* cols : {&c.new_row, &c.old_keys}) {
        for (const auto& v : *cols) {
            n += kColumnOverhead + v.name.size() + v.type.size() + (v.text ? v.text->size() : 0);
        }
    }
    return n;
}

std::string qualified(const pgoutput::relation& r) {
    return (r.schema.empty() ? std::string("pg_catalog") : r.schema) + "." + r.name;
}

}  // namespace

void assembler::set_type_name(std::uint32_t oid, std::string name) {
    types_[oid] = std::move(name);
}

void assembler::reset() {
    relations_.clear();
    in_tx_ = false;
    pending_ = transaction{};
    pending_bytes_ = 0;
}

const pgoutput::relation& assembler::relation_of(std::uint32_t oid) const {
    const auto it = relations_.find(oid);
    if (it == relations_.end()) {
        throw stream_error("a change of relation " + std::to_string(oid) +
                           ", which the stream never announced");
    }
    return it->second;
}

std::string assembler::type_name(std::uint32_t oid) const {
    const auto it = types_.find(oid);
    // Only a type dropped since the change was written has no name now: Postgres' own name
    // for a value of no known type.
    return it == types_.end() ? std::string("unknown") : it->second;
}

std::vector<column_value> assembler::columns(const pgoutput::relation& rel, pgoutput::tuple& row,
                                             bool keys_only) const {
    if (row.size() != rel.columns.size()) {
        throw stream_error("a row of " + qualified(rel) + " with " + std::to_string(row.size()) +
                           " columns, its relation has " + std::to_string(rel.columns.size()));
    }
    std::vector<column_value> out;
    out.reserve(row.size());
    for (std::size_t i = 0; i < row.size(); ++i) {
        const auto& def = rel.columns[i];
        if (keys_only && !def.key) continue;
        auto& cell = row[i];
        if (cell.what == pgoutput::cell::kind::unchanged_toast) continue;  // not sent: unchanged
        if (cell.what == pgoutput::cell::kind::binary) {
            throw stream_error("a binary value in column " + def.name + " of " + qualified(rel) +
                               " (the reader asks for text)");
        }
        column_value v;
        v.name = def.name;
        v.type = type_name(def.type_oid);
        v.type_oid = def.type_oid;
        v.key = def.key;
        if (cell.what == pgoutput::cell::kind::text) v.text = std::move(cell.value);
        out.push_back(std::move(v));
    }
    return out;
}

step assembler::add(change c) {
    step s;
    pending_bytes_ += weight(c);
    pending_.changes.push_back(std::move(c));
    if (pending_bytes_ >= max_part_bytes_) {
        // The part so far goes on now; the transaction's end (and its LSN) comes with the last.
        s.out = std::move(pending_);
        pending_ = transaction{};
        pending_.commit_timestamp = s.out->commit_timestamp;
        pending_.commit_time = s.out->commit_time;
        pending_.xid = s.out->xid;
        pending_bytes_ = 0;
    }
    return s;
}

step assembler::apply(pgoutput::message m) {
    using namespace pgoutput;
    const auto need_tx = [this](const char* what) {
        if (!in_tx_) throw stream_error(std::string(what) + " outside a transaction");
    };
    step s;
    if (auto* b = std::get_if<begin>(&m)) {
        if (in_tx_) throw stream_error("a Begin inside a transaction");
        in_tx_ = true;
        begin_ = *b;
        pending_ = transaction{};
        pending_.commit_timestamp = format_commit_time(b->commit_time);
        pending_.commit_time = b->commit_time;
        pending_.xid = b->xid;
        pending_bytes_ = 0;
    } else if (auto* c = std::get_if<commit>(&m)) {
        need_tx("a Commit");
        if (c->commit_lsn != begin_.final_lsn) {
            throw stream_error("a Commit at " + format_lsn(c->commit_lsn) + " ends a transaction " +
                               "that began for " + format_lsn(begin_.final_lsn));
        }
        in_tx_ = false;
        s.final = true;
        s.out = std::move(pending_);
        s.out->commit_lsn = c->end_lsn;
        for (auto& ch : s.out->changes) ch.lsn = c->end_lsn;
        pending_ = transaction{};
        pending_bytes_ = 0;
    } else if (std::holds_alternative<origin>(m)) {
        need_tx("an Origin");  // whence a replayed transaction came: nothing to deliver
    } else if (auto* r = std::get_if<relation>(&m)) {
        for (const auto& col : r->columns) {
            if (!types_.contains(col.type_oid) &&
                std::find(s.unknown_types.begin(), s.unknown_types.end(), col.type_oid) ==
                    s.unknown_types.end()) {
                s.unknown_types.push_back(col.type_oid);
            }
        }
        const auto oid = r->oid;
        relations_.insert_or_assign(oid, std::move(*r));
    } else if (auto* t = std::get_if<type>(&m)) {
        types_[t->oid] = std::move(t->name);
    } else if (auto* ins = std::get_if<insert>(&m)) {
        need_tx("an Insert");
        const auto& rel = relation_of(ins->relation);
        change ch{change_kind::insert, rel.schema, rel.name, {}, {}, pending_.commit_timestamp, 0};
        ch.new_row = columns(rel, ins->new_row, false);
        s = add(std::move(ch));
    } else if (auto* up = std::get_if<update>(&m)) {
        need_tx("an Update");
        const auto& rel = relation_of(up->relation);
        change ch{change_kind::update, rel.schema, rel.name, {}, {}, pending_.commit_timestamp, 0};
        ch.new_row = columns(rel, up->new_row, false);
        if (up->old_kind != 0) ch.old_keys = columns(rel, up->old_row, true);
        ch.old_full = up->old_kind == 'O';
        s = add(std::move(ch));
    } else if (auto* del = std::get_if<remove>(&m)) {
        need_tx("a Delete");
        const auto& rel = relation_of(del->relation);
        change ch{change_kind::remove, rel.schema, rel.name, {}, {}, pending_.commit_timestamp, 0};
        ch.old_keys = columns(rel, del->old_row, true);
        ch.old_full = del->old_kind == 'O';
        s = add(std::move(ch));
    } else if (auto* tr = std::get_if<truncate>(&m)) {
        need_tx("a Truncate");
        for (const auto oid : tr->relations) {
            const auto it = relations_.find(oid);
            s.truncated.push_back(it == relations_.end() ? "relation " + std::to_string(oid)
                                                         : qualified(it->second));
        }
    }
    // logical_message: pg_logical_emit_message's, not a row change: nothing to deliver.
    return s;
}

std::string format_commit_time(std::int64_t pg_micros) {
    using namespace std::chrono;
    // A commit time is a server's clock: anything outside 1900-2200 is a damaged message, and
    // clamping keeps the arithmetic (system_clock counts nanoseconds) from overflowing.
    constexpr std::int64_t kEarliest = -3'155'673'600'000'000;  // 1900-01-01
    constexpr std::int64_t kLatest = 6'311'433'600'000'000;     // 2200-01-01
    const std::int64_t at = std::clamp(pg_micros, kEarliest, kLatest);
    const sys_time<microseconds> t{microseconds(at + kPgEpochUnixMicros)};
    return core::format_iso8601_utc(time_point_cast<system_clock::duration>(t));
}

std::string format_lsn(std::uint64_t lsn) {
    char text[24];
    const int n = std::snprintf(text, sizeof text, "%X/%X", static_cast<unsigned>(lsn >> 32),
                                static_cast<unsigned>(lsn & 0xffffffffU));
    return std::string(text, static_cast<std::size_t>(n));
}

std::optional<std::uint64_t> parse_lsn(std::string_view text) {
    const auto slash = text.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size() || slash > 8 ||
        text.size() - slash - 1 > 8) {
        return std::nullopt;
    }
    std::uint32_t hi = 0, lo = 0;
    const auto hex = [](std::string_view s, std::uint32_t& v) {
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
        return ec == std::errc{} && p == s.data() + s.size();
    };
    if (!hex(text.substr(0, slash), hi) || !hex(text.substr(slash + 1), lo)) return std::nullopt;
    return (std::uint64_t{hi} << 32) | lo;
}

}  // namespace awp::realtime
