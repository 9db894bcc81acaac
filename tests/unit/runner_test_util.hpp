// Shared by the tests of the runner's parts: a coroutine run to its end on a test's io_context,
// a command_io that records what the action code writes, and the fake runtime's folder.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "awp/core/uuid.hpp"
#include "command.hpp"
#include "config.hpp"
#include "outcome.hpp"
#include "support/test_db.hpp"

namespace awp::runner_test {

namespace net = boost::asio;

/// Runs the io_context until `a` has finished (at most `limit`); returns its value, rethrows.
template <class T>
T run_to_end(net::io_context& ioc, net::awaitable<T> a,
             std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    std::optional<T> out;
    std::exception_ptr err;
    bool finished = false;
    net::co_spawn(ioc, std::move(a), [&](std::exception_ptr e, T v) {
        finished = true;
        err = e;
        if (!e) out = std::move(v);
    });
    const auto until = std::chrono::steady_clock::now() + limit;
    ioc.restart();
    while (!finished && std::chrono::steady_clock::now() < until) {
        ioc.run_one_for(std::chrono::milliseconds(50));
        if (ioc.stopped()) ioc.restart();
    }
    REQUIRE(finished);
    if (err) std::rethrow_exception(err);
    return std::move(*out);
}

/// Runs the io_context until `done()` holds (at most `limit`); returns whether it did.
inline bool run_until(net::io_context& ioc, const std::function<bool()>& done,
                      std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto until = std::chrono::steady_clock::now() + limit;
    ioc.restart();
    while (!done() && std::chrono::steady_clock::now() < until) {
        ioc.run_one_for(std::chrono::milliseconds(50));
        if (ioc.stopped()) ioc.restart();
    }
    return done();
}

/// The service's side of the action code, recorded: nothing reaches a database.
struct recording_io : runner::command_io {
    bool keep_lease = true;
    std::vector<int> holds;  // lease seconds asked for
    std::vector<std::string> patches;
    std::vector<std::pair<std::string, std::string>> agent_states;         // agent slug, state
    std::vector<std::pair<std::string, runner::command_outcome>> written;  // command id, outcome

    net::awaitable<bool> hold_for(core::pg::session&, const runner::command_row&,
                                  int lease_seconds) override {
        holds.push_back(lease_seconds);
        co_return keep_lease;
    }
    net::awaitable<void> patch_payload(core::pg::session&, runner::command_row,
                                       std::string patch) override {
        patches.push_back(std::move(patch));
        co_return;
    }
    net::awaitable<void> agent_state(core::pg::session&, const runner::command_row&,
                                     std::string agent_slug, std::string state) override {
        agent_states.emplace_back(std::move(agent_slug), std::move(state));
        co_return;
    }
    net::awaitable<void> write_outcome(core::pg::session&, runner::command_row cmd,
                                       runner::command_outcome o) override {
        written.emplace_back(cmd.id, std::move(o));
        co_return;
    }
};

/// A temp folder with the fake runtime's control files (FAKE_RUNTIME_DIR), the runtime home,
/// the secrets and the state; and a configuration that uses them.
struct fake_runtime_box {
    std::filesystem::path root;
    fake_runtime_box() {
        root = std::filesystem::temp_directory_path() / test::random_name("awp-runner-part-");
        std::filesystem::create_directories(root / "fake");
        std::filesystem::create_directories(root / "home");
        ::setenv("FAKE_RUNTIME_DIR", (root / "fake").c_str(), 1);
        ::setenv("AWP_CHILD_ENV_ALLOW", "FAKE_*", 1);  // the stand-in runtime's settings
    }
    ~fake_runtime_box() {
        std::error_code ec;
        std::filesystem::remove_all(root, ec);
    }
    std::string fake(const std::string& name) const { return (root / "fake" / name).string(); }
    void set(const std::string& name, const std::string& content = "") const {
        std::ofstream(fake(name)) << content;
    }
    runner::runner_config config() const {
        runner::runner_config c;
        c.instance = test::random_name("runner-");
        c.agent_runtime = std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime";
        c.runtime = awp::runtime::cli(c.agent_runtime, "2026.6.1");
        c.scripts_dir = std::string(AWP_SOURCE_DIR) + "/deploy/runtime";
        c.runtime_home = (root / "home").string();
        c.secrets_dir = (root / "secrets").string();
        c.state_dir = (root / "state").string();
        c.command_timeout_s = 20;
        c.networking_mode = "remote";
        c.callback_port = 20000 + static_cast<int>(::getpid() % 20000);
        return c;
    }
};

/// What the row of `cmd` stores of `raw` (the service's one exit), with `synced` secrets.
inline runner::final_outcome settled(const runner::command_row& cmd, runner::command_outcome raw,
                                     std::vector<std::string> synced = {},
                                     std::size_t output_limit = 16 * 1024) {
    runner::known_secrets known;
    known.replace(std::move(synced));
    return runner::settle(cmd, std::move(raw), known, output_limit);
}

inline std::string new_id() { return core::uuid::generate_v4().to_string(); }

inline runner::command_row command(const std::string& action, const std::string& payload = "{}",
                                   std::optional<std::string> agent = std::nullopt) {
    runner::command_row c;
    c.id = new_id();
    c.tenant_id = "00000000-0000-0000-0000-000000000000";
    c.gateway_id = new_id();
    c.action = action;
    c.agent_slug = std::move(agent);
    c.payload = payload;
    c.lease_token = new_id();
    return c;
}

}  // namespace awp::runner_test
