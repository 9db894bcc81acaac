// The spawn path's internals shared by the three front ends of awp/core/process.hpp: the
// blocking run (process.cpp), the asynchronous run (process.cpp) and the interactive process
// (process_interactive.cpp), all started by process_spawn.cpp. The invariants (every child
// reaped, every descriptor closed, the group killed) are kept by these types. Private to
// awp::core: libs/core/src is no include path of its users.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/process.hpp"

namespace awp::core::process {

namespace net = boost::asio;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// Named rather than anonymous: interactive_process::state derives from session.
namespace detail {

inline constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";
inline constexpr std::size_t kReadChunk = 64 * 1024;
// Without pidfd_open (old kernel, strict seccomp) the exit is noticed by polling this often.
inline constexpr auto kReapPollInterval = 20ms;

std::string errno_text(int err);

class unique_fd {
public:
    unique_fd() = default;
    explicit unique_fd(int fd) noexcept : fd_(fd) {}
    unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    unique_fd& operator=(unique_fd&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = std::exchange(other.fd_, -1);
        }
        return *this;
    }
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    ~unique_fd() { reset(); }

    [[nodiscard]] int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    explicit operator bool() const noexcept { return fd_ >= 0; }

private:
    int fd_ = -1;
};

void set_nonblocking(int fd);

// write(2) to a pipe or terminal whose reader may be gone, without dying of SIGPIPE and without
// touching the process-wide disposition (a library must not). SIGPIPE from write(2) is directed
// at the writing thread, so blocking it here and discarding the instance we caused is enough.
ssize_t write_no_sigpipe(int fd, const char* data, std::size_t size);

// Keeps the last `cap` bytes of a stream and how many came before them.
class tail_buffer {
public:
    explicit tail_buffer(std::size_t cap) : cap_(cap) {}

    void append(const char* data, std::size_t size) {
        total_ += size;
        if (cap_ == 0) return;
        if (size >= cap_) {
            data_.assign(data + (size - cap_), cap_);
            return;
        }
        data_.append(data, size);
        // Trim in batches: erasing the front on every append would be quadratic.
        if (data_.size() > 2 * cap_) data_.erase(0, data_.size() - cap_);
    }
    void append(std::string_view s) { append(s.data(), s.size()); }

    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }

    std::string take() {
        if (data_.size() > cap_) data_.erase(0, data_.size() - cap_);
        std::uint64_t cut = total_ - data_.size();
        if (cut == 0) return std::move(data_);
        // Output ends up in text columns: never start the tail inside a UTF-8 sequence.
        std::size_t skip = 0;
        while (skip < 3 && skip < data_.size() &&
               (static_cast<unsigned char>(data_[skip]) & 0xC0U) == 0x80U) {
            ++skip;
        }
        data_.erase(0, skip);
        cut += skip;
        return "[... " + std::to_string(cut) + " bytes cut ...]\n" + data_;
    }

private:
    std::size_t cap_;
    std::uint64_t total_ = 0;
    std::string data_;
};

/// A pidfd of the child (pidfd_open), or none where the kernel has no such call.
unique_fd open_pidfd(pid_t pid);

// Owns a spawned child until it is reaped; whoever drops it unreaped kills its group.
class child_guard {
public:
    explicit child_guard(pid_t pid) noexcept : pid_(pid) {}
    child_guard(const child_guard&) = delete;
    child_guard& operator=(const child_guard&) = delete;
    ~child_guard() { abandon(); }

    [[nodiscard]] pid_t pid() const noexcept { return pid_; }
    [[nodiscard]] bool reaped() const noexcept { return reaped_; }
    [[nodiscard]] steady::time_point reaped_at() const noexcept { return reaped_at_; }

    // Never after reaping: the pid (and so the group id) may belong to someone else by then.
    void signal_group(int sig) const noexcept {
        if (!reaped_) ::kill(-pid_, sig);
    }

    bool try_reap() noexcept {
        if (reaped_) return true;
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            status_ = status;
            mark_reaped();
        } else if (r < 0 && errno != EINTR) {
            // ECHILD: someone else reaped it (SIGCHLD ignored, a waitpid(-1) elsewhere).
            mark_reaped();
        }
        return reaped_;
    }

    // Kills the group and makes sure the child is reaped, without blocking the caller.
    void abandon() noexcept {
        if (reaped_) return;
        ::kill(-pid_, SIGKILL);
        if (try_reap()) return;
        try {
            std::thread([pid = pid_] {
                int status = 0;
                while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
                }
            }).detach();
        } catch (...) {
            // No thread to spare: a zombie is the lesser evil than blocking here.
        }
        reaped_ = true;
    }

    void fill(process_result& result) const {
        if (status_ && WIFEXITED(*status_)) {
            result.exit_code = WEXITSTATUS(*status_);
        } else if (status_ && WIFSIGNALED(*status_)) {
            result.term_signal = WTERMSIG(*status_);
        }
    }

private:
    void mark_reaped() noexcept {
        reaped_ = true;
        reaped_at_ = steady::now();
    }

    pid_t pid_;
    bool reaped_ = false;
    std::optional<int> status_;
    steady::time_point reaped_at_{};
};

struct piped_child {
    pid_t pid = -1;
    unique_fd in;  // unset when there is no stdin data
    unique_fd out;
    unique_fd err;
};

piped_child spawn_piped(const spawn_options& options);

struct pty_child {
    pid_t pid = -1;
    unique_fd master;
};

pty_child spawn_pty(const spawn_options& options, const terminal_options& terminal);

// State shared by a running child's coroutines and its ceiling timer.
class session : public std::enable_shared_from_this<session> {
public:
    session(net::any_io_executor executor, pid_t pid, std::chrono::milliseconds grace)
        : child(pid),
          grace_(grace),
          kill_timer_(executor),
          poll_timer_(executor),
          pidfd_(executor) {
        if (auto fd = open_pidfd(pid)) pidfd_.assign(fd.release());
    }

    void arm_ceiling(std::chrono::milliseconds timeout) {
        if (timeout <= 0ms) return;
        kill_timer_.expires_after(timeout);
        kill_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
            if (ec) return;
            if (auto self = weak.lock(); self && !self->child.reaped()) {
                self->timed_out = true;
                self->terminate();
            }
        });
    }

    // SIGTERM now, SIGKILL after the grace period unless the child is reaped by then.
    void terminate() {
        if (child.reaped() || terminating_) return;
        terminating_ = true;
        child.signal_group(SIGTERM);
        kill_timer_.expires_after(grace_);
        kill_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
            if (ec) return;
            if (auto self = weak.lock()) self->child.signal_group(SIGKILL);
        });
    }

    net::awaitable<void> wait_exit() {
        const bool done = co_await reaped();
        if (!done) throw boost::system::system_error(net::error::operation_aborted);
    }

    // Completes kill_grace after the exit: how long whatever the child left behind may keep
    // the pipes open before we stop collecting. The other side of an `||` with the pipes'
    // drains, which usually ends first (the pipes close when the child exits): cancelled, it
    // returns without throwing (an exception per child cost the runner ~5 % of its CPU per
    // command, bench/runner/RESULTS.md); a caller cancelled from outside sees it in its own
    // cancellation state (throw_if_cancelled_outside).
    net::awaitable<void> wait_exit_then_linger() {
        const bool done = co_await reaped();
        if (!done) co_return;
        poll_timer_.expires_after(grace_);
        co_await poll_timer_.async_wait(net::as_tuple(net::use_awaitable));
    }

    void fill(process_result& result, steady::time_point started) const {
        child.fill(result);
        result.timed_out = timed_out;
        const auto end = child.reaped() ? child.reaped_at() : steady::now();
        result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(end - started);
    }

    child_guard child;
    bool timed_out = false;

private:
    // Until the child is reaped (then the kill timer is no longer needed): true, or false when
    // cancelled first.
    net::awaitable<bool> reaped() {
        while (!child.try_reap()) {
            boost::system::error_code ec;
            if (pidfd_.is_open()) {
                std::tie(ec) = co_await pidfd_.async_wait(net::posix::descriptor_base::wait_read,
                                                          net::as_tuple(net::use_awaitable));
                if (ec && ec != net::error::operation_aborted) pidfd_.close();  // poll instead
            } else {
                poll_timer_.expires_after(kReapPollInterval);
                std::tie(ec) = co_await poll_timer_.async_wait(net::as_tuple(net::use_awaitable));
            }
            if (ec == net::error::operation_aborted) co_return false;
        }
        kill_timer_.cancel();
        co_return true;
    }

    std::chrono::milliseconds grace_;
    bool terminating_ = false;
    net::steady_timer kill_timer_;
    net::steady_timer poll_timer_;
    net::posix::stream_descriptor pidfd_;
};

// After an `(output...) || s->wait_exit_then_linger()`: throws operation_aborted when the calling
// coroutine itself was cancelled (its `||` may have returned normally: the linger side does not
// throw when cancelled).
net::awaitable<void> throw_if_cancelled_outside();

net::awaitable<void> drain(net::posix::stream_descriptor& stream, tail_buffer& tail);
net::awaitable<bool> write_all(net::posix::stream_descriptor& stream, std::string_view data);
net::awaitable<void> feed(net::posix::stream_descriptor& stream, std::string_view data);
net::awaitable<void> abort_run(std::shared_ptr<session> s, std::exception_ptr failure,
                               bool cancelled);

}  // namespace detail
}  // namespace awp::core::process
