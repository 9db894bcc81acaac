// Connect, say ready, wait for SIGTERM.
#include "awp/core/placeholder_service.hpp"

#include "awp/core/log.hpp"
#include "awp/core/pg.hpp"

namespace awp::core::daemon {

net::awaitable<void> placeholder_service::run() {
    pg::session db(database_url_);
    pg::connection* c = co_await db.get();
    auto r = co_await c->async_exec("SELECT current_user, version()");
    log::info("ready", {{"db_user", r.get<std::string>(0, 0)}, {"placeholder", true}});
    notify_ready();
    co_await stop_.wait();
}

}  // namespace awp::core::daemon
