// The interactive process (awp/core/process.hpp): a child on a pseudo-terminal, its output read
// as it comes, input written to it, the same ceiling and reaping as every run
// (process_internal.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>

#include "awp/core/process.hpp"
#include "process_internal.hpp"

namespace awp::core::process {

using namespace detail;
using namespace boost::asio::experimental::awaitable_operators;

struct interactive_process::state : session {
    state(net::any_io_executor executor, pty_child spawned, const spawn_options& options)
        : session(executor, spawned.pid, options.kill_grace),
          master(executor),
          transcript(options.max_output),
          unmatched_cap(std::max<std::size_t>(options.max_output, 64 * 1024)),
          started(steady::now()) {
        master.assign(spawned.master.release());
    }

    net::posix::stream_descriptor master;
    tail_buffer transcript;
    std::string unmatched;  // output async_read_until has not consumed yet
    std::size_t unmatched_cap;
    steady::time_point started;
};

interactive_process::interactive_process(net::any_io_executor executor,
                                         const spawn_options& options, terminal_options terminal)
    : state_(std::make_shared<state>(executor, spawn_pty(options, terminal), options)) {
    state_->arm_ceiling(options.timeout);
}

interactive_process::~interactive_process() {
    if (!state_) return;
    state_->child.abandon();
    boost::system::error_code ignored;
    state_->master.close(ignored);  // pending reads complete with operation_aborted
}

interactive_process::interactive_process(interactive_process&&) noexcept = default;

interactive_process& interactive_process::operator=(interactive_process&& other) noexcept {
    if (this != &other) {
        interactive_process dropped(std::move(*this));
        state_ = std::move(other.state_);
    }
    return *this;
}

pid_t interactive_process::pid() const noexcept { return state_->child.pid(); }

net::awaitable<std::string> interactive_process::async_read_some() {
    auto s = state_;  // the frame keeps the state alive if the handle goes away meanwhile
    std::string chunk(4096, '\0');
    while (s->master.is_open()) {
        auto [ec, n] = co_await s->master.async_read_some(net::buffer(chunk),
                                                          net::as_tuple(net::use_awaitable));
        if (ec == net::error::operation_aborted) throw boost::system::system_error(ec);
        if (ec) s->master.close();  // EIO: every holder of the terminal is gone
        if (n > 0) {
            chunk.resize(n);
            s->transcript.append(chunk);
            co_return chunk;
        }
    }
    co_return std::string{};
}

net::awaitable<std::optional<std::vector<std::string>>> interactive_process::async_read_until(
    std::regex pattern) {
    auto s = state_;
    for (;;) {
        std::smatch match;
        if (std::regex_search(s->unmatched, match, pattern)) {
            std::vector<std::string> groups(match.begin(), match.end());
            s->unmatched.erase(0, static_cast<std::size_t>(match.position(0) + match.length(0)));
            co_return groups;
        }
        auto chunk = co_await async_read_some();
        if (chunk.empty()) co_return std::nullopt;
        s->unmatched += chunk;
        if (s->unmatched.size() > s->unmatched_cap) {
            s->unmatched.erase(0, s->unmatched.size() - s->unmatched_cap);
        }
    }
}

net::awaitable<bool> interactive_process::async_write(std::string data) {
    auto s = state_;
    co_return co_await write_all(s->master, data);
}

void interactive_process::terminate() { state_->terminate(); }

net::awaitable<process_result> interactive_process::async_wait() {
    auto s = state_;
    std::exception_ptr failure;
    try {
        co_await (drain(s->master, s->transcript) || s->wait_exit_then_linger());
        co_await throw_if_cancelled_outside();
        co_await s->wait_exit();
    } catch (...) {
        failure = std::current_exception();
    }
    if (failure) {
        const auto cs = co_await net::this_coro::cancellation_state;
        const bool cancelled = cs.cancelled() != net::cancellation_type::none;
        co_await net::this_coro::reset_cancellation_state();
        co_await abort_run(s, failure, cancelled);
    }

    process_result result;
    s->fill(result, s->started);
    result.out_bytes = s->transcript.total();
    result.out = s->transcript.take();
    co_return result;
}

}  // namespace awp::core::process
