// Which gateway a daemon serves: GATEWAY_ID (the gateway's id or its slug) resolved once, at
// start, to the gateway's id and tenant; the daemon passes that id from then on, so nothing
// another tenant does later (a gateway registered under the same name, a rename) changes which
// rows it serves (docs/security.md, "Gateways and their daemons").
#pragma once

#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "awp/core/pg.hpp"

namespace awp::core::gateway {

/// The gateway a daemon serves.
struct ref {
    std::string id;         ///< uuid, lowercase canonical form
    std::string slug;       ///< for logs only: a slug can change, the id cannot
    std::string tenant_id;  ///< uuid
};

/// $1 GATEWAY_ID (id or slug), $2 tenant id or NULL. One row, or AW003 (not found, or not in
/// that tenant) / AW004 (empty). The rule itself is public.awp_resolve_gateway (sql/0018), the
/// one behind every p_gateway_slug parameter.
inline constexpr const char* kResolveSql =
    "SELECT g.id::text, g.slug, g.tenant_id::text FROM public.gateways g "
    "WHERE g.id = public.awp_resolve_gateway($1, $2::uuid)";

/// Resolves GATEWAY_ID (and TENANT_ID when set) once. Throws config_error when the database
/// answers that there is no such gateway (the daemon exits 78), or when TENANT_ID is not a
/// uuid; lets pg::connection_error through so the caller retries while the database is away.
boost::asio::awaitable<ref> resolve(pg::session& db, const std::string& id_or_slug,
                                    const std::optional<std::string>& tenant_id);

/// resolve(), retried every second while the database is away (logged), until it answers or
/// `stopping` turns true (then nullopt). What every gateway daemon does at start.
boost::asio::awaitable<std::optional<ref>> resolve_at_start(
    pg::session& db, const std::string& id_or_slug, const std::optional<std::string>& tenant_id,
    const bool& stopping);

}  // namespace awp::core::gateway
