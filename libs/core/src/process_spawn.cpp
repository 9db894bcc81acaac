// Starting a child (awp/core/process.hpp): posix_spawn into a new process group or session,
// with pipes or a pseudo-terminal, the allowlisted environment, the program resolved on PATH,
// privileges dropped to the agent user; the descriptor helpers (process_internal.hpp).
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

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

extern char** environ;  // NOLINT: POSIX declares it nowhere in a header

#include "process_internal.hpp"

namespace awp::core::process {
namespace detail {

std::string errno_text(int err) { return std::system_category().message(err); }

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

unique_fd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
    const long fd = ::syscall(SYS_pidfd_open, pid, 0);  // always O_CLOEXEC
    if (fd >= 0) return unique_fd{static_cast<int>(fd)};
#else
    (void)pid;
#endif
    return unique_fd{};
}

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

}  // namespace detail
}  // namespace awp::core::process
