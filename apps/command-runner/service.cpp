// The command runner service (docs/command-runner.md): start-up, the command queue as the shared
// lease driver sees it (lease and start; the final transition, written with the next lease), and
// the wiring of LISTEN, housekeeping and auth flows. What an action does is executor.cpp,
// runtime_ops.cpp and auth_flows.cpp; they return an outcome, conclude() settles it (the one
// exit, outcome.hpp) and the driver writes it.
#include "service.hpp"

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

#include "agent_state.hpp"
#include "awp/core/channels.hpp"
#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "awp/http/wake.hpp"
#include "pre_run.hpp"
#include "queue_sql.hpp"
#include "registration.hpp"
#include "scrub.hpp"

namespace awp::runner {

namespace pg = core::pg;
namespace log = core::log;
using namespace std::chrono_literals;

runner_service::runner_service(net::io_context& ioc, runner_config cfg)
    : ioc_(ioc),
      cfg_(std::move(cfg)),
      db_(cfg_.database_url, "runner"),
      hk_(ioc.get_executor(), cfg_, [this] { return auth_flows(); }),
      flows_idle_(ioc.get_executor()) {}

runner_service::~runner_service() = default;

void runner_service::request_stop() {
    stopping_ = true;
    if (driver_) driver_->stop();
    hk_.stop();
    if (flows_) flows_->stop_all();
    flows_idle_.set();
}

// ---- start-up ------------------------------------------------------------------------------

net::awaitable<void> runner_service::run() {
    const std::string configured = co_await register_gateway(db_, cfg_, stopping_);
    if (stopping_) co_return;
    // GATEWAY_ID (or the stored registration) resolved once to the gateway's id and tenant.
    const auto gw = co_await resolve_gateway(db_, cfg_, configured, stopping_);
    if (!gw) co_return;
    gateway_id_ = gw->id;
    slug_ = gw->slug;
    tenant_id_ = gw->tenant_id;
    hk_.set_gateway(gateway_id_, slug_, tenant_id_);
    command_io& io = *this;  // what the action code may write of a command
    executor_ = std::make_unique<executor>(cfg_, slug_, db_, io, hk_);
    flows_ =
        std::make_unique<runner::auth_flows>(ioc_, cfg_, slug_, io, hk_.secrets(), flows_idle_);
    for (;;) {
        std::string failure;
        bool fatal = false;
        try {
            co_await hk_.heartbeat(db_);
            break;
        } catch (const pg::connection_error& e) {
            failure = e.what();
            db_.reset();
        } catch (const pg::not_found& e) {
            failure = e.what();
            fatal = true;
        } catch (const pg::domain_error& e) {
            failure = e.what();
        }
        if (fatal) throw core::config_error("gateway \"" + slug_ + "\": " + failure);
        log::warn("start-up: cannot reach the gateway row, retrying", {{"error", failure}});
        co_await sleep_ms(1s);
        if (stopping_) co_return;
    }
    log::info("runner starting", {{"gateway", slug_},
                                  {"gateway_id", gateway_id_},
                                  {"instance", cfg_.instance},
                                  {"runtime_mode", to_string(cfg_.mode)}});
    auto dead_runs = co_await recover_dead_runs(db_, gateway_id_, cfg_.instance);
    // Through the one exit like any other end: the payload's secrets go with it.
    for (auto& dead : dead_runs) {
        co_await write_outcome(db_, dead.cmd, std::move(dead.outcome));
        log::warn("failed a command left running by a dead runner",
                  {{"command_id", dead.cmd.id}, {"runner", dead.holder}});
    }
    co_await hk_.first_sync(db_);

    auto ex = co_await net::this_coro::executor;
    const std::string commands_channel = core::channels::commands(gateway_id_),
                      secrets_channel = core::channels::secrets(gateway_id_);
    core::queue_options qo;
    qo.name = "commands";
    qo.concurrency = 1;
    qo.finish_with_next_lease = true;  // sql/0015: one transaction per command
    qo.retry = transition_retry();
    http::use_wake_source(qo.listen, cfg_.wake, cfg_.database_url);
    qo.listen.channels = {commands_channel, secrets_channel};
    qo.listen.safety_poll = std::chrono::milliseconds(static_cast<long>(cfg_.safety_poll_s * 1000));
    qo.listen.name = "runner-listen";
    core::queue_hooks hooks;
    hooks.on_notify = [this, commands_channel](const pg::notification& n) {
        if (n.channel == commands_channel) return true;
        hk_.sync_soon();
        return false;
    };
    hooks.on_rescan = [this](core::rescan_reason why) {
        if (why == core::rescan_reason::safety_poll) {
            hk_.heartbeat_soon();  // one timer for both: no extra wake-ups while idle
        } else {
            hk_.sync_soon();
        }
        if (!ready_) {
            ready_ = true;
            core::daemon::notify_ready();
            log::info("ready", {{"gateway", slug_}});
        }
    };
    driver_ = std::make_unique<core::queue_driver<command_queue>>(ex, queue_, qo, std::move(hooks));
    if (stopping_) co_return;
    // Housekeeping and auth flows refer to this object: run() returns only after they ended.
    net::co_spawn(ex, run_housekeeping(), net::detached);
    co_await driver_->run();  // returns after the last command's transition and the listener
    while (!flows_->empty() || !housekeeping_done_) co_await flows_idle_.wait();
}

net::awaitable<void> runner_service::run_housekeeping() {
    co_await hk_.run();
    housekeeping_done_ = true;
    flows_idle_.set();
}

// ---- the queue ---------------------------------------------------------------------------

namespace {

// A row of kLeaseAndStart / kFinishAndLease.
command_row command_from(const pg::result& r) {
    command_row c;
    c.id = r.get<std::string>(0, 0);
    c.tenant_id = r.get<std::string>(0, 1);
    c.gateway_id = r.get<std::string>(0, 2);
    c.action = r.get<std::string>(0, 3);
    c.agent_slug = r.get_optional<std::string>(0, 4);
    c.payload = r.get<std::string>(0, 5);
    c.lease_token = r.get<std::string>(0, 6);
    c.requested_by_operator = r.get<bool>(0, 7);
    return c;
}

core::lease_batch<command_row> batch_of(const pg::result& r) {
    core::lease_batch<command_row> b;
    if (!r.empty()) b.items.push_back(command_from(r));
    return b;
}

std::optional<std::string> text_or_null(const std::string& s) {
    if (s.empty()) return std::nullopt;
    return s;
}

// The parameters of sql::kComplete (done) or sql::kFail (failed) for a settled outcome.
pg::params transition_params(const command_row& c, const final_outcome& o) {
    if (o.done()) {
        return pg::params{
            c.id,          o.exit_code().value_or(0), text_or_null(o.out()), text_or_null(o.err()),
            c.lease_token, text_or_null(o.patch())};
    }
    return pg::params{c.id,
                      o.exit_code(),
                      o.error(),
                      c.lease_token,
                      text_or_null(o.out()),
                      text_or_null(o.err()),
                      text_or_null(o.patch())};
}

}  // namespace

// One back-off for every transition of a command: the driver's final ones and the runner's own.
core::retry_policy runner_service::transition_retry() { return command_retry(); }

net::awaitable<core::lease_batch<command_row>> command_queue::lease(std::size_t) {
    // Leased and started in one prepared statement (see queue_sql.hpp).
    co_return batch_of(co_await svc.db_.query_prepared(sql::kLeaseAndStart,
                                                       svc.cfg_.lease_seconds(), svc.gateway_id_,
                                                       svc.cfg_.instance, svc.tenant_id_));
}

net::awaitable<core::lease_batch<command_row>> command_queue::finish_and_lease(
    const command_row& c, const final_outcome& o, std::size_t room) {
    if (o.writes_nothing()) co_return co_await lease(room);
    const bool done = o.done();
    const std::optional<int> exit_code =
        done ? std::optional<int>(o.exit_code().value_or(0)) : o.exit_code();
    const std::optional<std::string> error =
        done ? std::nullopt : std::optional<std::string>(o.error());
    // The command's final transition and the next lease, in one transaction.
    co_return batch_of(co_await svc.db_.query_prepared(
        sql::kFinishAndLease, c.id, c.lease_token, std::string(done ? "done" : "failed"), exit_code,
        error, text_or_null(o.out()), text_or_null(o.err()), text_or_null(o.patch()),
        svc.cfg_.lease_seconds(), svc.gateway_id_, svc.cfg_.instance, svc.tenant_id_));
}

net::awaitable<final_outcome> command_queue::work(command_row& cmd, std::size_t) {
    log::info("command started", {{"command_id", cmd.id}, {"action", cmd.action}});
    co_return co_await svc.conclude(svc.db_, cmd, co_await svc.outcome_of(cmd));
}

final_outcome command_queue::failed(const command_row& cmd, std::string what) const {
    // A handler that threw (a bug): settled all the same, so the payload's secrets still go.
    return settle(cmd, command_outcome::failure(std::move(what)), svc.hk_.secrets(),
                  svc.cfg_.output_limit);
}

net::awaitable<void> command_queue::finish(const command_row& c, const final_outcome& o,
                                           std::size_t) {
    if (o.writes_nothing()) co_return;
    // Parameters built apart from the co_await: GCC 12 miscompiles a braced list inside one.
    pg::params params = transition_params(c, o);
    co_await svc.db_.exec(o.done() ? sql::kComplete : sql::kFail, std::move(params), false,
                          /*prepared=*/true);
}

void command_queue::settled(const command_row& c, const final_outcome& o,
                            core::finish_status status) {
    if (status != core::finish_status::written || o.writes_nothing()) return;
    if (o.done()) {
        log::info("command done", {{"command_id", c.id}, {"action", c.action}});
    } else {
        log::info("command failed",
                  {{"command_id", c.id}, {"action", c.action}, {"error", o.error()}});
    }
}

net::awaitable<command_outcome> runner_service::outcome_of(const command_row& cmd) {
    plan p;
    std::string invalid;
    try {
        p = plan_command(cmd, cfg_);
    } catch (const invalid_command& e) {
        invalid = e.what();
    } catch (const std::exception& e) {
        invalid = cmd.action + ": " + e.what();
    }
    if (!invalid.empty()) {
        log::warn("command refused",
                  {{"command_id", cmd.id}, {"action", cmd.action}, {"error", invalid}});
        co_return command_outcome::failure(invalid);
    }
    if (cmd.action == "run_shell" && !cmd.requested_by_operator) {
        // The database decided at insert (sql/0022); checked again here, so a row written
        // around the trigger (a superuser, a restored dump) still runs only as the policy says.
        // An operator's command (the leased row says so) runs whatever the policy: no read.
        pg::params params{cmd.id};
        auto gate = co_await read_before_run(
            db_, cmd, std::string("run_shell policy"),
            std::string("SELECT g.run_shell_policy, c.requested_by_operator FROM "
                        "public.agent_commands c JOIN public.gateways g ON g.id = c.gateway_id "
                        "WHERE c.id = $1::uuid"),
            std::move(params));
        if (!gate) co_return command_outcome::of(command_outcome::kind::abandoned);
        if (gate->empty() ||
            (gate->get<std::string>(0, 0) != "members" && !gate->get<bool>(0, 1))) {
            co_return command_outcome::failure(
                "run_shell: this gateway runs shell commands of operators only "
                "(gateways.run_shell_policy = operators); nothing was executed");
        }
    }
    if (cmd.action == "provision" || cmd.action == "remove") {
        // Two agents whose slugs the runtime maps to one id (Ana, ana) would be one agent in
        // the runtime: a second provision would take over the first, a remove delete both.
        const auto other = co_await executor_->shared_runtime_id(cmd, p.fields.at("agent_slug"),
                                                                 p.fields.at("agent_id"));
        if (!other) co_return command_outcome::of(command_outcome::kind::abandoned);
        if (!other->empty()) {
            co_return command_outcome::failure(
                cmd.action + ": agent \"" + p.fields.at("agent_slug") + "\" and agent \"" + *other +
                "\" of this gateway are the same agent in the runtime (id \"" +
                p.fields.at("agent_id") + "\"); rename one of them; nothing was changed");
        }
    }
    switch (p.kind) {
        case plan_kind::spawn:
        case plan_kind::provision:
        case plan_kind::set_agent_model:
            co_return co_await executor_->run_steps(cmd, std::move(p));
        case plan_kind::auth_start:
            co_return co_await flows_->start(db_, cmd, std::move(p));
        case plan_kind::auth_paste:
            co_return co_await flows_->paste(cmd, std::move(p));
        case plan_kind::source_write:
            co_return co_await executor_->run_source_write(cmd, std::move(p));
        case plan_kind::list_models:
        case plan_kind::auth_set_default:
            co_return co_await executor_->run_runtime_op(cmd, std::move(p));
        default:
            co_return co_await executor_->run_local(cmd, std::move(p));
    }
}

net::awaitable<final_outcome> runner_service::conclude(pg::session& db, const command_row& cmd,
                                                       command_outcome raw) {
    final_outcome o = settle(cmd, std::move(raw), hk_.secrets(), cfg_.output_limit);
    if (o.writes_nothing()) co_return o;
    // The agents row a provision or set_agent_model changes, before the final transition gives
    // the lease up (the row's function checks it).
    if (auto state = agent_state_of(cmd, o)) {
        co_await agent_state(db, cmd, std::move(state->agent_slug), std::move(state->json));
    }
    co_return o;
}

net::awaitable<void> runner_service::write_outcome(pg::session& db, command_row cmd,
                                                   command_outcome raw) {
    const final_outcome o = co_await conclude(db, cmd, std::move(raw));
    if (o.writes_nothing()) co_return;  // handed off: the auth flow writes it; else nothing ran
    pg::params params = transition_params(cmd, o);
    const bool ok =
        co_await transition(db, o.done() ? "complete" : "fail",
                            o.done() ? sql::kComplete : sql::kFail, std::move(params), cmd.id);
    if (ok) queue_.settled(cmd, o, core::finish_status::written);
}

net::awaitable<void> runner_service::agent_state(pg::session& db, const command_row& cmd,
                                                 std::string agent_slug, std::string state) {
    pg::params params{cmd.id, cmd.lease_token, agent_slug, state};
    // A refusal (the agent is not this gateway's, the lease is gone) is logged; the command's
    // own outcome stands.
    co_await transition(db, "agent state", sql::kAgentState, std::move(params), cmd.id);
}

// ---- transitions ---------------------------------------------------------------------------

net::awaitable<bool> runner_service::hold_for(pg::session& db, const command_row& cmd,
                                              int lease_seconds) {
    // Leased and started with COMMAND_TIMEOUT + 60 s; only a longer run extends it.
    if (lease_seconds <= cfg_.lease_seconds()) co_return true;
    pg::params params{cmd.id, cmd.lease_token, lease_seconds};
    co_return co_await transition(db, "extend lease", sql::kExtendLease, std::move(params), cmd.id);
}

net::awaitable<void> runner_service::patch_payload(pg::session& db, command_row cmd,
                                                   std::string patch) {
    pg::params params{cmd.id, patch, cmd.lease_token};
    co_await transition(db, "patch payload", sql::kPatchPayload, std::move(params), cmd.id);
}

net::awaitable<bool> runner_service::transition(pg::session& db, std::string what, std::string sql,
                                                pg::params params, std::string command_id) {
    const auto status = co_await core::retry_transition(
        transition_retry(), "commands", what + " " + command_id,
        [&]() -> net::awaitable<void> { co_await db.exec(sql, params, false, /*prepared=*/true); });
    co_return status == core::finish_status::written;
}

}  // namespace awp::runner
