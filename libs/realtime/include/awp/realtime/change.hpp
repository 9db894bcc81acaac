// The change type both halves of realtime share: what the capture side (the pgoutput reader)
// hands to the socket side (the Phoenix channels) for each committed transaction, in order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace awp::realtime {

enum class change_kind { insert, update, remove };

struct column_value {  // a column as pgoutput sends it
    std::string name;
    // the column type's name as the relation message gives its oid, resolved (e.g. "text",
    // "int4", "uuid", "jsonb", "timestamptz")
    std::string type;
    std::uint32_t type_oid = 0;
    std::optional<std::string> text;  // nullopt = NULL; unchanged TOAST = omitted from the vector
    bool key = false;                 // part of the replica identity
};

struct change {
    change_kind kind;
    std::string schema, table;
    std::vector<column_value> new_row;  // insert, update
    // update (when the key changed) and delete: identity columns
    std::vector<column_value> old_keys;
    // ISO 8601 UTC, as the client expects ("2026-11-26T23:40:35.758Z")
    std::string commit_timestamp;
    std::uint64_t lsn = 0;  // the commit's end LSN
    // old_keys is the whole old row (REPLICA IDENTITY FULL): a DELETE's visibility can be asked
    // of the row's policies (docs/realtime.md, "Who sees what")
    bool old_full = false;
};

/// Postgres' epoch, 2000-01-01 00:00:00 UTC, in Unix microseconds: its commit times and the
/// replication protocol's clocks count from it.
inline constexpr std::int64_t kPgEpochUnixMicros = 946'684'800'000'000;

/// One committed transaction's changes, in order.
struct transaction {
    std::uint64_t commit_lsn = 0;
    std::string commit_timestamp;
    /// The same commit time as Postgres sends it: microseconds since 2000-01-01 UTC.
    std::int64_t commit_time = 0;
    /// Its transaction id (Begin's): the commit reaches the slot a moment before other sessions'
    /// snapshots see it, so the visibility checks wait for a snapshot that does.
    std::uint32_t xid = 0;
    std::vector<change> changes;
};

}  // namespace awp::realtime
