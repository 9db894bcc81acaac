// pgoutput, logical replication protocol version 1 (PostgreSQL's "Logical Replication Message
// Formats"): one message's bytes decoded into a typed value. Binary-safe and bounded: every
// length is checked against what is left, and bytes that do not parse are a decode_error that
// names the offset, never a read past the end. No state: the relation cache and the transaction
// being read are the assembler's (assembler.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "awp/core/error.hpp"

namespace awp::realtime::pgoutput {

/// Bytes that are not a pgoutput message (or not one this decoder can use): what and where.
class decode_error : public core::error {
public:
    decode_error(const std::string& what, std::size_t offset)
        : core::error(what + " (at byte " + std::to_string(offset) + ")"), offset_(offset) {}
    std::size_t offset() const noexcept { return offset_; }

private:
    std::size_t offset_;
};

/// Begin ('B'): a committed transaction starts. Only committed transactions are sent (protocol
/// version 1 does not stream transactions in progress).
struct begin {
    std::uint64_t final_lsn = 0;   ///< the LSN of its commit record
    std::int64_t commit_time = 0;  ///< microseconds since 2000-01-01 00:00:00 UTC
    std::uint32_t xid = 0;
};

/// Commit ('C'): the transaction's last message.
struct commit {
    std::uint8_t flags = 0;
    std::uint64_t commit_lsn = 0;  ///< the LSN of its commit record
    std::uint64_t end_lsn = 0;     ///< the LSN just past it: what the slot is confirmed up to
    std::int64_t commit_time = 0;
};

/// Origin ('O'): the transaction was replayed from another node.
struct origin {
    std::uint64_t lsn = 0;  ///< the commit's LSN on the origin
    std::string name;
};

/// One column of a relation message.
struct column_def {
    bool key = false;  ///< part of the replica identity (every column under REPLICA IDENTITY FULL)
    std::string name;
    std::uint32_t type_oid = 0;
    std::int32_t type_modifier = -1;
};

/// Relation ('R'): a table's shape, sent before its first change in a session and again after
/// it changes. Row messages name it by oid.
struct relation {
    std::uint32_t oid = 0;
    std::string schema;  ///< "" means pg_catalog
    std::string name;
    char replica_identity = 'd';  ///< pg_class.relreplident: d default, n nothing, f full, i index
    std::vector<column_def> columns;
};

/// Type ('Y'): the name of a type outside pg_catalog's built-ins, sent before a relation that
/// uses it.
struct type {
    std::uint32_t oid = 0;
    std::string schema;
    std::string name;
};

/// One column's value in a row message.
struct cell {
    enum class kind : char { null = 'n', unchanged_toast = 'u', text = 't', binary = 'b' };
    kind what = kind::null;
    std::string value;  ///< text or binary; empty otherwise
};
using tuple = std::vector<cell>;

/// Insert ('I').
struct insert {
    std::uint32_t relation = 0;
    tuple new_row;
};

/// Update ('U'). The old row comes only when the key changed ('K': the key columns, the others
/// null) or under REPLICA IDENTITY FULL ('O': every column).
struct update {
    std::uint32_t relation = 0;
    char old_kind = 0;  ///< 'K', 'O', or 0 for none
    tuple old_row;
    tuple new_row;
};

/// Delete ('D'): the old row's key ('K') or, under REPLICA IDENTITY FULL, the whole row ('O').
struct remove {
    std::uint32_t relation = 0;
    char old_kind = 'K';
    tuple old_row;
};

/// Truncate ('T').
struct truncate {
    std::uint8_t options = 0;  ///< 1 CASCADE, 2 RESTART IDENTITY
    std::vector<std::uint32_t> relations;
};

/// Message ('M'): pg_logical_emit_message's, sent only when asked for ("messages" option).
struct logical_message {
    bool transactional = false;
    std::uint64_t lsn = 0;
    std::string prefix;
    std::string content;
};

using message = std::variant<begin, commit, origin, relation, type, insert, update, remove,
                             truncate, logical_message>;

/// Decodes one message (the payload of one XLogData). Throws decode_error naming the offset of
/// the first byte that does not fit: a length past the end, a bad tag, bytes left over.
[[nodiscard]] message decode(std::string_view bytes);

/// The most columns a relation or row may carry (PostgreSQL's MaxTupleAttributeNumber).
inline constexpr std::size_t kMaxColumns = 1664;

}  // namespace awp::realtime::pgoutput
