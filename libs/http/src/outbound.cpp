// The outbound address policy: the classifier, the operator's allow list and the check.
#include "awp/http/outbound.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

#include "awp/core/pg.hpp"
#include "awp/http/message.hpp"

namespace awp::http {

namespace {

using bytes16 = net::ip::address_v6::bytes_type;

bool v4_in(std::uint32_t a, std::uint32_t net_addr, unsigned prefix) {
    const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
    return (a & mask) == (net_addr & mask);
}

constexpr std::uint32_t v4(unsigned a, unsigned b, unsigned c, unsigned d) {
    return (a << 24) | (b << 16) | (c << 8) | d;
}

address_class classify_v4(const net::ip::address_v4& addr) {
    const std::uint32_t a = addr.to_uint();
    if (a == 0) return address_class::unspecified;
    if (a == 0xFFFFFFFFU) return address_class::broadcast;
    if (v4_in(a, v4(0, 0, 0, 0), 8)) return address_class::this_network;
    if (v4_in(a, v4(127, 0, 0, 0), 8)) return address_class::loopback;
    if (v4_in(a, v4(169, 254, 0, 0), 16)) return address_class::link_local;
    if (v4_in(a, v4(224, 0, 0, 0), 4)) return address_class::multicast;
    if (v4_in(a, v4(240, 0, 0, 0), 4)) return address_class::reserved;
    if (v4_in(a, v4(10, 0, 0, 0), 8) || v4_in(a, v4(172, 16, 0, 0), 12) ||
        v4_in(a, v4(192, 168, 0, 0), 16) || v4_in(a, v4(100, 64, 0, 0), 10) ||
        v4_in(a, v4(198, 18, 0, 0), 15) || v4_in(a, v4(192, 0, 0, 0), 24)) {
        return address_class::private_net;
    }
    if (v4_in(a, v4(192, 0, 2, 0), 24) || v4_in(a, v4(198, 51, 100, 0), 24) ||
        v4_in(a, v4(203, 0, 113, 0), 24)) {
        return address_class::reserved;  // documentation (TEST-NET-1/2/3)
    }
    return address_class::global;
}

bool v6_prefix(const bytes16& b, std::initializer_list<unsigned char> head, unsigned bits) {
    std::array<unsigned char, 16> p{};
    std::copy(head.begin(), head.end(), p.begin());
    for (unsigned i = 0; i < bits; ++i) {
        const unsigned byte = i / 8;
        const unsigned bit = 7 - i % 8;
        if (((b[byte] >> bit) & 1U) != ((p[byte] >> bit) & 1U)) return false;
    }
    return true;
}

net::ip::address_v4 v4_at(const bytes16& b, std::size_t at) {
    return net::ip::address_v4(
        net::ip::address_v4::bytes_type{b[at], b[at + 1], b[at + 2], b[at + 3]});
}

address_class classify_v6(const net::ip::address_v6& addr) {
    const auto b = addr.to_bytes();
    if (addr.is_unspecified()) return address_class::unspecified;
    if (addr.is_loopback()) return address_class::loopback;
    // IPv4 carried inside: mapped ::ffff:0:0/96, compatible ::/96, NAT64 64:ff9b::/96,
    // 6to4 2002::/16 (the IPv4 address in bytes 2..5).
    if (addr.is_v4_mapped() || v6_prefix(b, {}, 96) || v6_prefix(b, {0x00, 0x64, 0xff, 0x9b}, 96)) {
        return classify_v4(v4_at(b, 12));
    }
    if (v6_prefix(b, {0x20, 0x02}, 16)) return classify_v4(v4_at(b, 2));
    if (v6_prefix(b, {0xfe, 0x80}, 10)) return address_class::link_local;
    if (v6_prefix(b, {0xff}, 8)) return address_class::multicast;
    if (v6_prefix(b, {0xfc}, 7) || v6_prefix(b, {0xfe, 0xc0}, 10)) {
        return address_class::private_net;  // unique local, deprecated site-local
    }
    if (v6_prefix(b, {0x01, 0x00}, 64) || v6_prefix(b, {0x20, 0x01, 0x0d, 0xb8}, 32)) {
        return address_class::reserved;  // discard-only, documentation
    }
    return address_class::global;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::optional<std::uint16_t> parse_port(std::string_view s) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v == 0 || v > 65535) {
        return std::nullopt;
    }
    return static_cast<std::uint16_t>(v);
}

outbound_policy::entry parse_entry(std::string_view text) {
    auto bad = [&](const std::string& why) {
        return core::config_error("API_OUTBOUND_ALLOW: \"" + std::string(text) + "\" " + why);
    };
    outbound_policy::entry e;
    std::string_view host = text;
    // Split off ":port": "[v6]:p", "v4:p", "name:p"; a bare IPv6 address has several colons.
    if (!host.empty() && host.front() == '[') {
        const auto close = host.find(']');
        if (close == std::string_view::npos) throw bad("has no closing ]");
        auto rest = host.substr(close + 1);
        host = host.substr(1, close - 1);
        if (!rest.empty()) {
            if (rest.front() != ':') throw bad("has text after ]");
            e.port = parse_port(rest.substr(1));
            if (!e.port) throw bad("has a bad port");
        }
    } else if (std::count(host.begin(), host.end(), ':') == 1) {
        const auto colon = host.find(':');
        e.port = parse_port(host.substr(colon + 1));
        if (!e.port) throw bad("has a bad port");
        host = host.substr(0, colon);
    }
    std::optional<unsigned> prefix;
    if (const auto slash = host.find('/'); slash != std::string_view::npos) {
        unsigned p = 0;
        auto bits = host.substr(slash + 1);
        auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), p);
        if (bits.empty() || ec != std::errc() || end != bits.data() + bits.size()) {
            throw bad("has a bad prefix length");
        }
        prefix = p;
        host = host.substr(0, slash);
    }
    if (host.empty()) throw bad("names no host");
    boost::system::error_code ec;
    auto addr = net::ip::make_address(std::string(host), ec);
    if (!ec) {
        if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
            addr = net::ip::make_address_v4(net::ip::v4_mapped, addr.to_v6());
        }
        const unsigned max = addr.is_v4() ? 32 : 128;
        if (prefix && *prefix > max) throw bad("has a prefix longer than the address");
        e.network = addr;
        e.prefix = prefix.value_or(max);
        return e;
    }
    if (prefix) throw bad("is a CIDR whose address is not an IP address");
    if (host.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
        std::string_view::npos) {
        throw bad("is neither an address, a CIDR nor a host name");
    }
    e.host = lower(host);
    return e;
}

bool contains(const outbound_policy::entry& e, const net::ip::address& a) {
    if (!e.network) return false;
    if (e.network->is_v4() != a.is_v4()) return false;
    if (a.is_v4()) return v4_in(a.to_v4().to_uint(), e.network->to_v4().to_uint(), e.prefix);
    const auto x = a.to_v6().to_bytes();
    const auto n = e.network->to_v6().to_bytes();
    for (unsigned i = 0; i < e.prefix; ++i) {
        const unsigned byte = i / 8;
        const unsigned bit = 7 - i % 8;
        if (((x[byte] >> bit) & 1U) != ((n[byte] >> bit) & 1U)) return false;
    }
    return true;
}

/// The address as compared: an IPv4-mapped IPv6 address is its IPv4 address.
net::ip::address plain(const net::ip::address& a) {
    if (a.is_v6() && a.to_v6().is_v4_mapped()) {
        return net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6());
    }
    return a;
}

}  // namespace

address_class classify(const net::ip::address& a) {
    return a.is_v4() ? classify_v4(a.to_v4()) : classify_v6(a.to_v6());
}

std::string_view describe(address_class c) {
    switch (c) {
        case address_class::global:
            return "a public address";
        case address_class::loopback:
            return "a loopback address";
        case address_class::private_net:
            return "a private-network address";
        case address_class::link_local:
            return "a link-local address (cloud metadata)";
        case address_class::unspecified:
            return "the unspecified address";
        case address_class::this_network:
            return "a this-network (0.0.0.0/8) address";
        case address_class::multicast:
            return "a multicast address";
        case address_class::broadcast:
            return "the broadcast address";
        case address_class::reserved:
            return "a reserved address";
    }
    return "an unknown address";
}

bool always_refused(address_class c) {
    return c != address_class::global && c != address_class::loopback &&
           c != address_class::private_net;
}

outbound_policy::outbound_policy(std::string_view allow, std::vector<std::uint16_t> database_ports)
    : database_ports_(std::move(database_ports)) {
    std::size_t start = 0;
    while (start <= allow.size()) {
        auto comma = allow.find(',', start);
        if (comma == std::string_view::npos) comma = allow.size();
        const auto item = trim_ows(allow.substr(start, comma - start));
        if (!item.empty()) allow_.push_back(parse_entry(item));
        start = comma + 1;
    }
    std::sort(database_ports_.begin(), database_ports_.end());
    database_ports_.erase(std::unique(database_ports_.begin(), database_ports_.end()),
                          database_ports_.end());
}

outbound_policy outbound_policy::with_database_ports(const std::vector<std::uint16_t>& more) const {
    outbound_policy out = *this;
    out.database_ports_.insert(out.database_ports_.end(), more.begin(), more.end());
    std::sort(out.database_ports_.begin(), out.database_ports_.end());
    out.database_ports_.erase(std::unique(out.database_ports_.begin(), out.database_ports_.end()),
                              out.database_ports_.end());
    return out;
}

bool outbound_policy::allowed_by_operator(std::string_view host, const net::ip::address& a,
                                          std::uint16_t port) const {
    const auto name = lower(host);
    for (const auto& e : allow_) {
        if (e.port && *e.port != port) continue;
        if (e.network ? contains(e, a) : e.host == name) return true;
    }
    return false;
}

std::optional<std::string> outbound_policy::refusal(
    std::string_view host, const net::ip::address& address, std::uint16_t port,
    outbound_scope scope, const std::vector<net::ip::address>& own) const {
    const auto a = plain(address);
    const auto cls = classify(a);
    const auto where = a.to_string() + " (" + std::string(host) + ":" + std::to_string(port) + ")";
    if (always_refused(cls)) {
        return where + " is " + std::string(describe(cls)) + ", which is never contacted";
    }
    if (std::binary_search(database_ports_.begin(), database_ports_.end(), port)) {
        return where + " is on port " + std::to_string(port) +
               ", a database port, which is never contacted";
    }
    if (allowed_by_operator(host, a, port)) return std::nullopt;
    if (scope == outbound_scope::internet) {
        if (cls == address_class::global) return std::nullopt;
        return where + " is " + std::string(describe(cls)) +
               ", not contacted on a tenant's behalf unless the operator allows it "
               "(API_OUTBOUND_ALLOW)";
    }
    if (cls == address_class::loopback) return std::nullopt;
    for (const auto& o : own) {
        if (plain(o) == a) return std::nullopt;
    }
    return where + " is " + std::string(describe(cls)) +
           " that is not the agent's own gateway host (loopback or the address its runner "
           "registered), and the operator does not allow it (API_OUTBOUND_ALLOW)";
}

void outbound_check::operator()(std::string_view host, const net::ip::address& a,
                                std::uint16_t port) const {
    if (auto why = policy.refusal(host, a, port, scope, own)) throw outbound_refused(*why);
}

std::vector<std::uint16_t> database_ports(const std::vector<std::string>& dsns) {
    std::vector<std::uint16_t> ports = {5432};
    for (const auto& dsn : dsns) {
        for (auto p : core::pg::dsn_ports(dsn)) {
            if (std::find(ports.begin(), ports.end(), p) == ports.end()) ports.push_back(p);
        }
    }
    return ports;
}

}  // namespace awp::http
