// pgoutput on arbitrary bytes: the whole input as one message (awp::realtime::pgoutput::decode)
// and as one replication CopyData (walsender::parse); then as a stream of messages, each behind
// its length (4 bytes, big-endian; the seeds are real streams: tests/fixtures/pgoutput/capture.sh),
// fed to an assembler the way the reader feeds it: unknown types named, a failed message resets it
// (the reader reconnects). Only decode_error and stream_error are expected outcomes, and the
// assembler must never hold a part at or over its bound after a message; anything else (another
// exception, a crash, a sanitizer report, a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "awp/realtime/assembler.hpp"
#include "awp/realtime/pgoutput.hpp"
#include "awp/realtime/walsender.hpp"

namespace {

namespace rt = awp::realtime;

constexpr std::size_t kPartBytes = 2048;

void one_message(std::string_view bytes) {
    try {
        (void)rt::pgoutput::decode(bytes);
    } catch (const rt::pgoutput::decode_error& e) {
        if (e.offset() > bytes.size()) std::abort();
    }
    try {
        (void)rt::walsender::parse(bytes);
    } catch (const rt::pgoutput::decode_error&) {
    }
}

void check_part(const rt::step& s) {
    if (!s.out) return;
    if (!s.final && s.out->commit_lsn != 0) std::abort();  // only the last part confirms
    for (const auto& c : s.out->changes) {
        if (c.commit_timestamp != s.out->commit_timestamp) std::abort();
        if (c.lsn != s.out->commit_lsn) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    one_message(input);

    rt::assembler a(kPartBytes);
    std::size_t at = 0;
    while (at < input.size()) {
        std::size_t len = 0;
        for (int i = 0; i < 4 && at < input.size(); ++i, ++at) {
            len = (len << 8) | static_cast<std::uint8_t>(input[at]);
        }
        const auto message = input.substr(at, len);
        at += message.size();
        try {
            const auto s = a.feed(message);
            for (const auto oid : s.unknown_types) a.set_type_name(oid, "t" + std::to_string(oid));
            check_part(s);
        } catch (const rt::pgoutput::decode_error&) {
            a.reset();
        } catch (const rt::stream_error&) {
            a.reset();
        }
        if (a.pending_bytes() >= kPartBytes) std::abort();
    }
    return 0;
}
