// awp-test-daemon: a daemon built only from core's life cycle, for the e2e tests of SIGTERM
// drain, the drain deadline, a second SIGTERM, exit 78 and sd_notify.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/event.hpp"
#include "awp/core/log.hpp"

namespace net = boost::asio;
using namespace awp::core;

namespace {
class test_service : public daemon::service {
public:
    test_service(net::io_context& ioc, double work_s)
        : stop_(ioc.get_executor()), work_s_(work_s) {}
    net::awaitable<void> run() override {
        log::info("ready");
        daemon::notify_ready();
        co_await stop_.wait();
        // In-flight work that takes work_s to finish after the stop request.
        net::steady_timer t(co_await net::this_coro::executor,
                            std::chrono::milliseconds(static_cast<long>(work_s_ * 1000)));
        co_await t.async_wait(net::use_awaitable);
        log::info("in-flight work finished");
    }
    void request_stop() override { stop_.set(); }

private:
    event stop_;
    double work_s_;
};
}  // namespace

int main(int argc, char** argv) {
    daemon::common_config common;
    double work_s = 0.2;
    daemon::cli cli("awp-test-daemon", "test daemon for the life-cycle tests");
    cli.add_common(common, false);
    cli.app().add_option("--work", work_s, "Seconds of in-flight work after SIGTERM");
    if (auto code = cli.parse(argc, argv, &common)) return *code;
    net::io_context ioc;
    test_service svc(ioc, work_s);
    return daemon::run(ioc, svc, common.drain_timeout());
}
