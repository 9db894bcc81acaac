// pgoutput messages, one after another, into the transactions realtime hands on (change.hpp):
// the relation cache (per relation oid, as the stream announces them), the type names (from
// Type messages and from the reader's pg_type lookups), and the transaction being read, bounded:
// a transaction larger than max_part_bytes is handed on in parts, so the gateway never holds
// more than about that much of one transaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "awp/core/error.hpp"
#include "awp/realtime/change.hpp"
#include "awp/realtime/pgoutput.hpp"

namespace awp::realtime {

/// Messages that decode but do not fit the stream: a change outside a transaction, a row of a
/// relation never announced or with another column count, binary values (never asked for).
class stream_error : public core::error {
public:
    using core::error::error;
};

/// What one message meant.
struct step {
    /// Changes to hand on: a whole transaction when `final`, else a part of a large one (its
    /// commit_lsn and its changes' lsn are 0: only the last part carries them).
    std::optional<transaction> out;
    /// `out` is a transaction's last part (it may have no changes): once it is handed on, the
    /// slot may be confirmed up to out->commit_lsn.
    bool final = false;
    /// "schema.table" of each table a Truncate emptied: reported, not delivered as changes.
    std::vector<std::string> truncated;
    /// After a Relation message: its column types whose names are not known yet. The reader
    /// resolves them (pg_type) and calls set_type_name before it feeds the next message.
    std::vector<std::uint32_t> unknown_types;
};

class assembler {
public:
    static constexpr std::size_t kDefaultPartBytes = 4 * 1024 * 1024;

    explicit assembler(std::size_t max_part_bytes = kDefaultPartBytes)
        : max_part_bytes_(max_part_bytes) {}

    /// Decodes and applies one message. Throws pgoutput::decode_error or stream_error.
    step feed(std::string_view bytes) { return apply(pgoutput::decode(bytes)); }
    step apply(pgoutput::message m);

    /// A type's name, as column_value::type gives it ("int4", "_text", "rt_status").
    void set_type_name(std::uint32_t oid, std::string name);
    /// A new replication session: the transaction in progress is dropped (the server sends it
    /// again from its start) and relations are forgotten (the server announces each again
    /// before its first change). Type names stay: an oid names one type.
    void reset();

    bool in_transaction() const noexcept { return in_tx_; }
    std::size_t relation_count() const noexcept { return relations_.size(); }
    std::size_t type_count() const noexcept { return types_.size(); }
    /// Bytes of the part being collected (the bound's measure).
    std::size_t pending_bytes() const noexcept { return pending_bytes_; }

private:
    const pgoutput::relation& relation_of(std::uint32_t oid) const;
    std::string type_name(std::uint32_t oid) const;
    /// The columns of `row` as column_values; `keys_only` keeps the replica identity's.
    std::vector<column_value> columns(const pgoutput::relation& rel, pgoutput::tuple& row,
                                      bool keys_only) const;
    step add(change c);

    std::size_t max_part_bytes_;
    std::unordered_map<std::uint32_t, pgoutput::relation> relations_;
    std::unordered_map<std::uint32_t, std::string> types_;
    bool in_tx_ = false;
    pgoutput::begin begin_;
    transaction pending_;
    std::size_t pending_bytes_ = 0;
};

/// A commit time of pgoutput (microseconds since 2000-01-01 UTC) as the client expects it:
/// ISO 8601 UTC with milliseconds, "2026-11-26T23:40:35.758Z".
[[nodiscard]] std::string format_commit_time(std::int64_t pg_micros);
/// An LSN as Postgres writes it: "16/B374D848".
[[nodiscard]] std::string format_lsn(std::uint64_t lsn);
/// "16/B374D848" as a number; nullopt for anything else.
[[nodiscard]] std::optional<std::uint64_t> parse_lsn(std::string_view text);

}  // namespace awp::realtime
