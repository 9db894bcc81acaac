// The real pgoutput stream of tests/fixtures/pgoutput/stream.txt (capture.sh made it on a real
// PostgreSQL 15): each message's LSN, xid and bytes, for the decoder's tests.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace awp::test {

struct pgoutput_line {
    std::string lsn;
    std::uint32_t xid = 0;
    std::string bytes;
};

inline std::string from_hex(const std::string& hex) {
    if (hex.size() % 2 != 0) throw std::runtime_error("odd hex length");
    std::string out;
    out.reserve(hex.size() / 2);
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return out;
}

/// Every message of the fixture, in stream order.
inline std::vector<pgoutput_line> pgoutput_stream() {
    std::ifstream in(std::string(AWP_SOURCE_DIR) + "/tests/fixtures/pgoutput/stream.txt");
    if (!in) throw std::runtime_error("tests/fixtures/pgoutput/stream.txt is missing");
    std::vector<pgoutput_line> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        pgoutput_line l;
        std::string hex;
        fields >> l.lsn >> l.xid >> hex;
        l.bytes = from_hex(hex);
        out.push_back(std::move(l));
    }
    return out;
}

}  // namespace awp::test
