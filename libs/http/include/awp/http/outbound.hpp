// The outbound address policy: which addresses a daemon may connect to on a tenant's behalf.
// One classifier (every IPv4/IPv6 range that is not the public internet, with the IPv4 forms
// hidden in IPv6 addresses unwrapped), one operator allow list (API_OUTBOUND_ALLOW) and the
// database ports, checked on the resolved address that is then connected to (no second lookup,
// so a name cannot resolve to a checked address first and a forbidden one next).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "awp/core/error.hpp"

namespace awp::http {

namespace net = boost::asio;

/// What an address is, as far as reaching it goes.
enum class address_class {
    global,        // the public internet
    loopback,      // 127.0.0.0/8, ::1
    private_net,   // 10/8, 172.16/12, 192.168/16, 100.64/10, 198.18/15, 192.0.0/24, fc00::/7,
                   // fec0::/10
    link_local,    // 169.254.0.0/16, fe80::/10 (cloud metadata services live here)
    unspecified,   // 0.0.0.0, ::
    this_network,  // 0.0.0.0/8 other than 0.0.0.0
    multicast,     // 224.0.0.0/4, ff00::/8
    broadcast,     // 255.255.255.255
    reserved,      // 240.0.0.0/4, documentation ranges, 100::/64 discard, 2001:db8::/32
};

/// The class of an address. IPv4 addresses inside IPv6 ones (mapped ::ffff:a.b.c.d, compatible
/// ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) are classified as the IPv4 address they carry.
[[nodiscard]] address_class classify(const net::ip::address& a);
/// "a link-local address (cloud metadata)", "a loopback address", ... for error messages.
[[nodiscard]] std::string_view describe(address_class c);
/// Never reachable, whatever the operator allows: link-local, unspecified, this-network,
/// multicast, broadcast, reserved.
[[nodiscard]] bool always_refused(address_class c);

/// Where a connection may go.
enum class outbound_scope {
    /// Calls on a tenant's behalf to the internet (source connectors, OAuth token endpoints):
    /// global addresses; loopback and private ones only where the operator allows them.
    internet,
    /// The agent's own gateway host (its browser's DevTools endpoint): loopback, or one of the
    /// host's registered addresses; anything else only where the operator allows it.
    own_host,
};

/// The policy a gateway runs with.
class outbound_policy {
public:
    outbound_policy() = default;
    /// `allow`: comma list of CIDRs ("10.1.0.0/16", "fd00::/8"), addresses, host names, each
    /// optionally with ":port" ("127.0.0.1:9222", "[::1]:8080", "connector.internal:443").
    /// `database_ports`: refused on every host. Throws core::config_error naming a bad entry.
    outbound_policy(std::string_view allow, std::vector<std::uint16_t> database_ports);

    /// Why `address:port` (reached as `host`, the name in the URL) may not be connected to;
    /// nullopt when it may. `own` are the addresses of the agent's own gateway host
    /// (outbound_scope::own_host). Checks, in order: always-refused classes, database ports,
    /// the operator's allow list, then the scope.
    [[nodiscard]] std::optional<std::string> refusal(
        std::string_view host, const net::ip::address& address, std::uint16_t port,
        outbound_scope scope, const std::vector<net::ip::address>& own = {}) const;

    /// The policy plus extra refused ports (e.g. the databases of workspaces added later).
    [[nodiscard]] outbound_policy with_database_ports(const std::vector<std::uint16_t>& more) const;
    [[nodiscard]] const std::vector<std::uint16_t>& database_ports() const noexcept {
        return database_ports_;
    }

    struct entry {
        std::optional<net::ip::address> network;  // a CIDR or one address
        unsigned prefix = 0;
        std::string host;  // a host name (lower case) instead of an address
        std::optional<std::uint16_t> port;
    };

private:
    [[nodiscard]] bool allowed_by_operator(std::string_view host, const net::ip::address& a,
                                           std::uint16_t port) const;
    std::vector<entry> allow_;
    std::vector<std::uint16_t> database_ports_;
};

/// The ports the policy refuses on every host for a daemon whose databases are `dsns`: 5432
/// (a database elsewhere on the network listens there by default) and every port of each DSN.
[[nodiscard]] std::vector<std::uint16_t> database_ports(const std::vector<std::string>& dsns);

/// The outbound policy refused an address: 403 outbound_refused for a gateway.
class outbound_refused : public core::error {
public:
    using core::error::error;
};

/// A checker for client_request::check: refuses through `policy` with `scope` and `own`.
struct outbound_check {
    outbound_policy policy;
    outbound_scope scope = outbound_scope::internet;
    std::vector<net::ip::address> own;
    /// Throws outbound_refused when the address may not be reached.
    void operator()(std::string_view host, const net::ip::address& a, std::uint16_t port) const;
};

}  // namespace awp::http
