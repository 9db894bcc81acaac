// The api role's connection pools and per-request transactions (DESIGN §2: one transaction per
// request, role authenticated + request.jwt.claims, as PostgREST does): the gateway's own
// database and one pool per workspace whose url is a Postgres DSN.
#include <algorithm>

#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/log.hpp"
#include "gateway.hpp"
#include "registry.hpp"

namespace awp::api {

using http::http_error;
using slot = std::shared_ptr<pg::connection>;
using channel = net::experimental::concurrent_channel<void(boost::system::error_code, slot)>;

/// One database's connections: `size` slots in a channel, empty until first used. A closed
/// pool keeps handing out slots to requests already waiting but never keeps a connection.
struct db_pool::impl {
    impl(net::io_context& ioc, std::string d, std::size_t size) : dsn(std::move(d)), ch(ioc, size) {
        for (std::size_t i = 0; i < size; ++i) ch.try_send(boost::system::error_code{}, slot{});
    }
    std::string dsn;
    channel ch;
    std::atomic<bool> closed{false};
    void release(slot s) {
        if (closed) s.reset();  // disconnects here: the pool is gone
        ch.try_send(boost::system::error_code{}, std::move(s));
    }
    /// Disconnects the idle connections now; those in use go when they come back.
    void close() {
        closed = true;
        std::vector<slot> idle;
        while (ch.try_receive([&](boost::system::error_code, slot s) { idle.push_back(s); })) {
        }
        const auto n = idle.size();
        idle.clear();
        for (std::size_t i = 0; i < n; ++i) ch.try_send(boost::system::error_code{}, slot{});
    }
};

db_pool::db_pool(net::io_context& ioc, std::string dsn, std::size_t size, std::size_t max_pools)
    : ioc_(ioc),
      size_(size),
      max_pools_(std::max<std::size_t>(1, max_pools)),
      own_(std::make_shared<impl>(ioc, std::move(dsn), size)) {}

db_pool::~db_pool() {
    std::lock_guard lock(mu_);
    for (auto& [id, w] : pools_) w.pool->close();
    own_->close();
}

void db_pool::retain(std::uint64_t generation, const std::map<std::string, std::string>& live) {
    std::lock_guard lock(mu_);
    if (generation < generation_) return;  // a request that read the registry before another
    for (auto it = pools_.begin(); it != pools_.end();) {
        auto l = live.find(it->first);
        if (l == live.end() || l->second != it->second.url) {
            core::log::info("workspace pool closed",
                            {{"workspace_id", it->first},
                             {"reason", l == live.end() ? "workspace removed" : "url changed"}});
            it->second.pool->close();
            it = pools_.erase(it);
        } else {
            ++it;
        }
    }
    generation_ = generation;
}

std::shared_ptr<db_pool::impl> db_pool::pool_for(const principal& p) {
    if (!p.registry_error.empty()) {
        throw http_error(500, "registry_corrupt", p.registry_error);
    }
    if (p.workspace_id.empty()) return own_;
    if (!is_postgres_url(p.workspace_url)) {
        // A platform-URL workspace registered without its connection string (database_of).
        throw http_error(502, "workspace_needs_database_url",
                         "the workspace is a hosted platform URL registered without its "
                         "database's connection string; an operator adds it as databaseUrl "
                         "(POST /api/workspaces, docs/api-gateway.md)");
    }
    std::lock_guard lock(mu_);
    auto it = pools_.find(p.workspace_id);
    if (it != pools_.end() && it->second.url != p.workspace_url) {
        // The registry changed under us (retain has not seen it yet): the old url is stale.
        it->second.pool->close();
        pools_.erase(it);
        it = pools_.end();
    }
    if (it == pools_.end()) {
        if (pools_.size() >= max_pools_) {
            auto lru = std::min_element(
                pools_.begin(), pools_.end(),
                [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
            core::log::info("workspace pool closed",
                            {{"workspace_id", lru->first}, {"reason", "least recently used"}});
            lru->second.pool->close();
            pools_.erase(lru);
        }
        workspace_pool w;
        w.url = p.workspace_url;
        w.pool = std::make_shared<impl>(ioc_, p.workspace_url, size_);
        it = pools_.emplace(p.workspace_id, std::move(w)).first;
        core::log::info("workspace pool opened",
                        {{"workspace_id", p.workspace_id},
                         {"database", core::log::redact_dsn(p.workspace_url)}});
    }
    it->second.used = ++tick_;
    return it->second.pool;
}

db_pool::tx::tx(tx&& o) noexcept
    : pool_(std::move(o.pool_)), conn_(std::move(o.conn_)), open_(o.open_) {
    o.open_ = false;
}

db_pool::tx& db_pool::tx::operator=(tx&& o) noexcept {
    if (this != &o) {
        this->~tx();
        pool_ = std::move(o.pool_);
        conn_ = std::move(o.conn_);
        open_ = o.open_;
        o.open_ = false;
    }
    return *this;
}

db_pool::tx::~tx() {
    if (!pool_) return;
    // A transaction left open (the handler threw) cannot be rolled back from a destructor
    // without waiting: the connection is dropped instead and the pool reconnects.
    pool_->release(open_ ? slot{} : std::move(conn_));
    pool_.reset();
}

net::awaitable<pg::result> db_pool::tx::exec(std::string sql, pg::params p) {
    co_return co_await conn_->async_exec(std::move(sql), std::move(p));
}

net::awaitable<void> db_pool::tx::commit() {
    co_await conn_->async_exec("COMMIT");
    open_ = false;
}

namespace {

net::awaitable<slot> connect_slot(std::string dsn) {
    auto c = co_await pg::connection::async_connect(std::move(dsn));
    co_return std::make_shared<pg::connection>(std::move(c));
}

/// A connection to dsn, or the error that kept it away (returned, not thrown: the caller turns
/// it into an HTTP error outside any catch block, docs/coroutines.md).
net::awaitable<std::pair<slot, std::string>> try_connect(std::string dsn) {
    std::string failure;
    try {
        co_return std::make_pair(co_await connect_slot(dsn), std::string());
    } catch (const pg::connection_error& e) {
        failure = e.what();  // libpq's message, password redacted by pg::connection
    }
    co_return std::make_pair(slot{}, failure);
}

}  // namespace

net::awaitable<std::string> rls_bypass_reason(pg::connection& c) {
    // A superuser or BYPASSRLS role ignores every policy; so does the owner of a table whose
    // row-level security is not FORCEd; and a member of such a role can SET ROLE to it. The
    // one exception is service_role (BYPASSRLS, as on Supabase): the api role is its member by
    // design, for sign-in and the service-role routes, and never takes it for a user.
    auto r = co_await c.async_query(
        "SELECT CASE WHEN r.rolsuper THEN 'is a superuser' "
        "WHEN r.rolbypassrls THEN 'has BYPASSRLS' "
        "WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles m WHERE (m.rolsuper OR (m.rolbypassrls "
        "  AND m.rolname <> 'service_role')) AND m.oid <> r.oid "
        "  AND pg_catalog.pg_has_role(r.oid, m.oid, 'MEMBER')) "
        "  THEN 'is a member of a role that bypasses row-level security' "
        "WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_class t WHERE t.relnamespace = "
        "  'public'::regnamespace AND t.relkind IN ('r', 'p') AND t.relrowsecurity AND NOT "
        "  t.relforcerowsecurity AND pg_catalog.pg_has_role(r.oid, t.relowner, 'MEMBER')) "
        "  THEN 'owns tables whose row-level security it is exempt from' "
        "ELSE '' END FROM pg_catalog.pg_roles r WHERE r.rolname = current_user");
    co_return r.empty() ? std::string("is unknown") : r.get<std::string>(0, 0);
}

net::awaitable<db_pool::tx> db_pool::begin(principal p) {
    auto pool = pool_for(p);
    const bool workspace = !p.workspace_id.empty();
    tx t;
    t.pool_ = pool;
    slot s = co_await pool->ch.async_receive(net::use_awaitable);
    t.conn_ = std::move(s);  // from here the destructor returns the slot
    t.open_ = true;          // until BEGIN succeeded a failure gives back an empty slot
    bool in_tx = false;
    if (t.conn_ && t.conn_->is_open()) {
        try {
            co_await t.conn_->async_exec("BEGIN");
            in_tx = true;
        } catch (const pg::connection_error&) {
            // A connection that broke while idle (server restart): one fresh try below.
            t.conn_ = nullptr;
        }
    } else {
        t.conn_ = nullptr;
    }
    if (!t.conn_) {
        auto [c, failure] = co_await try_connect(pool->dsn);
        if (!c) {
            core::log::warn("database unreachable",
                            {{"workspace_id", p.workspace_id}, {"error", failure}});
            throw http_error(502, "database_unreachable",
                             workspace ? "the active workspace's database is unreachable"
                                       : "the database is unreachable");
        }
        if (workspace) {
            // A workspace's DSN must not escape row-level security: checked on every new
            // connection, so a registry edited by hand or a role altered later is caught too.
            auto reason = co_await rls_bypass_reason(*c);
            if (!reason.empty()) {
                core::log::error("workspace role bypasses row-level security",
                                 {{"workspace_id", p.workspace_id}, {"role", reason}});
                throw http_error(502, "workspace_role_unsafe",
                                 "the active workspace's database role " + reason +
                                     "; an operator must register it with the api role");
            }
        }
        t.conn_ = std::move(c);
    }
    if (!in_tx) co_await t.conn_->async_exec("BEGIN");
    if (p.who == principal::kind::service) {
        co_await t.conn_->async_query("SELECT set_config('role', 'service_role', true)");
    } else {
        co_await t.conn_->async_query(
            "SELECT set_config('role', 'authenticated', true), "
            "set_config('request.jwt.claims', $1, true)",
            p.claims_json);
    }
    co_return t;
}

}  // namespace awp::api
