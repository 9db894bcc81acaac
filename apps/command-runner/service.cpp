// The command runner service (docs/command-runner.md): start-up, the queue (lease, handle, the
// final transitions, written with the next lease) and the wiring of LISTEN, housekeeping and auth
// flows. What an action does is executor.cpp and auth_flows.cpp; they return an outcome and
// handle() writes it.
#include "service.hpp"

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

#include "awp/core/channels.hpp"
#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
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
    if (listener_) listener_->stop();
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
        } catch (const pg::domain_error& e) {
            failure = e.what();
            fatal = e.sqlstate() == "AW003";
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
    driver_ = std::make_unique<core::queue_driver<command_queue>>(ex, queue_, qo);
    core::listener_options lo;
    lo.dsn = cfg_.database_url;
    lo.channels = {commands_channel, secrets_channel};
    lo.safety_poll = std::chrono::milliseconds(static_cast<long>(cfg_.safety_poll_s * 1000));
    lo.name = "runner-listen";
    listener_ = std::make_unique<core::listener>(
        lo,
        [this, commands_channel](const pg::notification& n) {
            if (n.channel == commands_channel) {
                driver_->wake();
            } else {
                hk_.sync_soon();
            }
        },
        [this](core::rescan_reason why) {
            driver_->wake();
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
        });
    if (stopping_) co_return;
    // The listener and housekeeping refer to this object: run() returns only after both ended.
    net::co_spawn(ex, listener_->run(), [this](std::exception_ptr) {
        listener_done_ = true;
        flows_idle_.set();
    });
    net::co_spawn(ex, run_housekeeping(), net::detached);
    co_await driver_->run();
    co_await flush_final();  // the last command's transition, when no lease followed it
    while (!flows_->empty() || !housekeeping_done_ || !listener_done_) co_await flows_idle_.wait();
}

net::awaitable<void> runner_service::run_housekeeping() {
    co_await hk_.run();
    housekeeping_done_ = true;
    flows_idle_.set();
}

// ---- the queue ---------------------------------------------------------------------------

net::awaitable<core::lease_batch<command_row>> command_queue::lease(std::size_t) {
    core::lease_batch<command_row> b;
    if (auto c = co_await svc.lease()) b.items.push_back(std::move(*c));
    co_return b;
}

net::awaitable<command_queue::outcome> command_queue::work(command_row& cmd, std::size_t) {
    co_await svc.handle(cmd);
    co_return outcome{};
}

net::awaitable<void> command_queue::finish(const command_row& cmd, const outcome& out,
                                           std::size_t) {
    if (!out.crash.empty()) co_await svc.fail(svc.db_, cmd, std::nullopt, out.crash, "", "", "");
}

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
    return c;
}

}  // namespace

net::awaitable<std::optional<command_row>> runner_service::lease() {
    pg::result r;
    std::string failure;
    if (final_) {
        // The last command's final transition and this lease, in one transaction.
        const final_transition& f = *final_;
        const command_row& c = f.cmd;
        bool written = false;
        try {
            r = co_await db_.query_prepared(sql::kFinishAndLease, c.id, c.lease_token,
                                            std::string(f.done ? "done" : "failed"), f.exit_code,
                                            f.error, f.out, f.err, f.patch, cfg_.lease_seconds(),
                                            gateway_id_, cfg_.instance, tenant_id_);
            written = true;
        } catch (const pg::connection_error& e) {
            failure = e.what();
            db_.reset();
        } catch (const pg::sql_error&) {
        }
        // A lost connection keeps final_ for the next lease(), which the driver retries; should
        // the lost call have committed, that retry's transition is refused and logged as such.
        if (!failure.empty()) throw pg::connection_error(failure);
        if (written) {
            log_final(f);
            final_.reset();
            if (r.empty()) co_return std::nullopt;
            co_return command_from(r);
        }
        // One part was refused, so nothing was written: the two calls apart, each reporting its
        // own error (a refused transition is logged; a refused lease throws below).
        co_await flush_final();
    }
    try {
        // Leased and started in one prepared statement (see queue_sql.hpp).
        r = co_await db_.query_prepared(sql::kLeaseAndStart, cfg_.lease_seconds(), gateway_id_,
                                        cfg_.instance, tenant_id_);
    } catch (const pg::connection_error& e) {
        failure = e.what();
        db_.reset();
    }
    if (!failure.empty()) throw pg::connection_error(failure);
    if (r.empty()) co_return std::nullopt;
    co_return command_from(r);
}

net::awaitable<void> runner_service::handle(command_row cmd) {
    log::info("command started", {{"command_id", cmd.id}, {"action", cmd.action}});
    command_outcome o = co_await outcome_of(cmd);
    co_await write_outcome(db_, std::move(cmd), std::move(o));
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
        co_return command_outcome::failure(invalid, std::nullopt, "", "", scrub_patch(cmd, false));
    }
    if (cmd.action == "run_shell") {
        // The database decided at insert (sql/0022); checked again here, so a row written
        // around the trigger (a superuser, a restored dump) still runs only as the policy says.
        auto gate = co_await db_.query(
            "SELECT g.run_shell_policy, c.requested_by_operator FROM public.agent_commands c "
            "JOIN public.gateways g ON g.id = c.gateway_id WHERE c.id = $1::uuid",
            cmd.id);
        if (gate.empty() || (gate.get<std::string>(0, 0) != "members" && !gate.get<bool>(0, 1))) {
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
        if (!other.empty()) {
            co_return command_outcome::failure(
                cmd.action + ": agent \"" + p.fields.at("agent_slug") + "\" and agent \"" + other +
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
        default:
            co_return co_await executor_->run_local(cmd, std::move(p));
    }
}

net::awaitable<void> runner_service::write_outcome(pg::session& db, command_row cmd,
                                                   command_outcome o) {
    switch (o.k) {
        case command_outcome::kind::done:
            co_await complete(db, std::move(cmd), o.exit_code.value_or(0), std::move(o.out),
                              std::move(o.err), std::move(o.patch));
            break;
        case command_outcome::kind::failed:
            co_await fail(db, std::move(cmd), o.exit_code, std::move(o.error), std::move(o.out),
                          std::move(o.err), std::move(o.patch));
            break;
        case command_outcome::kind::handed_off:  // the auth flow writes it
        case command_outcome::kind::lease_lost:  // nothing ran; the lease is someone else's
            break;
    }
}

// ---- transitions ---------------------------------------------------------------------------

net::awaitable<bool> runner_service::hold_for(pg::session& db, const command_row& cmd,
                                              int lease_seconds) {
    // Leased and started with COMMAND_TIMEOUT + 60 s (lease()); only a longer run extends it.
    if (lease_seconds <= cfg_.lease_seconds()) co_return true;
    pg::params params{cmd.id, cmd.lease_token, lease_seconds};
    co_return co_await transition(db, "extend lease", sql::kExtendLease, std::move(params), cmd.id);
}

net::awaitable<void> runner_service::complete(pg::session& db, command_row cmd, int exit_code,
                                              std::string out, std::string err, std::string patch) {
    final_transition f;
    f.cmd = std::move(cmd);
    f.exit_code = exit_code;
    if (!out.empty()) f.out = std::move(out);
    if (!err.empty()) f.err = std::move(err);
    if (!patch.empty()) f.patch = std::move(patch);
    co_await finish(db, std::move(f));
}

net::awaitable<void> runner_service::fail(pg::session& db, command_row cmd,
                                          std::optional<int> exit_code, std::string error,
                                          std::string out, std::string err, std::string patch) {
    final_transition f;
    f.cmd = std::move(cmd);
    f.done = false;
    f.exit_code = exit_code;
    f.error = error_text(error);
    if (!out.empty()) f.out = std::move(out);
    if (!err.empty()) f.err = std::move(err);
    if (!patch.empty()) f.patch = std::move(patch);
    co_await finish(db, std::move(f));
}

net::awaitable<void> runner_service::finish(pg::session& db, final_transition f) {
    if (&db != &db_) {
        co_await write_final(db, std::move(f));
        co_return;
    }
    // Made with the next lease (lease()), or by flush_final() when no lease follows.
    co_await flush_final();  // a handler ends with one final transition; never keep two
    final_ = std::move(f);
}

net::awaitable<void> runner_service::flush_final() {
    if (!final_) co_return;
    final_transition f = std::move(*final_);
    final_.reset();
    co_await write_final(db_, std::move(f));
}

net::awaitable<void> runner_service::write_final(pg::session& db, final_transition f) {
    const command_row& c = f.cmd;
    pg::params params;
    std::string what, sql_text;
    if (f.done) {
        what = "complete";
        sql_text = sql::kComplete;
        params = pg::params{c.id, f.exit_code.value_or(0), f.out, f.err, c.lease_token, f.patch};
    } else {
        what = "fail";
        sql_text = sql::kFail;
        params = pg::params{c.id, f.exit_code, f.error, c.lease_token, f.out, f.err, f.patch};
    }
    const bool ok =
        co_await transition(db, std::move(what), std::move(sql_text), std::move(params), c.id);
    if (ok) log_final(f);
}

void runner_service::log_final(const final_transition& f) const {
    if (f.done) {
        log::info("command done", {{"command_id", f.cmd.id}, {"action", f.cmd.action}});
    } else {
        log::info(
            "command failed",
            {{"command_id", f.cmd.id}, {"action", f.cmd.action}, {"error", f.error.value_or("")}});
    }
}

net::awaitable<void> runner_service::patch_payload(pg::session& db, command_row cmd,
                                                   std::string patch) {
    pg::params params{cmd.id, patch, cmd.lease_token};
    co_await transition(db, "patch payload", sql::kPatchPayload, std::move(params), cmd.id);
}

net::awaitable<bool> runner_service::transition(pg::session& db, std::string what, std::string sql,
                                                pg::params params, std::string command_id) {
    // A broken connection is retried (the statement either committed or not; a second attempt
    // after a commit fails with AW001/AW002 and is reported, never applied twice).
    for (int attempt = 0;; ++attempt) {
        std::string failure;
        bool domain = false;
        try {
            co_await db.exec(sql, params, false, /*prepared=*/true);
            co_return true;
        } catch (const pg::connection_error& e) {
            failure = e.what();
            db.reset();
        } catch (const pg::sql_error& e) {
            failure = e.what();
            domain = true;
        }
        if (domain || attempt >= 30) {
            log::warn("command transition refused",
                      {{"command_id", command_id}, {"transition", what}, {"error", failure}});
            co_return false;
        }
        log::warn("database unavailable during a transition, retrying",
                  {{"command_id", command_id}, {"transition", what}, {"error", failure}});
        co_await sleep_ms(std::chrono::milliseconds(std::min(250 * (attempt + 1), 3000)));
    }
}

}  // namespace awp::runner
