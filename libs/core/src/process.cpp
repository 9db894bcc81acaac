// Child processes (awp/core/process.hpp): the blocking run and the asynchronous run of a child
// on pipes, with tails of the output and group-wide kills at the ceiling. The spawn path is
// process_spawn.cpp, the interactive process (a terminal) process_interactive.cpp; the
// internals they share (every child reaped, every fd closed, the group killed) are
// process_internal.hpp, private to awp::core.
#include "awp/core/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <string_view>
#include <thread>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

extern char** environ;  // NOLINT: POSIX declares it nowhere in a header

#include "process_internal.hpp"

namespace awp::core::process {

using namespace boost::asio::experimental::awaitable_operators;

namespace detail {

// ---- blocking run ----

// Reads what is available; false once the stream is over (EOF or an error).
bool read_into(int fd, tail_buffer& tail, std::array<char, kReadChunk>& buffer) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n > 0) {
        tail.append(buffer.data(), static_cast<std::size_t>(n));
        return true;
    }
    return n < 0 && (errno == EAGAIN || errno == EINTR);
}

int poll_timeout_ms(std::optional<steady::time_point> wake, steady::time_point now) {
    if (!wake) return -1;
    if (*wake <= now) return 0;
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*wake - now).count();
    return static_cast<int>(std::min<std::int64_t>(ms, INT_MAX));
}

// ---- asynchronous run ----

net::awaitable<void> drain(net::posix::stream_descriptor& stream, tail_buffer& tail) {
    std::array<char, kReadChunk> buffer;
    while (stream.is_open()) {
        auto [ec, n] =
            co_await stream.async_read_some(net::buffer(buffer), net::as_tuple(net::use_awaitable));
        tail.append(buffer.data(), n);
        if (ec == net::error::operation_aborted) throw boost::system::system_error(ec);
        if (ec) stream.close();  // EOF; EIO from a terminal whose other side is gone
    }
}

// Writes everything, trying the write first and waiting only when the pipe is full.
net::awaitable<bool> write_all(net::posix::stream_descriptor& stream, std::string_view data) {
    while (!data.empty()) {
        if (!stream.is_open()) co_return false;
        const ssize_t n = write_no_sigpipe(stream.native_handle(), data.data(), data.size());
        if (n >= 0) {
            data.remove_prefix(static_cast<std::size_t>(n));
            continue;
        }
        if (errno != EAGAIN) co_return false;  // EPIPE: the reader is gone; EIO: hung up
        auto [ec] = co_await stream.async_wait(net::posix::descriptor_base::wait_write,
                                               net::as_tuple(net::use_awaitable));
        if (ec == net::error::operation_aborted) throw boost::system::system_error(ec);
        if (ec) co_return false;
    }
    co_return true;
}

net::awaitable<void> throw_if_cancelled_outside() {
    const auto cs = co_await net::this_coro::cancellation_state;
    if (cs.cancelled() != net::cancellation_type::none) {
        throw boost::system::system_error(net::error::operation_aborted);
    }
}

net::awaitable<void> feed(net::posix::stream_descriptor& stream, std::string_view data) {
    if (!stream.is_open()) co_return;
    co_await write_all(stream, data);
    stream.close();  // EOF for the child
}

// After a failure or cancellation: kill the group, reap the child, then report. The caller has
// already reset its cancellation state: with a cancelled state, co_await on any awaitable
// (this one included) throws before it starts.
net::awaitable<void> abort_run(std::shared_ptr<session> s, std::exception_ptr failure,
                               bool cancelled) {
    s->terminate();
    try {
        co_await s->wait_exit();
    } catch (...) {
        // Cancelled again: the child_guard kills and reaps in the background instead.
    }
    if (failure && !cancelled) std::rethrow_exception(failure);
    throw boost::system::system_error(net::error::operation_aborted);
}

}  // namespace detail

using namespace detail;

process_result run(const spawn_options& options) {
    const auto started = steady::now();
    auto io = spawn_piped(options);
    child_guard child(io.pid);
    unique_fd pidfd = open_pidfd(io.pid);
    tail_buffer out_tail(options.max_output);
    tail_buffer err_tail(options.max_output);
    std::string_view input = options.stdin_data ? std::string_view(*options.stdin_data) : "";
    if (io.in && input.empty()) io.in.reset();
    for (const auto* fd : {&io.in, &io.out, &io.err}) {
        if (*fd) set_nonblocking(fd->get());
    }

    std::optional<steady::time_point> deadline;
    if (options.timeout > 0ms) deadline = started + options.timeout;
    enum class phase { running, terminated, killed } stage = phase::running;
    steady::time_point kill_at{};
    steady::time_point linger_until{};
    bool timed_out = false;
    std::array<char, kReadChunk> buffer;

    for (;;) {
        auto now = steady::now();
        if (!child.reaped()) {
            if (stage == phase::running && deadline && now >= *deadline) {
                timed_out = true;
                child.signal_group(SIGTERM);
                stage = phase::terminated;
                kill_at = now + options.kill_grace;
            } else if (stage == phase::terminated && now >= kill_at) {
                child.signal_group(SIGKILL);
                stage = phase::killed;
            }
        }
        const bool streams_open = io.in || io.out || io.err;
        if (child.reaped() && (!streams_open || now >= linger_until)) break;

        std::optional<steady::time_point> wake;
        const auto wake_by = [&wake](steady::time_point t) {
            if (!wake || t < *wake) wake = t;
        };
        if (child.reaped()) {
            wake_by(linger_until);
        } else {
            if (stage == phase::running && deadline) wake_by(*deadline);
            if (stage == phase::terminated) wake_by(kill_at);
            if (!pidfd) wake_by(now + kReapPollInterval);
        }

        std::array<pollfd, 4> fds{};
        nfds_t count = 0;
        const auto watch = [&](const unique_fd& fd, short events) -> pollfd* {
            if (!fd) return nullptr;
            fds[count] = pollfd{fd.get(), events, 0};
            return &fds[count++];
        };
        pollfd* out_poll = watch(io.out, POLLIN);
        pollfd* err_poll = watch(io.err, POLLIN);
        pollfd* in_poll = watch(io.in, POLLOUT);
        pollfd* exit_poll = child.reaped() ? nullptr : watch(pidfd, POLLIN);

        if (::poll(fds.data(), count, poll_timeout_ms(wake, now)) < 0) {
            if (errno == EINTR) continue;
            throw core::error("poll on a child's pipes failed: " + errno_text(errno));
        }
        if (out_poll && out_poll->revents != 0 && !read_into(io.out.get(), out_tail, buffer)) {
            io.out.reset();
        }
        if (err_poll && err_poll->revents != 0 && !read_into(io.err.get(), err_tail, buffer)) {
            io.err.reset();
        }
        if (in_poll && in_poll->revents != 0) {
            const ssize_t n = write_no_sigpipe(io.in.get(), input.data(), input.size());
            if (n >= 0) input.remove_prefix(static_cast<std::size_t>(n));
            if ((n < 0 && errno != EAGAIN) || input.empty()) io.in.reset();
        }
        if (!child.reaped() && (!pidfd || (exit_poll && exit_poll->revents != 0))) {
            if (child.try_reap()) {
                linger_until = steady::now() + options.kill_grace;
                pidfd.reset();
            }
        }
    }

    process_result result;
    child.fill(result);
    result.timed_out = timed_out;
    result.duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(child.reaped_at() - started);
    result.out_bytes = out_tail.total();
    result.err_bytes = err_tail.total();
    result.out = out_tail.take();
    result.err = err_tail.take();
    return result;
}

net::awaitable<process_result> async_run(spawn_options options) {
    auto executor = co_await net::this_coro::executor;
    const auto started = steady::now();
    auto io = spawn_piped(options);
    auto s = std::make_shared<session>(executor, io.pid, options.kill_grace);
    s->arm_ceiling(options.timeout);

    tail_buffer out_tail(options.max_output);
    tail_buffer err_tail(options.max_output);
    net::posix::stream_descriptor out(executor, io.out.release());
    net::posix::stream_descriptor err(executor, io.err.release());
    net::posix::stream_descriptor in(executor);
    if (io.in) {
        set_nonblocking(io.in.get());
        in.assign(io.in.release());
    }
    const std::string_view input =
        options.stdin_data ? std::string_view(*options.stdin_data) : std::string_view{};

    std::exception_ptr failure;
    try {
        co_await ((drain(out, out_tail) && drain(err, err_tail) && feed(in, input)) ||
                  s->wait_exit_then_linger());
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
    s->fill(result, started);
    result.out_bytes = out_tail.total();
    result.err_bytes = err_tail.total();
    result.out = out_tail.take();
    result.err = err_tail.take();
    co_return result;
}

}  // namespace awp::core::process
