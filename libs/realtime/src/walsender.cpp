// The replication stream's framing: XLogData and keepalives in, standby status updates out.
#include "awp/realtime/walsender.hpp"

#include <chrono>

#include "awp/realtime/change.hpp"
#include "awp/realtime/pgoutput.hpp"

namespace awp::realtime::walsender {
namespace {

std::uint64_t read_u64(std::string_view b, std::size_t at) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<std::uint8_t>(b[at + i]);
    return v;
}

void put_u64(std::string& out, std::uint64_t v) {
    for (int shift = 56; shift >= 0; shift -= 8) {
        out.push_back(static_cast<char>((v >> shift) & 0xffU));
    }
}

}  // namespace

server_message parse(std::string_view b) {
    if (b.empty()) throw pgoutput::decode_error("an empty replication message", 0);
    if (b[0] == 'w') {
        constexpr std::size_t kHeader = 1 + 8 + 8 + 8;
        if (b.size() < kHeader) throw pgoutput::decode_error("XLogData ends in its header", 0);
        xlog_data d;
        d.start = read_u64(b, 1);
        d.wal_end = read_u64(b, 9);
        d.send_time = static_cast<std::int64_t>(read_u64(b, 17));
        d.payload = b.substr(kHeader);
        return d;
    }
    if (b[0] == 'k') {
        constexpr std::size_t kSize = 1 + 8 + 8 + 1;
        if (b.size() != kSize) {
            throw pgoutput::decode_error(
                "a keepalive of " + std::to_string(b.size()) + " bytes (18 expected)", 0);
        }
        keepalive k;
        k.wal_end = read_u64(b, 1);
        k.send_time = static_cast<std::int64_t>(read_u64(b, 9));
        k.reply_requested = b[17] != 0;
        return k;
    }
    throw pgoutput::decode_error("an unknown replication message", 0);
}

std::string status_update(std::uint64_t lsn, std::int64_t client_time, bool reply_requested) {
    std::string out;
    out.reserve(34);
    out.push_back('r');
    put_u64(out, lsn);  // written
    put_u64(out, lsn);  // flushed: the slot's confirmed position
    put_u64(out, lsn);  // applied
    put_u64(out, static_cast<std::uint64_t>(client_time));
    out.push_back(reply_requested ? 1 : 0);
    return out;
}

std::int64_t pg_now() {
    using namespace std::chrono;
    return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() -
           kPgEpochUnixMicros;
}

}  // namespace awp::realtime::walsender
