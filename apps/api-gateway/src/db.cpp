// The api role's connection pool and per-request transactions (DESIGN §2: one transaction per
// request, role authenticated + request.jwt.claims, as PostgREST does).
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/log.hpp"
#include "gateway.hpp"

namespace awp::api {

using slot = std::shared_ptr<pg::connection>;
using channel = net::experimental::concurrent_channel<void(boost::system::error_code, slot)>;

struct db_pool::impl {
    impl(net::io_context& ioc, std::string d, std::size_t size) : dsn(std::move(d)), ch(ioc, size) {
        for (std::size_t i = 0; i < size; ++i) ch.try_send(boost::system::error_code{}, slot{});
    }
    std::string dsn;
    channel ch;
    void release(slot s) { ch.try_send(boost::system::error_code{}, std::move(s)); }
};

db_pool::db_pool(net::io_context& ioc, std::string dsn, std::size_t size)
    : impl_(std::make_shared<impl>(ioc, std::move(dsn), size)) {}

db_pool::~db_pool() = default;

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

}  // namespace

net::awaitable<db_pool::tx> db_pool::begin(principal p) {
    tx t;
    t.pool_ = impl_;
    slot s = co_await impl_->ch.async_receive(net::use_awaitable);
    t.conn_ = std::move(s);  // from here the destructor returns the slot
    if (!t.conn_ || !t.conn_->is_open()) {
        t.conn_.reset();
        t.open_ = true;  // a failure below gives back an empty slot
        t.conn_ = co_await connect_slot(impl_->dsn);
        t.open_ = false;
    }
    t.open_ = true;
    try {
        co_await t.conn_->async_exec("BEGIN");
    } catch (const pg::connection_error&) {
        // A connection that broke while idle (server restart): one fresh try.
        t.conn_ = nullptr;
    }
    if (!t.conn_) {
        t.conn_ = co_await connect_slot(impl_->dsn);
        co_await t.conn_->async_exec("BEGIN");
    }
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
