// Unit tests of awp::core::process: argv fidelity, output tails, timeouts that reach grandchildren,
// exit reporting, the coroutine form with cancellation, and PTY sessions.
#include "awp/core/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

namespace process_test {

namespace net = boost::asio;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using awp::core::process::async_run;
using awp::core::process::interactive_process;
using awp::core::process::process_result;
using awp::core::process::run;
using awp::core::process::spawn_error;
using awp::core::process::spawn_options;

namespace {

spawn_options sh(std::string script) {
    spawn_options o;
    o.argv = {"/bin/sh", "-c", std::move(script)};
    return o;
}

// Gone, or dead and waiting for a reaper we do not control (PID 1 here may not reap orphans).
bool process_dead(pid_t pid) {
    if (::kill(pid, 0) != 0) return errno == ESRCH;
    // Read with read(2): the process may be reaped between open and read (ESRCH), which
    // libstdc++'s filebuf reports by throwing.
    std::string content;
    const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;
    char buf[512];
    const auto n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n <= 0) return true;  // gone between open and read
    content.assign(buf, static_cast<std::size_t>(n));
    const auto close_paren = content.rfind(')');
    return close_paren != std::string::npos && close_paren + 2 < content.size() &&
           content[close_paren + 2] == 'Z';
}

bool dies_within(pid_t pid, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (process_dead(pid)) return true;
        std::this_thread::sleep_for(10ms);
    }
    return process_dead(pid);
}

// Runs one coroutine to completion on a fresh io_context and hands back its value.
template <typename T>
T run_on_io(std::function<net::awaitable<T>()> make) {
    net::io_context io;
    std::optional<T> value;
    std::exception_ptr failure;
    net::co_spawn(io, make(), [&](std::exception_ptr e, T v) {
        failure = e;
        if (!e) value = std::move(v);
    });
    io.run();
    if (failure) std::rethrow_exception(failure);
    return std::move(*value);
}

std::vector<std::string> split_nul(const std::string& s) {
    std::vector<std::string> parts;
    std::string::size_type start = 0;
    for (auto end = s.find('\0'); end != std::string::npos; end = s.find('\0', start)) {
        parts.push_back(s.substr(start, end - start));
        start = end + 1;
    }
    return parts;
}

std::string temp_path(const std::string& stem) {
    return "/tmp/awp-process-test-" + std::to_string(::getpid()) + "-" + stem;
}

pid_t read_pid_file(const std::string& path) {
    for (int i = 0; i < 200; ++i) {
        std::ifstream in(path);
        pid_t pid = 0;
        if (in >> pid && pid > 0) return pid;
        std::this_thread::sleep_for(10ms);
    }
    return 0;
}

}  // namespace

TEST_CASE("argv elements reach the child byte for byte, never through a shell", "[process]") {
    const std::vector<std::string> args = {"with space",
                                           "it's \"quoted\"",
                                           "$(touch /tmp/awp-pwned)",
                                           "`id`",
                                           "line1\nline2",
                                           "; rm -rf / ;",
                                           "*",
                                           "",
                                           "$HOME",
                                           "\xc3\xa9 \xe2\x9c\x93",
                                           "--flag=a|b&c>d"};
    spawn_options o;
    o.argv = {"/usr/bin/printf", "%s\\0"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    const auto r = run(o);
    REQUIRE(r.exit_code == 0);
    CHECK(split_nul(r.out) == args);
    CHECK(::access("/tmp/awp-pwned", F_OK) != 0);
}

TEST_CASE("exit codes and terminating signals are reported", "[process]") {
    SECTION("exit status") {
        const auto r = run(sh("exit 7"));
        CHECK(r.exit_code == 7);
        CHECK(r.term_signal == 0);
        CHECK_FALSE(r.timed_out);
        CHECK_FALSE(r.success());
    }
    SECTION("success") {
        const auto r = run(sh("exit 0"));
        CHECK(r.success());
    }
    SECTION("killed by a signal") {
        const auto r = run(sh("kill -9 $$"));
        CHECK(r.exit_code == -1);
        CHECK(r.term_signal == SIGKILL);
    }
}

TEST_CASE("stdout and stderr are captured apart, stdin is fed and closed", "[process]") {
    auto o = sh("read line; echo \"got:$line\"; echo oops >&2; cat");
    o.stdin_data = "first\nrest of input";
    const auto r = run(o);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "got:first\nrest of input");
    CHECK(r.err == "oops\n");
}

TEST_CASE("without stdin data the child reads end of file at once", "[process]") {
    spawn_options o;
    o.argv = {"/bin/cat"};
    o.timeout = 5s;
    const auto r = run(o);
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty());
    CHECK_FALSE(r.timed_out);
}

TEST_CASE("output beyond the cap keeps the tail and marks the cut", "[process]") {
    auto o = sh("i=0; while [ $i -lt 1000 ]; do echo line$i; i=$((i+1)); done");
    o.max_output = 100;
    const auto r = run(o);
    REQUIRE(r.exit_code == 0);
    const auto cut = r.out_bytes - 100;
    const std::string marker = "[... " + std::to_string(cut) + " bytes cut ...]\n";
    CHECK(r.out.substr(0, marker.size()) == marker);
    CHECK(r.out.size() == marker.size() + 100);
    CHECK(r.out.substr(r.out.size() - 8) == "line999\n");
}

TEST_CASE("megabytes through stdin and stdout neither deadlock nor grow memory", "[process]") {
    spawn_options o;
    o.argv = {"/bin/cat"};
    o.stdin_data = std::string(5'000'000, 'x') + "END";
    o.max_output = 1000;
    o.timeout = 20s;
    const auto r = run(o);
    CHECK(r.exit_code == 0);
    CHECK(r.out_bytes == 5'000'003);
    CHECK(r.out.substr(r.out.size() - 4) == "xEND");
    CHECK(r.out.size() < 1100);
}

TEST_CASE("a child that stops reading stdin or closes stdout early is fine", "[process]") {
    SECTION("stdin never read: no SIGPIPE for us") {
        auto o = sh("exit 3");
        o.stdin_data = std::string(2'000'000, 'y');
        const auto r = run(o);
        CHECK(r.exit_code == 3);
    }
    SECTION("stdout closed early, stderr still read") {
        const auto r = run(sh("exec >&-; sleep 0.1; echo late >&2; exit 4"));
        CHECK(r.exit_code == 4);
        CHECK(r.out.empty());
        CHECK(r.err == "late\n");
    }
}

TEST_CASE("a timeout kills the whole process group, grandchildren included", "[process]") {
    auto o = sh("sleep 100 & echo $!; wait");
    o.timeout = 300ms;
    o.kill_grace = 1s;
    const auto started = std::chrono::steady_clock::now();
    const auto r = run(o);
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    CHECK(r.timed_out);
    CHECK(r.term_signal == SIGTERM);
    const auto grandchild = static_cast<pid_t>(std::stol(r.out));
    REQUIRE(grandchild > 0);
    CHECK(dies_within(grandchild, 2s));
}

TEST_CASE("a group that ignores SIGTERM gets SIGKILL after the grace period", "[process]") {
    auto o = sh("trap '' TERM; sleep 100 & echo $!; wait");
    o.timeout = 200ms;
    o.kill_grace = 300ms;
    const auto r = run(o);
    CHECK(r.timed_out);
    CHECK(r.term_signal == SIGKILL);
    CHECK(dies_within(static_cast<pid_t>(std::stol(r.out)), 2s));
}

TEST_CASE("output held open by a leftover background process ends after the grace", "[process]") {
    auto o = sh("sleep 30 & echo $!; exit 0");
    o.kill_grace = 200ms;
    const auto started = std::chrono::steady_clock::now();
    const auto r = run(o);
    CHECK(std::chrono::steady_clock::now() - started < 3s);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.timed_out);
    ::kill(static_cast<pid_t>(std::stol(r.out)), SIGKILL);  // the test's own leftover
}

TEST_CASE("environment additions, removals, replacement and working directory", "[process]") {
    ::setenv("AWP_PROCESS_TEST_SECRET", "hunter2", 1);
    SECTION("added and removed") {
        spawn_options o;
        o.argv = {"env"};  // looked up in PATH
        o.env = {{"AWP_ADDED", "a b $c"}};
        o.env_unset = {"AWP_PROCESS_TEST_SECRET"};
        const auto r = run(o);
        CHECK(r.out.find("AWP_ADDED=a b $c\n") != std::string::npos);
        CHECK(r.out.find("hunter2") == std::string::npos);
        CHECK(r.out.find("PATH=") != std::string::npos);
    }
    SECTION("inherited by default") {
        spawn_options o;
        o.argv = {"/usr/bin/env"};
        CHECK(run(o).out.find("AWP_PROCESS_TEST_SECRET=hunter2\n") != std::string::npos);
    }
    SECTION("replaced") {
        spawn_options o;
        o.argv = {"/usr/bin/env"};
        o.env = {{"ONLY", "1"}};
        o.replace_env = true;
        CHECK(run(o).out == "ONLY=1\n");
    }
    SECTION("working directory") {
        spawn_options o;
        o.argv = {"/bin/pwd"};
        o.working_dir = "/tmp";
        CHECK(run(o).out == "/tmp\n");
    }
    ::unsetenv("AWP_PROCESS_TEST_SECRET");
}

TEST_CASE("programs that cannot start throw spawn_error naming only argv[0]", "[process]") {
    spawn_options o;
    SECTION("not found in PATH") {
        o.argv = {"awp-no-such-program", "secret-argument"};
        try {
            (void)run(o);
            FAIL("no exception");
        } catch (const spawn_error& e) {
            const std::string what = e.what();
            CHECK(what.find("awp-no-such-program") != std::string::npos);
            CHECK(what.find("secret-argument") == std::string::npos);
        }
    }
    SECTION("no such path") {
        o.argv = {"/nonexistent/program"};
        CHECK_THROWS_AS(run(o), spawn_error);
    }
    SECTION("empty argv") { CHECK_THROWS_AS(run(o), spawn_error); }
    SECTION("missing working directory") {
        o.argv = {"/bin/true"};
        o.working_dir = "/nonexistent/dir";
        CHECK_THROWS_AS(run(o), spawn_error);
    }
    SECTION("NUL inside an argument") {
        o.argv = {"/bin/echo", std::string("a\0b", 3)};
        CHECK_THROWS_AS(run(o), spawn_error);
    }
}

TEST_CASE("the child inherits no descriptors beyond stdin, stdout and stderr", "[process]") {
    // Deliberately without O_CLOEXEC, as a careless library might open it.
    const int raw = ::open("/dev/null", O_RDONLY);
    REQUIRE(raw >= 0);
    const int leaked = ::fcntl(raw, F_DUPFD, 777);
    ::close(raw);
    REQUIRE(leaked >= 777);
    const auto r = run(sh("for f in /proc/$$/fd/*; do echo ${f##*/}; done"));
    ::close(leaked);
    std::istringstream lines(r.out);
    std::vector<std::string> fds;
    for (std::string line; std::getline(lines, line);) fds.push_back(line);
    CHECK(std::find(fds.begin(), fds.end(), std::to_string(leaked)) == fds.end());
    CHECK(std::find(fds.begin(), fds.end(), "0") != fds.end());
}

TEST_CASE("children are always reaped: no zombies are left", "[process]") {
    (void)run(sh("exit 0"));
    (void)run(sh("kill -9 $$"));
    auto o = sh("sleep 100");
    o.timeout = 100ms;
    o.kill_grace = 100ms;
    (void)run(o);
    errno = 0;
    CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
    CHECK(errno == ECHILD);
}

TEST_CASE("async_run collects output, exit status and stdin under an io_context", "[process]") {
    auto o = sh("cat; echo done >&2; exit 5");
    o.stdin_data = "hello\n";
    const auto r = run_on_io<process_result>([o] { return async_run(o); });
    CHECK(r.exit_code == 5);
    CHECK(r.out == "hello\n");
    CHECK(r.err == "done\n");
}

TEST_CASE("async_run does not block the io thread", "[process]") {
    net::io_context io;
    int ticks = 0;
    std::optional<process_result> result;
    net::co_spawn(io, async_run(sh("sleep 0.3; echo ok")),
                  [&](std::exception_ptr, process_result r) { result = std::move(r); });
    net::co_spawn(
        io,
        [&]() -> net::awaitable<void> {
            net::steady_timer timer(co_await net::this_coro::executor);
            while (!result) {
                timer.expires_after(10ms);
                co_await timer.async_wait(net::use_awaitable);
                ++ticks;
            }
        },
        net::detached);
    io.run();
    REQUIRE(result);
    CHECK(result->out == "ok\n");
    CHECK(ticks >= 10);
}

TEST_CASE("async_run megabytes of output keep the tail", "[process]") {
    spawn_options o;
    o.argv = {"/usr/bin/head", "-c", "3000000", "/dev/zero"};
    o.max_output = 4096;
    const auto r = run_on_io<process_result>([o] { return async_run(o); });
    CHECK(r.exit_code == 0);
    CHECK(r.out_bytes == 3'000'000);
    CHECK(r.out.find("bytes cut ...]\n") != std::string::npos);
}

TEST_CASE("async_run timeout kills grandchildren", "[process]") {
    auto o = sh("sleep 100 & echo $!; wait");
    o.timeout = 300ms;
    o.kill_grace = 1s;
    const auto r = run_on_io<process_result>([o] { return async_run(o); });
    CHECK(r.timed_out);
    CHECK(r.term_signal == SIGTERM);
    CHECK(dies_within(static_cast<pid_t>(std::stol(r.out)), 2s));
}

TEST_CASE("cancelling async_run terminates the group gracefully and reaps it", "[process]") {
    const auto pid_file = temp_path("cancel-pid");
    const auto term_file = temp_path("cancel-term");
    std::remove(pid_file.c_str());
    std::remove(term_file.c_str());
    // The trap shows SIGTERM came first (SIGKILL cannot be trapped).
    auto o = sh("trap 'echo term > " + term_file + "; exit 0' TERM; sleep 100 & echo $! > " +
                pid_file + "; wait");
    const auto started = std::chrono::steady_clock::now();
    const auto winner = run_on_io<std::size_t>([o]() -> net::awaitable<std::size_t> {
        net::steady_timer timer(co_await net::this_coro::executor);
        timer.expires_after(300ms);
        auto r = co_await (async_run(o) || timer.async_wait(net::use_awaitable));
        co_return r.index();
    });
    CHECK(winner == 1);
    CHECK(std::chrono::steady_clock::now() - started < 4s);
    const pid_t grandchild = read_pid_file(pid_file);
    REQUIRE(grandchild > 0);
    CHECK(dies_within(grandchild, 2s));
    std::string term;
    std::ifstream(term_file) >> term;
    CHECK(term == "term");
    errno = 0;
    CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);  // the direct child was reaped
    CHECK(errno == ECHILD);
    std::remove(pid_file.c_str());
    std::remove(term_file.c_str());
}

TEST_CASE("cancelling an interactive wait terminates the session gracefully", "[process]") {
    const auto term_file = temp_path("interactive-term");
    std::remove(term_file.c_str());
    auto o = sh("trap 'echo term > " + term_file + "; exit 0' TERM; sleep 100 & wait");
    const auto winner = run_on_io<std::size_t>([o]() -> net::awaitable<std::size_t> {
        interactive_process p(co_await net::this_coro::executor, o);
        net::steady_timer timer(co_await net::this_coro::executor);
        timer.expires_after(300ms);
        auto r = co_await (p.async_wait() || timer.async_wait(net::use_awaitable));
        co_return r.index();
    });
    CHECK(winner == 1);
    std::string term;
    std::ifstream(term_file) >> term;
    CHECK(term == "term");
    std::remove(term_file.c_str());
}

TEST_CASE("an interactive session runs on a terminal: prompt, pasted input, exit", "[process]") {
    // A fixed script standing in for a CLI login: prompt, read a pasted code, report.
    auto o =
        sh("test -t 0 && (: </dev/tty) && echo 'controlling tty'; echo 'Open "
           "https://example.test/auth?x=1 to log in';"
           "printf 'Paste code: '; read code; echo \"accepted $code\"; exit 3");
    o.timeout = 10s;
    const auto transcript = run_on_io<std::string>([o]() -> net::awaitable<std::string> {
        interactive_process p(co_await net::this_coro::executor, o);
        std::string log;
        auto url = co_await p.async_read_until(std::regex(R"((https://\S+)\s)"));
        if (!url) co_return "no url";
        log += "url=" + (*url)[1] + ";";
        auto prompt = co_await p.async_read_until(std::regex("Paste code: "));
        if (!prompt) co_return "no prompt";
        if (!co_await p.async_write("s3cret-code\n")) co_return "write failed";
        auto accepted = co_await p.async_read_until(std::regex(R"(accepted (\S+)\r?\n)"));
        if (!accepted) co_return "no acceptance";
        log += "accepted=" + (*accepted)[1] + ";";
        const auto r = co_await p.async_wait();
        log += "exit=" + std::to_string(r.exit_code) + ";";
        log += r.out.find("controlling tty") != std::string::npos ? "tty;" : "no tty;";
        // Echo is off: the pasted code is not shown right after the prompt.
        log += r.out.find("Paste code: s3cret") == std::string::npos ? "no echo" : "echoed";
        co_return log;
    });
    CHECK(transcript ==
          "url=https://example.test/auth?x=1;accepted=s3cret-code;exit=3;tty;no echo");
}

TEST_CASE("an interactive session is killed at its ceiling even while nobody reads", "[process]") {
    auto o = sh("echo waiting; sleep 100");
    o.timeout = 300ms;
    o.kill_grace = 1s;
    const auto r = run_on_io<process_result>([o]() -> net::awaitable<process_result> {
        interactive_process p(co_await net::this_coro::executor, o);
        net::steady_timer idle(co_await net::this_coro::executor);
        idle.expires_after(600ms);  // the caller is busy elsewhere past the ceiling
        co_await idle.async_wait(net::use_awaitable);
        co_return co_await p.async_wait();
    });
    CHECK(r.timed_out);
    CHECK(r.term_signal != 0);
    CHECK(r.out.find("waiting") != std::string::npos);
}

TEST_CASE("terminate() and destruction end an interactive session", "[process]") {
    SECTION("terminate") {
        const auto r = run_on_io<process_result>([]() -> net::awaitable<process_result> {
            interactive_process p(co_await net::this_coro::executor, sh("sleep 100"));
            p.terminate();
            co_return co_await p.async_wait();
        });
        CHECK(r.term_signal != 0);
        CHECK_FALSE(r.timed_out);
    }
    SECTION("destruction") {
        const auto pid = run_on_io<pid_t>([]() -> net::awaitable<pid_t> {
            interactive_process p(co_await net::this_coro::executor, sh("sleep 100"));
            co_return p.pid();
        });
        CHECK(dies_within(pid, 2s));
        std::this_thread::sleep_for(50ms);  // the background reaper
        CHECK(::waitpid(pid, nullptr, WNOHANG) == -1);
    }
}

TEST_CASE(
    "run_as: the child runs as the agent user, with no supplementary group, no capability and "
    "no new privileges, and its home",
    "[process][identity]") {
    if (::geteuid() != 0) {
        WARN("not root: the switch to another user is checked by the root CI run only");
        return;
    }
    const auto nobody = awp::core::identity::lookup("nobody");
    spawn_options o;
    o.argv = {"sh", "-c",
              "id -u; id -g; id -G; grep -E '^(CapEff|CapPrm|CapAmb|NoNewPrivs):' "
              "/proc/self/status; echo \"$HOME $USER\""};
    o.env["PATH"] = "/usr/bin:/bin";
    o.run_as = nobody;
    const auto r = run(o);
    REQUIRE(r.success());
    std::istringstream lines(r.out);
    std::string uid, gid, groups;
    std::getline(lines, uid);
    std::getline(lines, gid);
    std::getline(lines, groups);
    CHECK(uid == std::to_string(nobody.uid));
    CHECK(gid == std::to_string(nobody.gid));
    CHECK(groups == std::to_string(nobody.gid));  // the primary group only
    CHECK(r.out.find("CapEff:\t0000000000000000") != std::string::npos);
    CHECK(r.out.find("CapPrm:\t0000000000000000") != std::string::npos);
    CHECK(r.out.find("CapAmb:\t0000000000000000") != std::string::npos);
    CHECK(r.out.find("NoNewPrivs:\t1") != std::string::npos);
    CHECK(r.out.find(nobody.home + " nobody") != std::string::npos);
    // argv[0] is still the program as named, and arguments arrive byte for byte.
    o.argv = {"printf", "%s|", "a b", "$(id)", ";rm"};
    CHECK(run(o).out == "a b|$(id)|;rm|");
}

TEST_CASE("identity: root and unknown users are refused as agent users", "[process][identity]") {
    CHECK_THROWS_WITH(awp::core::identity::lookup("root"), Catch::Contains("is root"));
    CHECK_THROWS_WITH(awp::core::identity::lookup("0"), Catch::Contains("is root"));
    CHECK_THROWS_WITH(awp::core::identity::lookup("no-such-user-awp"),
                      Catch::Contains("no such user"));
    CHECK(awp::core::identity::lookup("65534").name == "nobody");
    CHECK_FALSE(awp::core::identity::agent_user("").has_value());
}

}  // namespace process_test
