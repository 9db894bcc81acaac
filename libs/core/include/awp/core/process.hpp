// Child processes from an argv array (never a shell): own process group, bounded output, group-wide
// timeouts, blocking and coroutine forms, and pseudo-terminal sessions for interactive CLIs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "awp/core/error.hpp"
#include "awp/core/identity.hpp"

namespace awp::core::process {

/// The program could not be started: not found, not executable, bad argv/env, bad directory.
/// The message names argv[0] only; the other arguments may carry payloads or secrets.
class spawn_error : public core::error {
public:
    using core::error::error;
};

struct spawn_options {
    /// argv[0] is the program: a path (used as is), or a name looked up in the PATH the child
    /// gets (absolute entries only). Elements reach the child byte for byte; none may hold a NUL.
    std::vector<std::string> argv;
    /// Written to the child's stdin, which is then closed. Unset: stdin is /dev/null.
    std::optional<std::string> stdin_data;
    /// Variables set or overridden in the child's environment.
    std::map<std::string, std::string, std::less<>> env;
    /// Names removed from the inherited environment (the daemon's own secrets, say).
    std::vector<std::string> env_unset;
    /// When true the child's environment is `env` alone; nothing is inherited.
    bool replace_env = false;
    /// Working directory of the child; empty keeps the caller's.
    std::string working_dir;
    /// Ceiling for the whole run; zero means none. When it passes, the process group gets
    /// SIGTERM, then SIGKILL `kill_grace` later, and the result says timed_out.
    std::chrono::milliseconds timeout{0};
    /// Delay between SIGTERM and SIGKILL; also how long output is still collected after the
    /// child exits while something it left behind keeps the pipes open.
    std::chrono::milliseconds kill_grace{2000};
    /// Bytes kept per stream: the tail. Anything earlier is replaced by one line
    /// "[... N bytes cut ...]".
    std::size_t max_output = std::size_t{1} << 20;
    /// Runs the child as this user (AGENT_USER): its uid and primary group, no supplementary
    /// groups, no capabilities, no new privileges (through util-linux's setpriv, so the switch
    /// happens before the program runs). HOME, USER and LOGNAME become the user's unless `env`
    /// sets them. The caller needs CAP_SETUID and CAP_SETGID (identity::can_switch).
    std::optional<identity::user> run_as;
};

struct process_result {
    /// Exit status when the child exited; -1 when a signal ended it (or it could not be reaped).
    int exit_code = -1;
    /// Signal that ended the child, 0 when it exited.
    int term_signal = 0;
    /// The timeout passed and the process group was killed.
    bool timed_out = false;
    /// From spawn until the child was reaped.
    std::chrono::milliseconds duration{0};
    /// Tail of stdout (for a terminal session: everything the terminal showed).
    std::string out;
    /// Tail of stderr (empty for a terminal session).
    std::string err;
    /// Bytes the child wrote to each stream, kept or not.
    std::uint64_t out_bytes = 0;
    std::uint64_t err_bytes = 0;

    /// Exited by itself with status 0, within the timeout.
    [[nodiscard]] bool success() const noexcept {
        return exit_code == 0 && term_signal == 0 && !timed_out;
    }
};

/// Runs the child to completion, blocking the calling thread (for worker threads, never an io
/// thread). Throws spawn_error if it cannot start; every other outcome is in the result.
[[nodiscard]] process_result run(const spawn_options& options);

/// Same as run() without blocking the io thread. Terminal cancellation (the losing side of
/// `||`, a task group's terminal signal) kills the process group, reaps the child and then
/// throws system_error(operation_aborted); partial/total cancellation is ignored so a graceful
/// drain lets commands finish. The coroutine must run on one thread (a strand or a
/// single-threaded io_context).
[[nodiscard]] boost::asio::awaitable<process_result> async_run(spawn_options options);

/// Terminal settings of an interactive session.
struct terminal_options {
    unsigned short rows = 24;
    /// Wide, so CLIs do not wrap long URLs themselves.
    unsigned short cols = 200;
    /// Off by default: whatever is written (a pasted code) is not echoed back into the output.
    /// The program may still print it; redact before storing output.
    bool echo = false;
};

/// A child whose stdin/stdout/stderr are a new pseudo-terminal, as leader of its own session and
/// process group: for CLIs that insist on a TTY (OAuth logins that print a URL or device code and
/// later read a pasted value). Output read here is also kept (tail) in the final result's `out`.
/// options.timeout is the ceiling of the whole session, enforced even while nobody reads.
/// One operation of each kind at a time, all on one thread (see async_run).
class interactive_process {
public:
    /// Starts the child. options.stdin_data must be unset (use async_write). Throws spawn_error.
    interactive_process(boost::asio::any_io_executor executor, const spawn_options& options,
                        terminal_options terminal = {});
    /// Kills the process group if the child is still running, without blocking; it is reaped.
    ~interactive_process();
    interactive_process(interactive_process&&) noexcept;
    interactive_process& operator=(interactive_process&&) noexcept;
    interactive_process(const interactive_process&) = delete;
    interactive_process& operator=(const interactive_process&) = delete;

    [[nodiscard]] pid_t pid() const noexcept;

    /// The next chunk of terminal output; an empty string once the terminal is closed (the
    /// child and everything holding the terminal are gone).
    boost::asio::awaitable<std::string> async_read_some();

    /// Reads until `pattern` matches the output not consumed by an earlier match; returns the
    /// match and its groups ([0] = whole match), or nullopt at end of output. Output arrives in
    /// chunks, so a pattern that could match a prefix of something still arriving must include
    /// its terminator: `(https://\S+)\s`, not `https://\S+`. Terminal lines end in "\r\n".
    boost::asio::awaitable<std::optional<std::vector<std::string>>> async_read_until(
        std::regex pattern);

    /// Writes all of `data` to the terminal (SIGPIPE-safe); false if the terminal is gone.
    boost::asio::awaitable<bool> async_write(std::string data);

    /// SIGTERM to the process group now, SIGKILL after kill_grace. Idempotent; does not wait.
    void terminate();

    /// Collects the remaining output and waits until the child is reaped (the ceiling still
    /// applies). Call once, last. Cancellation kills the group as in async_run.
    boost::asio::awaitable<process_result> async_wait();

private:
    struct state;
    std::shared_ptr<state> state_;
};

}  // namespace awp::core::process
