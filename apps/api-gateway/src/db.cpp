// The api role's connection pools and per-request transactions (DESIGN §2: one transaction per
// request, role authenticated + request.jwt.claims, as PostgREST does): the gateway's own
// database and one pool per workspace whose url is a Postgres DSN.
#include <algorithm>
#include <exception>

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
    std::vector<std::string> closed;
    {
        std::lock_guard lock(mu_);
        if (generation < generation_) return;  // a request that read the registry before another
        for (auto it = pools_.begin(); it != pools_.end();) {
            auto l = live.find(it->first);
            if (l == live.end() || l->second != it->second.url) {
                core::log::info(
                    "workspace pool closed",
                    {{"workspace_id", it->first},
                     {"reason", l == live.end() ? "workspace removed" : "url changed"}});
                it->second.pool->close();
                closed.push_back(it->first);
                it = pools_.erase(it);
            } else {
                ++it;
            }
        }
        generation_ = generation;
    }
    for (const auto& id : closed) on_closed(id);
}

void db_pool::on_closed(const std::string& workspace_id) const {
    if (on_workspace_closed) on_workspace_closed(workspace_id);
}

std::shared_ptr<db_pool::impl> db_pool::pool_for(const principal& p, bool background) {
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
    std::vector<std::string> closed;
    struct notify_closed {  // after the lock: the listener may look at the pools
        const db_pool& d;
        std::vector<std::string>& ids;
        ~notify_closed() {
            for (const auto& id : ids) d.on_closed(id);
        }
    } after{*this, closed};
    std::lock_guard lock(mu_);
    auto it = pools_.find(p.workspace_id);
    if (it != pools_.end() && it->second.url != p.workspace_url) {
        // The registry changed under us (retain has not seen it yet): the old url is stale.
        it->second.pool->close();
        closed.push_back(it->first);
        pools_.erase(it);
        it = pools_.end();
    }
    if (it == pools_.end() && background) {
        // A background read (sessions.hpp) neither opens a workspace's pool nor keeps it open.
        throw core::error("the workspace's pool is closed");
    }
    if (it == pools_.end()) {
        if (pools_.size() >= max_pools_) {
            auto lru = std::min_element(
                pools_.begin(), pools_.end(),
                [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
            core::log::info("workspace pool closed",
                            {{"workspace_id", lru->first}, {"reason", "least recently used"}});
            lru->second.pool->close();
            closed.push_back(lru->first);
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
    if (!background) it->second.used = ++tick_;
    return it->second.pool;
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

namespace {

/// A new connection to dsn, checked for a workspace; 502 database_unreachable or
/// workspace_role_unsafe.
net::awaitable<slot> open_connection(std::string dsn, std::string workspace_id) {
    auto [c, failure] = co_await try_connect(dsn);
    if (!c) {
        core::log::warn("database unreachable",
                        {{"workspace_id", workspace_id}, {"error", failure}});
        throw http_error(502, "database_unreachable",
                         !workspace_id.empty() ? "the active workspace's database is unreachable"
                                               : "the database is unreachable");
    }
    if (!workspace_id.empty()) {
        // A workspace's DSN must not escape row-level security: checked on every new
        // connection, so a registry edited by hand or a role altered later is caught too.
        auto reason = co_await rls_bypass_reason(*c);
        if (!reason.empty()) {
            core::log::error("workspace role bypasses row-level security",
                             {{"workspace_id", workspace_id}, {"role", reason}});
            throw http_error(502, "workspace_role_unsafe",
                             "the active workspace's database role " + reason +
                                 "; an operator must register it with the api role");
        }
    }
    co_return c;
}

}  // namespace

db_pool::tx::tx(tx&& o) noexcept
    : pool_(std::move(o.pool_)),
      conn_(std::move(o.conn_)),
      open_(o.open_),
      pending_(o.pending_),
      pooled_(o.pooled_),
      workspace_id_(std::move(o.workspace_id_)),
      setup_(std::move(o.setup_)) {
    o.open_ = false;
    o.pending_ = false;
}

db_pool::tx& db_pool::tx::operator=(tx&& o) noexcept {
    if (this != &o) {
        if (pool_) pool_->release(open_ ? slot{} : std::move(conn_));  // as ~tx does
        pool_ = std::move(o.pool_);
        conn_ = std::move(o.conn_);
        open_ = o.open_;
        pending_ = o.pending_;
        pooled_ = o.pooled_;
        workspace_id_ = std::move(o.workspace_id_);
        setup_ = std::move(o.setup_);
        o.open_ = false;
        o.pending_ = false;
    }
    return *this;
}

db_pool::tx::~tx() {
    if (!pool_) return;
    // A transaction left open (the handler threw) cannot be rolled back from a destructor
    // without waiting: the connection is dropped instead and the pool reconnects. One that
    // never sent anything, or whose implicit transaction ended at its Sync, is clean.
    pool_->release(open_ ? slot{} : std::move(conn_));
    pool_.reset();
}

net::awaitable<std::vector<pg::result>> db_pool::tx::send(
    std::vector<pg::connection::pipelined> statements) {
    open_ = true;  // until the Sync's answer: a broken connection is dropped, never reused
    std::size_t done = 0;
    std::exception_ptr sql_failure;
    try {
        // A copy: the same statements go again on a fresh connection if this one was stale.
        // (A named local, not a temporary inside the co_await: GCC 12 destroys such a
        // temporary twice.)
        std::vector<pg::connection::pipelined> first;
        if (pooled_)
            first = statements;
        else
            first = std::move(statements);
        auto r = co_await conn_->async_pipeline(std::move(first), &done);
        co_return r;
    } catch (const pg::sql_error&) {
        sql_failure = std::current_exception();
    } catch (const pg::connection_error&) {
        // Idle in the pool, broken since (server restart, terminated backend), and the server
        // finished none of the statements: nothing ran, so the pipeline is sent again once.
        if (!pooled_ || done > 0) throw;
    }
    if (sql_failure) std::rethrow_exception(sql_failure);
    pooled_ = false;
    conn_ = co_await open_connection(pool_->dsn, workspace_id_);
    co_return co_await conn_->async_pipeline(std::move(statements));
}

net::awaitable<pg::result> db_pool::tx::exec(std::string sql, pg::params p) {
    if (!pending_) co_return co_await conn_->async_exec(std::move(sql), std::move(p));
    // The first statement: BEGIN, role and claims, and it, in one round trip.
    std::vector<pg::connection::pipelined> v;
    v.reserve(3);
    v.push_back({"BEGIN", {}});
    v.push_back(setup_);
    v.push_back({std::move(sql), std::move(p)});
    pending_ = false;
    auto r = co_await send(std::move(v));
    pooled_ = false;
    co_return std::move(r.back());  // open_ stays true until commit()
}

net::awaitable<pg::result> db_pool::tx::exec_and_commit(std::string sql, pg::params p) {
    std::vector<pg::connection::pipelined> v;
    v.reserve(2);
    if (pending_) {
        // No BEGIN: the pipeline's Sync commits it, or rolls it back on an error; either way
        // role and claims end with it and the connection is idle again.
        pending_ = false;
        v.push_back(setup_);
        v.push_back({std::move(sql), std::move(p)});
        std::exception_ptr sql_failure;
        try {
            auto r = co_await send(std::move(v));
            open_ = false;
            co_return std::move(r.back());
        } catch (const pg::sql_error&) {
            sql_failure = std::current_exception();
        }
        open_ = false;  // rolled back at the Sync: the connection is clean
        std::rethrow_exception(sql_failure);
    }
    v.push_back({std::move(sql), std::move(p)});
    v.push_back({"COMMIT", {}});
    auto r = co_await conn_->async_pipeline(std::move(v));  // a failure leaves open_: dropped
    open_ = false;
    co_return std::move(r.front());
}

net::awaitable<void> db_pool::tx::commit() {
    if (pending_) {  // nothing ran: no transaction was ever opened
        pending_ = false;
        co_return;
    }
    if (!open_) co_return;  // query_and_commit ended it already
    co_await conn_->async_exec("COMMIT");
    open_ = false;
}

net::awaitable<std::vector<pg::result>> db_pool::tx::run(
    std::vector<pg::connection::pipelined> statements, bool keep_open) {
    std::vector<pg::connection::pipelined> v;
    v.reserve(statements.size() + 2);
    const std::size_t skip = keep_open ? 2 : 1;
    if (keep_open) v.push_back({"BEGIN", {}});
    v.push_back(setup_);
    for (auto& s : statements) v.push_back(std::move(s));
    pending_ = false;
    std::exception_ptr sql_failure;
    std::vector<pg::result> r;
    try {
        r = co_await send(std::move(v));
    } catch (const pg::sql_error&) {
        sql_failure = std::current_exception();
    }
    pooled_ = false;
    if (sql_failure) {
        // An implicit transaction was rolled back at the Sync; an explicit one is aborted and
        // is ended here (a connection that cannot even do that is dropped: open_ stays true).
        if (keep_open) {
            try {
                co_await conn_->async_exec("ROLLBACK");
                open_ = false;
            } catch (const std::exception&) {
            }
        } else {
            open_ = false;
        }
        std::rethrow_exception(sql_failure);
    }
    open_ = keep_open;
    r.erase(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(skip));
    co_return r;
}

net::awaitable<void> db_pool::tx::rollback() {
    if (!open_ || !conn_) co_return;
    co_await conn_->async_exec("ROLLBACK");
    open_ = false;
}

net::awaitable<db_pool::tx> db_pool::begin_own(pg::connection::pipelined setup) {
    principal own;
    own.who = principal::kind::service;
    auto t = co_await begin(std::move(own));
    t.setup_ = std::move(setup);
    co_return t;
}

net::awaitable<db_pool::tx> db_pool::begin(principal p, bool background) {
    auto pool = pool_for(p, background);
    tx t;
    t.pool_ = pool;
    slot s = co_await pool->ch.async_receive(net::use_awaitable);
    t.conn_ = std::move(s);  // from here the destructor returns the slot
    t.workspace_id_ = p.workspace_id;
    if (t.conn_ && t.conn_->is_open()) {
        t.pooled_ = true;  // checked by its first statement (tx::send)
    } else {
        t.conn_ = nullptr;
        t.conn_ = co_await open_connection(pool->dsn, p.workspace_id);
    }
    if (p.who == principal::kind::service) {
        t.setup_ = {"SELECT set_config('role', 'service_role', true)", {}};
    } else {
        t.setup_ = {
            "SELECT set_config('role', 'authenticated', true), "
            "set_config('request.jwt.claims', $1, true)",
            {pg::param(std::move(p.claims_json))}};
    }
    t.pending_ = true;
    co_return t;
}

}  // namespace awp::api
