// The streaming replication protocol's CopyData messages around pgoutput (PostgreSQL's
// "Streaming Replication Protocol"): the server's XLogData ('w') and keepalive ('k'), the
// client's standby status update ('r'). Bounds-checked like the decoder; no connection here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace awp::realtime::walsender {

/// XLogData: one pgoutput message and where it sits in the WAL.
struct xlog_data {
    std::uint64_t start = 0;     ///< the WAL position of the data
    std::uint64_t wal_end = 0;   ///< the server's current end of WAL
    std::int64_t send_time = 0;  ///< microseconds since 2000-01-01 UTC
    std::string_view payload;    ///< the pgoutput message (a view into the CopyData bytes)
};

/// Primary keepalive: the server's position, and whether it wants an answer now.
struct keepalive {
    std::uint64_t wal_end = 0;
    std::int64_t send_time = 0;
    bool reply_requested = false;
};

using server_message = std::variant<xlog_data, keepalive>;

/// Parses one CopyData payload of the stream. Throws pgoutput::decode_error (with the offset)
/// for anything else.
[[nodiscard]] server_message parse(std::string_view copy_data);

/// A standby status update: written, flushed and applied up to `lsn` (the three are one for
/// realtime: what the sink decided), the client's clock, and whether the server should answer.
[[nodiscard]] std::string status_update(std::uint64_t lsn, std::int64_t client_time,
                                        bool reply_requested = false);

/// Now as microseconds since 2000-01-01 UTC (the protocol's clock).
[[nodiscard]] std::int64_t pg_now();

}  // namespace awp::realtime::walsender
