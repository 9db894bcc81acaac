// The client's address of a request: the TCP peer, or, when the peer is a proxy the operator
// trusts (API_TRUSTED_PROXIES), the address that proxy saw, from X-Forwarded-For. One function,
// used once by the server for every request (request::remote), so the sign-in limiter, the rate
// limits, the session records and the access log all key on the same address.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "awp/http/message.hpp"

namespace awp::http {

namespace net = boost::asio;

/// The proxies whose X-Forwarded-For is believed: CIDRs and single addresses, IPv4 and IPv6.
class trusted_proxies {
public:
    trusted_proxies() = default;
    /// A comma list ("127.0.0.1, 10.0.0.0/8, fd00::/8"); blanks around entries are ignored.
    /// Throws core::config_error naming a bad entry.
    explicit trusted_proxies(std::string_view list);
    [[nodiscard]] bool empty() const noexcept { return nets_.empty(); }
    /// An IPv4 address inside IPv6 (::ffff:a.b.c.d) is matched as the IPv4 address.
    [[nodiscard]] bool contains(const net::ip::address& a) const noexcept;

private:
    struct cidr {
        net::ip::address network;
        unsigned prefix = 0;
    };
    std::vector<cidr> nets_;
};

/// An address as awp prints it: IPv4-mapped IPv6 as IPv4, IPv6 compressed; nullopt when `text`
/// is not an IP address (a port, brackets or a zone are not accepted).
[[nodiscard]] std::optional<net::ip::address> parse_address(std::string_view text);

/// The client address of a request from TCP peer `peer`: the peer itself, unless it is a
/// trusted proxy; then X-Forwarded-For (every such header, in order, as one comma list) is read
/// from the right, one hop at a time, each believed only while the hop that appended it is
/// trusted: the answer is the first address that is not a trusted proxy, or the leftmost when
/// every one is. A malformed entry ends the walk at the trusted hop that forwarded it (what an
/// untrusted party wrote further left is never reached). Without trusted proxies the header is
/// ignored whatever it says.
[[nodiscard]] std::string client_address(std::string_view peer, const headers& h,
                                         const trusted_proxies& trusted);

}  // namespace awp::http
