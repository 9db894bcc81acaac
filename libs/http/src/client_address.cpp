// The client address behind trusted proxies (client_address.hpp).
#include "awp/http/client_address.hpp"

#include <array>
#include <cctype>
#include <charconv>

#include "awp/core/error.hpp"

namespace awp::http {

namespace {

/// IPv4 inside IPv6 (::ffff:a.b.c.d) as the IPv4 address: one client, one key.
net::ip::address unmapped(const net::ip::address& a) {
    if (a.is_v6() && a.to_v6().is_v4_mapped()) {
        return net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6());
    }
    return a;
}

bool in(const net::ip::address& a, const net::ip::address& network, unsigned prefix) {
    if (a.is_v4() != network.is_v4()) return false;
    if (a.is_v4()) {
        const auto mask = prefix == 0 ? 0U : ~std::uint32_t{0} << (32 - prefix);
        return (a.to_v4().to_uint() & mask) == (network.to_v4().to_uint() & mask);
    }
    const auto x = a.to_v6().to_bytes();
    const auto y = network.to_v6().to_bytes();
    for (unsigned bit = 0; bit < prefix; ++bit) {
        const unsigned mask = 0x80U >> (bit % 8);
        if ((x[bit / 8] & mask) != (y[bit / 8] & mask)) return false;
    }
    return true;
}

}  // namespace

std::optional<net::ip::address> parse_address(std::string_view text) {
    if (text.empty() || text.size() > 45) return std::nullopt;
    boost::system::error_code ec;
    const auto a = net::ip::make_address(std::string(text), ec);
    if (ec) return std::nullopt;
    if (a.is_v6() && a.to_v6().scope_id() != 0) return std::nullopt;
    return unmapped(a);
}

trusted_proxies::trusted_proxies(std::string_view list) {
    while (!list.empty()) {
        const auto comma = list.find(',');
        const auto item = trim_ows(list.substr(0, comma));
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        if (item.empty()) continue;
        auto bad = [&](std::string_view why) {
            return core::config_error("API_TRUSTED_PROXIES: '" + std::string(item) + "' " +
                                      std::string(why));
        };
        const auto slash = item.find('/');
        const auto addr = parse_address(item.substr(0, slash));
        if (!addr) throw bad("is not an IP address or CIDR");
        const unsigned max = addr->is_v4() ? 32 : 128;
        unsigned prefix = max;
        if (slash != std::string_view::npos) {
            const auto p = item.substr(slash + 1);
            const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), prefix);
            if (p.empty() || ec != std::errc{} || end != p.data() + p.size() || prefix > max) {
                throw bad("has a bad prefix length");
            }
            // "::ffff:10.0.0.0/104" names IPv4 addresses: parse_address made it IPv4 already.
        }
        nets_.push_back({*addr, prefix});
    }
}

bool trusted_proxies::contains(const net::ip::address& a) const noexcept {
    const auto x = unmapped(a);
    for (const auto& n : nets_) {
        if (in(x, n.network, n.prefix)) return true;
    }
    return false;
}

std::string client_address(std::string_view peer, const headers& h,
                           const trusted_proxies& trusted) {
    const auto p = parse_address(peer);
    if (!p) return std::string(peer);
    net::ip::address client = *p;
    if (trusted.empty() || !trusted.contains(client)) return client.to_string();
    // Every X-Forwarded-For field, in order, as one list; read from its right end.
    std::vector<std::string_view> hops;
    for (const auto& [name, value] : h.fields()) {
        if (name.size() != 15) continue;
        std::string lower = name;
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower != "x-forwarded-for") continue;
        std::string_view v = value;
        while (true) {
            const auto comma = v.find(',');
            hops.push_back(trim_ows(v.substr(0, comma)));
            if (comma == std::string_view::npos) break;
            v.remove_prefix(comma + 1);
        }
    }
    for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
        const auto hop = parse_address(*it);
        if (!hop) break;  // a trusted proxy would have written an address: stop at that proxy
        client = *hop;
        if (!trusted.contains(client)) break;
    }
    return client.to_string();
}

}  // namespace awp::http
