// Unit tests of the core pieces that need no database: logs, SQLSTATE types, back-off, CLI.
#include <fcntl.h>
#include <unistd.h>

#include <rapidjson/document.h>
#include <catch2/catch.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/log.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/time.hpp"

namespace core_test {

namespace {

// Redirects fd 2 into a temp file for the lifetime of the object.
class stderr_capture {
public:
    stderr_capture() {
        char tmpl[] = "/tmp/awp-stderr-XXXXXX";
        fd_ = mkstemp(tmpl);
        path_ = tmpl;
        saved_ = dup(2);
        dup2(fd_, 2);
    }
    ~stderr_capture() { restore(); }
    std::string text() {
        restore();
        std::string out;
        char buf[4096];
        lseek(fd_, 0, SEEK_SET);
        for (ssize_t n; (n = read(fd_, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
        return out;
    }

private:
    void restore() {
        if (saved_ >= 0) {
            dup2(saved_, 2);
            close(saved_);
            saved_ = -1;
            unlink(path_.c_str());
        }
    }
    int fd_ = -1, saved_ = -1;
    std::string path_;
};

}  // namespace

using namespace awp::core;

TEST_CASE("a log line is one JSON object with ts, level, daemon, msg and the fields", "[log]") {
    log::init("test-daemon", log::level::info);
    stderr_capture cap;
    log::info("claimed \"job\"\n", {{"job_id", 42}, {"ok", true}, {"who", "a\tb"}});
    log::debug("not written at info level");
    const auto out = cap.text();
    REQUIRE(std::count(out.begin(), out.end(), '\n') == 1);
    rapidjson::Document d;
    d.Parse(out.c_str());
    REQUIRE_FALSE(d.HasParseError());
    CHECK(std::string(d["level"].GetString()) == "info");
    CHECK(std::string(d["daemon"].GetString()) == "test-daemon");
    CHECK(std::string(d["msg"].GetString()) == "claimed \"job\"\n");
    CHECK(d["job_id"].GetInt() == 42);
    CHECK(d["ok"].GetBool());
    CHECK(std::string(d["who"].GetString()) == "a\tb");
    const std::string ts = d["ts"].GetString();
    CHECK(ts.size() == 24);
    CHECK(ts.back() == 'Z');
}

TEST_CASE("connection strings are logged without their password", "[log]") {
    CHECK(log::redact_dsn("postgresql://awp:s3cr3t@db:5432/awp") ==
          "postgresql://awp:***@db:5432/awp");
    CHECK(log::redact_dsn("host=db password=s3cr3t user=awp") == "host=db password=*** user=awp");
    CHECK(log::redact_dsn("host=db password='a b c' user=awp") == "host=db password=*** user=awp");
    CHECK(log::redact_dsn("postgresql://db/awp?password=s3cr3t").find("s3cr3t") ==
          std::string::npos);
    CHECK(log::redact_dsn("host=db user=awp") == "host=db user=awp");
}

TEST_CASE("SQLSTATEs map to the exception types the code branches on", "[pg]") {
    auto thrown = [](const char* state) -> std::string {
        try {
            pg::throw_for_sqlstate(state, "m");
        } catch (const pg::unique_violation&) {
            return "unique";
        } catch (const pg::serialization_failure&) {
            return "serialization";
        } catch (const pg::deadlock_detected&) {
            return "deadlock";
        } catch (const pg::query_canceled&) {
            return "canceled";
        } catch (const pg::insufficient_privilege&) {
            return "privilege";
        } catch (const pg::domain_error&) {
            return "domain";
        } catch (const pg::sql_error& e) {
            return "sql:" + e.sqlstate();
        } catch (const pg::connection_error&) {
            return "connection";
        }
        return "none";
    };
    CHECK(thrown("23505") == "unique");
    CHECK(thrown("40001") == "serialization");
    CHECK(thrown("40P01") == "deadlock");
    CHECK(thrown("57014") == "canceled");
    CHECK(thrown("42501") == "privilege");
    CHECK(thrown("AW001") == "domain");
    CHECK(thrown("22P02") == "sql:22P02");
    CHECK(thrown("08006") == "connection");
    CHECK(thrown("57P01") == "connection");  // server shut down: reconnect, not a SQL bug
}

TEST_CASE("reconnect back-off grows, is capped and resets", "[pg]") {
    using std::chrono::milliseconds;
    pg::backoff b(milliseconds(100), milliseconds(1000));
    const auto first = b.next();
    CHECK(first >= milliseconds(100));
    CHECK(first <= milliseconds(125));
    for (int i = 0; i < 10; ++i) b.next();
    const auto capped = b.next();
    CHECK(capped >= milliseconds(1000));
    CHECK(capped <= milliseconds(1250));
    b.reset();
    CHECK(b.next() <= milliseconds(125));
}

TEST_CASE(
    "periodic waits (safety polls, heartbeats) are spread over the last quarter of the period, "
    "never longer",
    "[notify]") {
    // Hosts started together (a deploy, a restart of the database or of awp-wake) must not poll
    // or beat in the same instant every period: 1,000 hosts would be 2,000 leases at once. A
    // wait longer than the period would break its promise: a lost wake-up costs at most one
    // poll, a heartbeat comes at least once per interval.
    using std::chrono::milliseconds;
    const milliseconds period(30'000);
    milliseconds lo = period, hi(0);
    for (int k = 0; k < 2'000; ++k) {
        const auto w = awp::core::periodic_wait(period);
        REQUIRE(w >= milliseconds(22'500));
        REQUIRE(w <= period);
        lo = std::min(lo, w);
        hi = std::max(hi, w);
    }
    CHECK(lo < milliseconds(23'000));  // spread over the whole quarter
    CHECK(hi > milliseconds(29'500));
    CHECK(awp::core::periodic_wait(milliseconds(0)) == milliseconds(0));
}

TEST_CASE("query parameters render as Postgres text, NULL as nullopt", "[pg]") {
    CHECK(pg::param(42).value() == "42");
    CHECK(pg::param(-7L).value() == "-7");
    CHECK(pg::param(true).value() == "true");
    CHECK(pg::param("x y").value() == "x y");
    CHECK_FALSE(pg::param(std::nullopt).value().has_value());
    CHECK_FALSE(pg::param(std::optional<int>{}).value().has_value());
    CHECK(pg::param(std::optional<int>{5}).value() == "5");
    CHECK(pg::param(0.5).value() == "0.5");
}

namespace {
std::optional<int> parse_cli(std::vector<std::string> args, daemon::common_config& c,
                             std::string* printed = nullptr) {
    daemon::cli cli("awp-test", "test daemon");
    cli.add_common(c);
    std::vector<char*> argv;
    static std::string name = "awp-test";
    argv.push_back(name.data());
    for (auto& a : args) argv.push_back(a.data());
    if (printed) {
        // --print-config writes to stdout: capture it by swapping the buffer.
        std::ostringstream out;
        auto* old = std::cout.rdbuf(out.rdbuf());
        auto code = cli.parse(int(argv.size()), argv.data(), &c);
        std::cout.rdbuf(old);
        *printed = out.str();
        return code;
    }
    return cli.parse(int(argv.size()), argv.data(), &c);
}
}  // namespace

TEST_CASE("bad daemon options exit 78 so systemd does not restart-loop", "[daemon]") {
    daemon::common_config c;
    stderr_capture cap;  // CLI11 prints the reason
    CHECK(parse_cli({"--log-level", "loud"}, c) == daemon::kExitConfig);
    CHECK(parse_cli({"--drain-timeout", "-1"}, c) == daemon::kExitConfig);
    CHECK(parse_cli({"--no-such-flag"}, c) == daemon::kExitConfig);
    CHECK(cap.text().find("loud") != std::string::npos);
}

TEST_CASE("good options parse and --print-config hides the database password", "[daemon]") {
    daemon::common_config c;
    CHECK_FALSE(parse_cli({"--drain-timeout", "2.5", "--database-url", "postgresql://u:pw@h/d"}, c)
                    .has_value());
    CHECK(c.drain_timeout() == std::chrono::milliseconds(2500));
    CHECK(c.instance.find(":awp-test:") != std::string::npos);

    daemon::common_config c2;
    std::string printed;
    CHECK(parse_cli({"--print-config", "--database-url", "postgresql://u:pw@h/d"}, c2, &printed) ==
          0);
    CHECK(printed.find("--database-url = ***") != std::string::npos);
    CHECK(printed.find("pw") == std::string::npos);
    CHECK(printed.find("--drain-timeout = 20") != std::string::npos);
}

TEST_CASE("options come from the environment when not given as flags", "[daemon]") {
    setenv("DRAIN_TIMEOUT", "7", 1);
    daemon::common_config c;
    CHECK_FALSE(parse_cli({}, c).has_value());
    unsetenv("DRAIN_TIMEOUT");
    CHECK(c.drain_timeout_s == 7);
}

}  // namespace core_test
