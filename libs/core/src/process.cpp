// Child processes: posix_spawn into a new process group, pipe or pseudo-terminal I/O, tails of the
// output, group-wide kills at the ceiling, reaping on every path.
// Why one file: the blocking run, the asynchronous run and the interactive process
// are three front ends of one spawn path (spawn_request, child_guard, tail_buffer, the fd
// helpers) whose invariants (every child reaped, every fd closed, the group killed) are kept by
// types private to this file; splitting it would publish those internals to share them.
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

namespace awp::core::process {

namespace net = boost::asio;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using steady = std::chrono::steady_clock;

// Named rather than anonymous: interactive_process::state derives from session.
namespace detail {

constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";
constexpr std::size_t kReadChunk = 64 * 1024;
// Without pidfd_open (old kernel, strict seccomp) the exit is noticed by polling this often.
constexpr auto kReapPollInterval = 20ms;

std::string errno_text(int err) { return std::system_category().message(err); }

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

// Keeps descriptors off 0-2 so the child's dup2 onto stdio can never clobber a pipe end that
// happens to live there (a daemon started with closed stdio).
unique_fd above_stdio(int fd) {
    if (fd >= 3) return unique_fd{fd};
    const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    const int err = errno;
    ::close(fd);
    if (moved < 0) throw spawn_error("cannot create a pipe: " + errno_text(err));
    return unique_fd{moved};
}

std::pair<unique_fd, unique_fd> make_pipe() {
    std::array<int, 2> fds{};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
        throw spawn_error("cannot create a pipe: " + errno_text(errno));
    }
    unique_fd read_end{fds[0]};
    unique_fd write_end{fds[1]};
    return {above_stdio(read_end.release()), above_stdio(write_end.release())};
}

void set_nonblocking(int fd) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        throw core::error("cannot make a descriptor non-blocking: " + errno_text(errno));
    }
}

// write(2) to a pipe or terminal whose reader may be gone, without dying of SIGPIPE and without
// touching the process-wide disposition (a library must not). SIGPIPE from write(2) is directed
// at the writing thread, so blocking it here and discarding the instance we caused is enough.
ssize_t write_no_sigpipe(int fd, const char* data, std::size_t size) {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
    sigset_t previous;
    pthread_sigmask(SIG_BLOCK, &pipe_only, &previous);
    ssize_t written = 0;
    do {
        written = ::write(fd, data, size);
    } while (written < 0 && errno == EINTR);
    const int err = errno;
    if (written < 0 && err == EPIPE && !was_pending) {
        const timespec no_wait{};
        while (sigtimedwait(&pipe_only, nullptr, &no_wait) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    errno = err;
    return written;
}

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

unique_fd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
    const long fd = ::syscall(SYS_pidfd_open, pid, 0);  // always O_CLOEXEC
    if (fd >= 0) return unique_fd{static_cast<int>(fd)};
#else
    (void)pid;
#endif
    return unique_fd{};
}

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

// What posix_spawn needs, validated and resolved up front so failures name the cause.
class spawn_request {
public:
    explicit spawn_request(const spawn_options& options) : options_(options) {
        if (options.argv.empty()) throw spawn_error("cannot start a program: argv is empty");
        for (const auto& arg : options.argv) {
            if (arg.find('\0') != std::string::npos) {
                throw spawn_error("cannot start " + program_name() + ": an argument holds a NUL");
            }
        }
        build_environment();
        resolve_program();
        if (options.run_as) drop_privileges(*options.run_as);
        if (!options.working_dir.empty()) {
            struct stat st {};
            if (::stat(options.working_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
                throw spawn_error("cannot start " + program_name() + ": working directory " +
                                  options.working_dir + " does not exist");
            }
        }
        check(posix_spawnattr_init(&attr_), "posix_spawnattr_init");
        if (const int rc = posix_spawn_file_actions_init(&actions_); rc != 0) {
            posix_spawnattr_destroy(&attr_);
            throw spawn_error("cannot start " + program_name() + ": " + errno_text(rc));
        }
    }
    spawn_request(const spawn_request&) = delete;
    spawn_request& operator=(const spawn_request&) = delete;
    ~spawn_request() {
        posix_spawn_file_actions_destroy(&actions_);
        posix_spawnattr_destroy(&attr_);
    }

    posix_spawn_file_actions_t* actions() noexcept { return &actions_; }

    void check(int rc, std::string_view what) const {
        if (rc != 0) {
            throw spawn_error("cannot start " + program_name() + ": " + std::string(what) + ": " +
                              errno_text(rc));
        }
    }

    // `group_flag` is POSIX_SPAWN_SETPGROUP (pgid = pid) or POSIX_SPAWN_SETSID (new session).
    pid_t launch(int group_flag) {
        // The daemon may block or ignore signals (SIGPIPE above all); the child starts clean.
        sigset_t all;
        sigfillset(&all);
        sigset_t none;
        sigemptyset(&none);
        check(posix_spawnattr_setsigdefault(&attr_, &all), "setsigdefault");
        check(posix_spawnattr_setsigmask(&attr_, &none), "setsigmask");
        check(posix_spawnattr_setpgroup(&attr_, 0), "setpgroup");
        check(posix_spawnattr_setflags(
                  &attr_,
                  static_cast<short>(group_flag | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)),
              "setflags");
        if (!options_.working_dir.empty()) {
            check(posix_spawn_file_actions_addchdir_np(&actions_, options_.working_dir.c_str()),
                  "addchdir");
        }
        // O_CLOEXEC covers our descriptors; this covers the ones a library opened without it.
        check(posix_spawn_file_actions_addclosefrom_np(&actions_, 3), "addclosefrom");

        std::vector<char*> argv;
        argv.reserve(prefix_.size() + options_.argv.size() + 1);
        for (auto& arg : prefix_) argv.push_back(arg.data());
        for (const auto& arg : options_.argv) argv.push_back(const_cast<char*>(arg.c_str()));
        if (!prefix_.empty()) argv[prefix_.size()] = program_.data();  // resolved, for setpriv
        argv.push_back(nullptr);
        std::vector<char*> envp;
        envp.reserve(env_.size() + 1);
        for (const auto& entry : env_) envp.push_back(const_cast<char*>(entry.c_str()));
        envp.push_back(nullptr);

        pid_t pid = -1;
        const std::string& exe = prefix_.empty() ? program_ : prefix_.front();
        const int rc = posix_spawn(&pid, exe.c_str(), &actions_, &attr_, argv.data(), envp.data());
        if (rc != 0) throw spawn_error("cannot start " + program_name() + ": " + errno_text(rc));
        return pid;
    }

private:
    [[nodiscard]] std::string program_name() const {
        return options_.argv.empty() ? std::string{} : options_.argv.front();
    }

    void build_environment() {
        const auto removed = [this](std::string_view entry) {
            const auto name = entry.substr(0, entry.find('='));
            return options_.env.find(name) != options_.env.end() ||
                   std::find(options_.env_unset.begin(), options_.env_unset.end(), name) !=
                       options_.env_unset.end();
        };
        if (!options_.replace_env && environ != nullptr) {
            for (char** entry = environ; *entry != nullptr; ++entry) {
                if (!removed(*entry)) env_.emplace_back(*entry);
            }
        }
        for (const auto& [name, value] : options_.env) {
            if (name.empty() ||
                name.find_first_of(std::string_view("=\0", 2)) != std::string::npos ||
                value.find('\0') != std::string::npos) {
                throw spawn_error("cannot start " + program_name() +
                                  ": invalid environment variable " + name);
            }
            env_.push_back(name + "=" + value);
        }
    }

    // Looked up here, in the PATH the child will have, rather than by posix_spawnp (which uses
    // ours); relative PATH entries are skipped so the working directory cannot plant a binary.
    void resolve_program() {
        const std::string& name = options_.argv.front();
        if (name.empty()) throw spawn_error("cannot start a program: argv[0] is empty");
        if (name.find('/') != std::string::npos) {
            program_ = name;
            return;
        }
        std::string_view path = kDefaultPath;
        for (const auto& entry : env_) {
            if (entry.starts_with("PATH=")) path = std::string_view(entry).substr(5);
        }
        while (!path.empty()) {
            const auto colon = path.find(':');
            const auto dir = path.substr(0, colon);
            path = colon == std::string_view::npos ? std::string_view{} : path.substr(colon + 1);
            if (dir.empty() || dir.front() != '/') continue;
            std::string candidate = std::string(dir) + "/" + name;
            struct stat st {};
            if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                ::access(candidate.c_str(), X_OK) == 0) {
                program_ = std::move(candidate);
                return;
            }
        }
        throw spawn_error("cannot start " + name + ": not found in PATH");
    }

    // The child becomes `u` before its program runs: setpriv (util-linux) changes the real,
    // effective and saved ids, drops every supplementary group, empties the inheritable and
    // ambient capability sets and sets no_new_privs, then executes the resolved program.
    void drop_privileges(const identity::user& u) {
        static const std::string setpriv = [] {
            for (const char* p : {"/usr/bin/setpriv", "/bin/setpriv"}) {
                if (::access(p, X_OK) == 0) return std::string(p);
            }
            return std::string();
        }();
        if (setpriv.empty()) {
            throw spawn_error("cannot start " + program_name() + " as " + u.name +
                              ": setpriv (util-linux) is not installed");
        }
        prefix_ = {setpriv,
                   "--reuid=" + std::to_string(u.uid),
                   "--regid=" + std::to_string(u.gid),
                   "--clear-groups",
                   "--inh-caps=-all",
                   "--ambient-caps=-all",
                   "--no-new-privs",
                   "--"};
        for (const auto& [name, value] :
             {std::pair<const char*, const std::string&>{"HOME", u.home},
              std::pair<const char*, const std::string&>{"USER", u.name},
              std::pair<const char*, const std::string&>{"LOGNAME", u.name}}) {
            if (options_.env.find(name) != options_.env.end()) continue;
            const std::string key = std::string(name) + "=";
            std::erase_if(env_, [&](const std::string& e) { return e.starts_with(key); });
            env_.push_back(key + value);
        }
    }

    const spawn_options& options_;
    std::vector<std::string> env_;
    std::vector<std::string> prefix_;  // setpriv and its options when run_as is set
    std::string program_;
    posix_spawnattr_t attr_{};
    posix_spawn_file_actions_t actions_{};
};

struct piped_child {
    pid_t pid = -1;
    unique_fd in;  // unset when there is no stdin data
    unique_fd out;
    unique_fd err;
};

piped_child spawn_piped(const spawn_options& options) {
    spawn_request request(options);
    auto* actions = request.actions();
    piped_child child;
    unique_fd child_in;
    if (options.stdin_data) {
        auto [r, w] = make_pipe();
        child_in = std::move(r);
        child.in = std::move(w);
        request.check(posix_spawn_file_actions_adddup2(actions, child_in.get(), 0), "adddup2");
    } else {
        request.check(posix_spawn_file_actions_addopen(actions, 0, "/dev/null", O_RDONLY, 0),
                      "addopen");
    }
    auto [out_r, out_w] = make_pipe();
    auto [err_r, err_w] = make_pipe();
    request.check(posix_spawn_file_actions_adddup2(actions, out_w.get(), 1), "adddup2");
    request.check(posix_spawn_file_actions_adddup2(actions, err_w.get(), 2), "adddup2");
    child.pid = request.launch(POSIX_SPAWN_SETPGROUP);
    child.out = std::move(out_r);
    child.err = std::move(err_r);
    // Our copies of the child's ends close here, so EOF arrives when the child's side closes.
    return child;
}

struct pty_child {
    pid_t pid = -1;
    unique_fd master;
};

pty_child spawn_pty(const spawn_options& options, const terminal_options& terminal) {
    spawn_request request(options);
    if (options.stdin_data) {
        throw spawn_error("cannot start " + options.argv.front() +
                          ": stdin_data is not supported on a terminal; use async_write");
    }
    unique_fd master{::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)};
    if (!master || ::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) {
        throw spawn_error("cannot open a pseudo-terminal: " + errno_text(errno));
    }
    master = above_stdio(master.release());
    std::array<char, 128> slave{};
    if (const int rc = ::ptsname_r(master.get(), slave.data(), slave.size()); rc != 0) {
        throw spawn_error("cannot open a pseudo-terminal: " + errno_text(rc));
    }
    // Termios and window-size requests on the master apply to the slave side.
    termios modes{};
    if (::tcgetattr(master.get(), &modes) == 0) {
        if (!terminal.echo) {
            modes.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHOE | ECHOK | ECHONL);
        }
        ::tcsetattr(master.get(), TCSANOW, &modes);
    }
    winsize size{};
    size.ws_row = terminal.rows;
    size.ws_col = terminal.cols;
    ::ioctl(master.get(), TIOCSWINSZ, &size);

    // The parent never opens the slave: the master then reports EIO once the child side is
    // gone. The child opens it after setsid(), which makes it the controlling terminal.
    auto* actions = request.actions();
    request.check(posix_spawn_file_actions_addopen(actions, 0, slave.data(), O_RDWR, 0), "addopen");
    request.check(posix_spawn_file_actions_adddup2(actions, 0, 1), "adddup2");
    request.check(posix_spawn_file_actions_adddup2(actions, 0, 2), "adddup2");
    pty_child child;
    set_nonblocking(master.get());
    child.pid = request.launch(POSIX_SPAWN_SETSID);
    child.master = std::move(master);
    return child;
}

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
        while (!child.try_reap()) {
            if (pidfd_.is_open()) {
                auto [ec] = co_await pidfd_.async_wait(net::posix::descriptor_base::wait_read,
                                                       net::as_tuple(net::use_awaitable));
                if (ec == net::error::operation_aborted) throw boost::system::system_error(ec);
                if (ec) pidfd_.close();  // poll instead
            } else {
                poll_timer_.expires_after(kReapPollInterval);
                co_await poll_timer_.async_wait(net::use_awaitable);
            }
        }
        kill_timer_.cancel();
    }

    // Completes kill_grace after the exit: how long whatever the child left behind may keep
    // the pipes open before we stop collecting.
    net::awaitable<void> wait_exit_then_linger() {
        co_await wait_exit();
        poll_timer_.expires_after(grace_);
        co_await poll_timer_.async_wait(net::use_awaitable);
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
    std::chrono::milliseconds grace_;
    bool terminating_ = false;
    net::steady_timer kill_timer_;
    net::steady_timer poll_timer_;
    net::posix::stream_descriptor pidfd_;
};

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
