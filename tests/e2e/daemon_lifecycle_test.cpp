// The daemon life cycle every awp daemon shares, checked on a real process: SIGTERM drains
// within the deadline, a second SIGTERM exits at once, bad options exit 78, systemd hears
// READY=1 and STOPPING=1.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "awp/core/process.hpp"
#include "support/child.hpp"
#include "support/test_db.hpp"

namespace daemon_lifecycle_test {

using awp::test::child;
using namespace std::chrono_literals;

namespace {
const std::string kDaemon = std::string(AWP_BIN_DIR) + "/awp-test-daemon";
}

TEST_CASE("SIGTERM lets in-flight work finish and exits 0 within the deadline", "[daemon]") {
    child d({kDaemon, "--work", "0.5", "--drain-timeout", "5"});
    REQUIRE(d.wait_for_log("\"msg\":\"ready\"", 5s));
    const auto t0 = std::chrono::steady_clock::now();
    d.signal(SIGTERM);
    auto code = d.wait(5s);
    REQUIRE(code.has_value());
    CHECK(*code == 0);
    CHECK(std::chrono::steady_clock::now() - t0 >= 450ms);  // it did wait for the work
    CHECK(d.log().find("in-flight work finished") != std::string::npos);
    CHECK(d.log().find("stopped cleanly") != std::string::npos);
}

TEST_CASE("work that outlives the drain deadline is abandoned with exit 1", "[daemon]") {
    child d({kDaemon, "--work", "30", "--drain-timeout", "0.3"});
    REQUIRE(d.wait_for_log("\"msg\":\"ready\"", 5s));
    d.signal(SIGTERM);
    auto code = d.wait(5s);
    REQUIRE(code.has_value());
    CHECK(*code == 1);
    CHECK(d.log().find("drain deadline passed") != std::string::npos);
}

TEST_CASE("a second SIGTERM exits at once", "[daemon]") {
    child d({kDaemon, "--work", "30", "--drain-timeout", "60"});
    REQUIRE(d.wait_for_log("\"msg\":\"ready\"", 5s));
    d.signal(SIGTERM);
    REQUIRE(d.wait_for_log("draining", 5s));
    CHECK_FALSE(d.wait(300ms).has_value());  // still draining
    const auto t0 = std::chrono::steady_clock::now();
    d.signal(SIGTERM);
    auto code = d.wait(3s);
    REQUIRE(code.has_value());
    CHECK(*code == 1);
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

TEST_CASE("a bad option or environment value exits 78 with a message", "[daemon]") {
    {
        child d({kDaemon, "--log-level", "chatty"});
        auto code = d.wait(5s);
        REQUIRE(code.has_value());
        CHECK(*code == 78);
        CHECK(d.log().find("chatty") != std::string::npos);
    }
    {
        child d({kDaemon}, {{"DRAIN_TIMEOUT", "soon"}});
        auto code = d.wait(5s);
        REQUIRE(code.has_value());
        CHECK(*code == 78);
    }
}

TEST_CASE("systemd hears READY=1 once serving and STOPPING=1 on SIGTERM", "[daemon]") {
    const std::string path = "/tmp/" + awp::test::random_name("awp-notify-") + ".sock";
    const int s = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    timeval tv{5, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

    child d({kDaemon, "--work", "0"}, {{"NOTIFY_SOCKET", path}});
    char buf[256] = {};
    auto n = ::recv(s, buf, sizeof buf - 1, 0);
    REQUIRE(n > 0);
    CHECK(std::string(buf, size_t(n)) == "READY=1");
    d.signal(SIGTERM);
    n = ::recv(s, buf, sizeof buf - 1, 0);
    REQUIRE(n > 0);
    CHECK(std::string(buf, size_t(n)) == "STOPPING=1");
    CHECK(d.wait(5s) == 0);
    ::close(s);
    ::unlink(path.c_str());
}

TEST_CASE("a process of the daemon's own user cannot read the daemon's environment or memory",
          "[daemon][e2e]") {
    if (::geteuid() != 0) {
        WARN("needs root to start processes as another user (CI runs as root): skipped");
        return;
    }
    // The daemon and an attacker both as uid 65534: same user, no privilege.
    const std::vector<std::string> as_nobody = {"/usr/bin/setpriv", "--reuid=65534",
                                                "--regid=65534", "--clear-groups", "--"};
    const std::string secret = "daemon-secret-5f0c9e1d";
    auto with = [&](std::vector<std::string> argv) {
        argv.insert(argv.begin(), as_nobody.begin(), as_nobody.end());
        return argv;
    };
    child d(with({kDaemon, "--work", "0"}), {{"SERVICE_ROLE_KEY", secret}});
    REQUIRE(d.wait_for_log("ready", 10s));
    // A plain process of that user, for contrast: its environment is readable (the test can
    // tell a refusal from a read).
    child plain(with({"/bin/sleep", "30"}), {{"SERVICE_ROLE_KEY", secret}});
    std::this_thread::sleep_for(200ms);
    auto read_as_nobody = [&](const std::string& path) {
        awp::core::process::spawn_options o;
        o.argv = with({"/bin/cat", path});
        o.timeout = 10s;
        return awp::core::process::run(o);
    };
    const auto control = read_as_nobody("/proc/" + std::to_string(plain.pid()) + "/environ");
    CHECK(control.success());
    CHECK(control.out.find(secret) != std::string::npos);
    for (const char* file : {"environ", "mem", "cmdline", "maps"}) {
        INFO(file);
        const auto r = read_as_nobody("/proc/" + std::to_string(d.pid()) + "/" + file);
        CHECK(r.out.find(secret) == std::string::npos);
        if (std::string(file) == "environ" || std::string(file) == "mem") CHECK_FALSE(r.success());
    }
    d.signal(SIGTERM);
    CHECK(d.wait(10s) == std::optional<int>(0));
}

}  // namespace daemon_lifecycle_test
