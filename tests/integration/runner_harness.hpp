// Shared by the runner's integration tests: a runner service on its own thread against a test
// database, the fake runtime's recorded calls, and row helpers.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "service.hpp"
#include "support/test_db.hpp"

namespace awp::runner_test {

namespace pg = awp::core::pg;
namespace net = boost::asio;
using namespace std::chrono_literals;

inline constexpr const char* kDefaultTenant = "00000000-0000-0000-0000-000000000000";

inline std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    REQUIRE(r.size() == 1);
    return r.is_null(0, 0) ? std::string("<null>") : std::string(r.text(0, 0));
}

inline bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit = 10s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (cond()) return true;
        std::this_thread::sleep_for(20ms);
    }
    return cond();
}

/// A temp folder for the fake runtime's control files, the runtime home and the secrets.
struct sandbox {
    std::filesystem::path root;
    std::string old_path;
    sandbox() {
        root = std::filesystem::temp_directory_path() / test::random_name("awp-runner-");
        std::filesystem::create_directories(root / "fake");
        std::filesystem::create_directories(root / "home");
        ::setenv("FAKE_RUNTIME_DIR", (root / "fake").c_str(), 1);
        ::setenv("AWP_CHILD_ENV_ALLOW", "FAKE_*", 1);  // the stand-in runtime's settings
        const char* p = std::getenv("PATH");
        old_path = p ? p : "/usr/bin:/bin";
        ::setenv("PATH", (std::string(AWP_SOURCE_DIR) + "/tests/fakes/path:" + old_path).c_str(),
                 1);
    }
    ~sandbox() {
        ::setenv("PATH", old_path.c_str(), 1);
        std::error_code ec;
        std::filesystem::remove_all(root, ec);
    }
    std::string fake(const std::string& name) const { return (root / "fake" / name).string(); }
    void set(const std::string& name, const std::string& content = "") const {
        std::ofstream(fake(name)) << content;
    }
    /// Every recorded invocation, argv decoded.
    std::vector<std::vector<std::string>> calls() const {
        std::vector<std::vector<std::string>> out;
        std::ifstream in(fake("calls"));
        std::string line;
        while (std::getline(in, line)) {
            std::vector<std::string> argv;
            std::istringstream words(line);
            std::string w;
            while (words >> w) argv.push_back(core::crypto::base64_decode(w));
            out.push_back(argv);
        }
        return out;
    }
};

inline runner::runner_config base_config(const std::string& dsn, const sandbox& box,
                                         const std::string& slug) {
    runner::runner_config c;
    c.database_url = dsn;
    c.gateway_slug = slug;
    c.instance = test::random_name("runner-");
    c.agent_runtime = std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime";
    c.runtime = awp::runtime::cli(c.agent_runtime, "2026.6.1");
    c.scripts_dir = std::string(AWP_SOURCE_DIR) + "/deploy/runtime";
    c.runtime_home = (box.root / "home").string();
    c.secrets_dir = (box.root / "secrets").string();
    c.state_dir = (box.root / "state").string();
    c.command_timeout_s = 20;
    c.networking_mode = "remote";
    c.service_role_key = "runner-test-service-role-key";
    c.callback_port = 20000 + static_cast<int>(::getpid() % 20000);
    c.safety_poll_s = 30;
    return c;
}
inline runner::runner_config base_config(const test::scoped_database& db, const sandbox& box,
                                         const std::string& slug) {
    return base_config(db.daemon_dsn(), box, slug);
}

/// The runner service on a thread of its own; stopped and joined on destruction.
class running_runner {
public:
    explicit running_runner(runner::runner_config cfg) : svc_(ioc_, std::move(cfg)) {
        net::co_spawn(ioc_, svc_.run(), [this](std::exception_ptr e) {
            failure_ = e;
            ended_ = true;
        });
        thread_ = std::thread([this] { ioc_.run(); });
        REQUIRE(eventually(
            [this] { return on_io<bool>([this] { return svc_.ready(); }) || ended_; }, 15s));
        REQUIRE_FALSE(ended_);
    }
    ~running_runner() { stop(); }
    void stop() {
        if (!thread_.joinable()) return;
        net::post(ioc_, [this] { svc_.request_stop(); });
        eventually([this] { return ended_.load(); }, 15s);
        ioc_.stop();
        thread_.join();
    }
    template <class T>
    T on_io(std::function<T()> f) {
        std::promise<T> p;
        auto fut = p.get_future();
        net::post(ioc_, [&] { p.set_value(f()); });
        if (fut.wait_for(5s) != std::future_status::ready) return T{};
        return fut.get();
    }
    runner::runner_service& service() { return svc_; }

private:
    net::io_context ioc_;
    runner::runner_service svc_;
    std::thread thread_;
    std::exception_ptr failure_;
    std::atomic<bool> ended_{false};
};

struct gateway_fixture {
    std::string slug, id, agent_id;
    gateway_fixture(pg::connection& admin, const std::string& agent_slug = "ana") {
        slug = test::random_name("gw");
        id = one(admin,
                 "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, "
                 "'ready') RETURNING id",
                 {kDefaultTenant, slug});
        agent_id = one(
            admin,
            "INSERT INTO agents (tenant_id, name, slug, gateway_id) VALUES ($1, $2, $2 || '-' || "
            "left(md5(random()::text), 6), $3::uuid) "
            "RETURNING id",
            {kDefaultTenant, agent_slug, id});
        agent = one(admin, "SELECT slug FROM agents WHERE id = $1", {agent_id});
    }
    std::string agent;
};

inline std::string enqueue(pg::connection& admin, const std::string& gateway_id,
                           const std::string& action, const std::string& payload = "{}",
                           const std::optional<std::string>& agent_slug = std::nullopt) {
    return one(
        admin,
        "INSERT INTO agent_commands (tenant_id, gateway_id, agent_slug, action, payload, status) "
        "VALUES ($1, $2, $3, $4::command_action, $5::jsonb, 'pending') RETURNING id",
        {kDefaultTenant, gateway_id, agent_slug, action, payload});
}

struct command_state {
    std::string status, exit_code, stdout_, stderr_, error, payload;
};

inline command_state read_command(pg::connection& c, const std::string& id) {
    auto r = c.exec(
        "SELECT status::text, coalesce(exit_code::text, '<null>'), coalesce(stdout, ''), "
        "coalesce(stderr, ''), "
        "coalesce(error_message, ''), payload::text FROM agent_commands WHERE id = $1",
        {id});
    REQUIRE(r.size() == 1);
    return {std::string(r.text(0, 0)), std::string(r.text(0, 1)), std::string(r.text(0, 2)),
            std::string(r.text(0, 3)), std::string(r.text(0, 4)), std::string(r.text(0, 5))};
}

/// Waits until the command is done, failed or cancelled and returns it.
inline command_state wait_finished(pg::connection& c, const std::string& id,
                                   std::chrono::milliseconds limit = 15s) {
    command_state s;
    eventually(
        [&] {
            s = read_command(c, id);
            return s.status == "done" || s.status == "failed" || s.status == "cancelled";
        },
        limit);
    return s;
}

}  // namespace awp::runner_test
