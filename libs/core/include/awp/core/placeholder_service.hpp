// A service that only connects to Postgres, reports ready and waits to be stopped: what a
// daemon runs until its own issue lands.
#pragma once

#include <string>

#include "awp/core/daemon.hpp"
#include "awp/core/event.hpp"

namespace awp::core::daemon {

class placeholder_service : public service {
public:
    placeholder_service(net::io_context& ioc, std::string database_url)
        : ioc_(ioc), database_url_(std::move(database_url)), stop_(ioc.get_executor()) {}
    net::awaitable<void> run() override;
    void request_stop() override { stop_.set(); }

private:
    net::io_context& ioc_;
    std::string database_url_;
    event stop_;
};

}  // namespace awp::core::daemon
