// The command runner service (docs/command-runner.md): the loop, every action's execution, the
// auth flows, start-up recovery, heartbeat and secrets sync.
#include "service.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/channels.hpp"
#include "awp/core/child_env.hpp"
#include "awp/core/error.hpp"
#include "awp/core/gateway.hpp"
#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/core/process.hpp"
#include "awp/core/time.hpp"
#include "awp/runtime/openclaw.hpp"
#include "local_ops.hpp"
#include "queue_sql.hpp"
#include "secrets.hpp"
#include "sources.hpp"

namespace awp::runner {

namespace pg = core::pg;
namespace log = core::log;
namespace proc = core::process;
namespace rj = rapidjson;
using namespace std::chrono_literals;

namespace {

constexpr const char* kDaemon = "command-runner";
constexpr std::size_t kErrorLimit = 2000;
/// Ceiling of a JSON stdout (list_models, auth_list, auth_refresh), kept valid by trimming
/// entries (docs/runtime.md).
constexpr std::size_t kJsonOutputLimit = 256 * 1024;
constexpr std::size_t kAuthOutputLimit = 2000;

/// {"k": "v", ...} from string pairs (values escaped properly).
std::string json_object(const std::vector<std::pair<std::string, std::string>>& kv) {
    rj::StringBuffer buf;
    rj::Writer<rj::StringBuffer> w(buf);
    w.StartObject();
    for (const auto& [k, v] : kv) {
        w.Key(k.c_str(), static_cast<rj::SizeType>(k.size()));
        w.String(v.c_str(), static_cast<rj::SizeType>(v.size()));
    }
    w.EndObject();
    return {buf.GetString(), buf.GetSize()};
}

std::string connection_state(const std::vector<std::pair<std::string, std::string>>& fields,
                             bool auto_callback = false) {
    std::string obj = json_object(fields);
    if (auto_callback) obj = obj.substr(0, obj.size() - 1) + ",\"autoCallback\":true}";
    return "{\"connection_state\":" + obj + "}";
}

bool pid_alive(long pid) {
    if (pid <= 0) return false;
    if (::kill(static_cast<pid_t>(pid), 0) == 0) return true;
    return errno != ESRCH;
}

std::string hostname() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

net::awaitable<void> sleep_ms(std::chrono::milliseconds d) {
    net::steady_timer t(co_await net::this_coro::executor, d);
    boost::system::error_code ec;
    co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
}

}  // namespace

/// One interactive login in progress (spec: auth_start runs in the background).
struct auth_flow {
    command_row cmd;
    std::string provider, profile_name, mode;
    std::unique_ptr<proc::interactive_process> process;
    std::unique_ptr<net::ip::tcp::acceptor> callback_holder;  // keeps 127.0.0.1:1455 busy
    std::vector<std::string> secrets;                         // pasted values: never stored
    bool stopped_by_runner = false;
};

runner_service::runner_service(net::io_context& ioc, runner_config cfg)
    : ioc_(ioc),
      cfg_(std::move(cfg)),
      db_(cfg_.database_url, "runner"),
      hk_db_(cfg_.database_url, "runner-housekeeping"),
      housekeeping_wake_(ioc.get_executor()),
      flows_idle_(ioc.get_executor()) {
    started_at_ = core::now_iso8601_utc();
    secrets_key_ = secrets_key(cfg_.hosted_secrets_key, cfg_.service_role_key);
}

runner_service::~runner_service() = default;

void runner_service::request_stop() {
    stopping_ = true;
    if (listener_) listener_->stop();
    if (driver_) driver_->stop();
    housekeeping_wake_.set();
    for (auto& [id, f] : flows_) {
        f->stopped_by_runner = true;
        if (f->process) f->process->terminate();
    }
    flows_idle_.set();
}

// ---- start-up ------------------------------------------------------------------------------

net::awaitable<void> runner_service::register_gateway() {
    configured_gateway_ = cfg_.gateway_slug;
    if (!configured_gateway_.empty()) co_return;
    const std::filesystem::path state = std::filesystem::path(cfg_.state_dir) / "registration.json";
    {
        std::ifstream in(state);
        std::stringstream ss;
        ss << in.rdbuf();
        auto d = core::json::try_parse(ss.str(), core::json::kSmall);
        // The id when the file has it (a slug could be renamed; the id never changes).
        if (in && d && d->IsObject()) {
            configured_gateway_ = core::json::string_or(*d, "gateway_id");
            if (configured_gateway_.empty())
                configured_gateway_ = core::json::string_or(*d, "gateway_slug");
        }
        if (!configured_gateway_.empty()) {
            log::info("gateway registration found",
                      {{"gateway", configured_gateway_}, {"file", state.string()}});
            co_return;
        }
    }
    if (cfg_.gateway_token.empty()) {
        throw core::config_error("GATEWAY_ID is not set and no registration is stored in " +
                                 state.string() + ": set GATEWAY_ID or GATEWAY_TOKEN");
    }
    std::optional<std::string> tenant;
    if (!cfg_.tenant_id.empty()) tenant = cfg_.tenant_id;
    std::optional<std::string> label;
    if (!cfg_.gateway_label.empty()) label = cfg_.gateway_label;
    std::string failure;
    std::string answer;
    for (;;) {
        try {
            auto r = co_await db_.query("SELECT public.consume_gateway_token($1, $2, $3, $4)::text",
                                        cfg_.gateway_token, label, label, tenant);
            answer = r.get<std::string>(0, 0);
            break;
        } catch (const pg::connection_error& e) {
            failure = e.what();
            db_.reset();
        } catch (const pg::sql_error& e) {
            // Refused token (invalid, used, expired): the operator must act; never retry blindly.
            failure = e.what();
            answer.clear();
            break;
        }
        log::warn("registration: database unavailable, retrying", {{"error", failure}});
        co_await sleep_ms(2s);
        if (stopping_) co_return;
    }
    if (answer.empty()) throw core::config_error("gateway registration failed: " + failure);
    const auto d = core::json::parse_object(answer, core::json::kSmall);
    slug_ = core::json::string_or(d, "gateway_slug");
    const auto gateway_id = core::json::string_or(d, "gateway_id");
    configured_gateway_ = gateway_id;
    if (slug_.empty() || gateway_id.empty()) {
        throw core::config_error("gateway registration answered without gateway_id/gateway_slug");
    }
    std::filesystem::create_directories(cfg_.state_dir);
    write_file_atomic(state.string(),
                      json_object({{"gateway_id", gateway_id}, {"gateway_slug", slug_}}) + "\n",
                      0600);
    log::info("gateway registered",
              {{"gateway", slug_}, {"gateway_id", d["gateway_id"].GetString()}});
}

net::awaitable<void> runner_service::heartbeat(pg::session& db) {
    // Daemon-only row (users can read it, not write it): the sync state, and the address other
    // api-gateways proxy this gateway's agents to.
    std::vector<std::pair<std::string, std::string>> fields = {
        {"runtime_mode", to_string(cfg_.mode)},
        {"auth_flows", std::to_string(flows_.size())},
        {"secrets_sync", secrets_key_.empty()     ? "off"
                         : secrets_error_.empty() ? "ok"
                                                  : "failed"}};
    if (!secrets_error_.empty()) fields.emplace_back("secrets_error", secrets_error_);
    if (!cfg_.gateway_api_url.empty()) fields.emplace_back("api_url", cfg_.gateway_api_url);
    const std::string meta = json_object(fields);
    auto r = co_await db.query(
        "SELECT gateway_id::text, tenant_id::text, gateway_status::text FROM "
        "public.daemon_heartbeat("
        "p_gateway_slug => $1, p_daemon => $2, p_instance => $3, p_pid => $4, p_version => $5, "
        "p_started_at => $6::timestamptz, p_meta => $7::jsonb, p_tenant_id => $8::uuid)",
        gateway_id_, kDaemon, cfg_.instance, static_cast<int>(::getpid()), "0.1.0", started_at_,
        meta, tenant_id_);
    const std::string status = r.get<std::string>(0, 2);
    if (status == "hibernating")
        log::debug("gateway is hibernating; commands still run", {{"gateway", slug_}});
}

net::awaitable<void> runner_service::recover_dead_runs() {
    const std::string me_host = hostname() + ":awp-command-runner:";
    auto r = co_await db_.query(
        "SELECT id::text, status::text, leased_by, lease_token::text, action::text FROM "
        "public.agent_commands "
        "WHERE gateway_id = $1 AND status IN ('leased', 'running') AND leased_by IS NOT NULL",
        gateway_id_);
    for (int i = 0; i < r.size(); ++i) {
        const std::string holder = r.get<std::string>(i, 2);
        bool dead = holder == cfg_.instance;
        if (!dead && holder.rfind(me_host, 0) == 0) {
            const std::string pid = holder.substr(me_host.size());
            if (!pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos &&
                pid.size() < 10) {
                const long n = std::stol(pid);
                dead = n != ::getpid() && !pid_alive(n);
            }
        }
        if (!dead) continue;
        command_row cmd;
        cmd.id = r.get<std::string>(i, 0);
        cmd.lease_token = r.get<std::string>(i, 3);
        cmd.action = r.get<std::string>(i, 4);
        if (r.get<std::string>(i, 1) == "leased") {
            // Leased but never started: nothing ran, so it may go back to the queue. This
            // runner leases and starts in one commit; such rows come from a runner of an earlier
            // release (rolling upgrade).
            co_await db_.query(
                "UPDATE public.agent_commands SET status = 'pending', lease_token = NULL, "
                "leased_by = NULL, "
                "leased_at = NULL, lease_expires_at = NULL WHERE id = $1 AND status = 'leased' AND "
                "lease_token = $2",
                cmd.id, cmd.lease_token);
            log::info("requeued a command leased by a dead runner",
                      {{"command_id", cmd.id}, {"runner", holder}});
            continue;
        }
        std::string patch;
        if (cmd.action == "auth_start") {
            patch = connection_state(
                {{"stage", "failed"},
                 {"error", "the runner restarted during the login; start it again"}});
        }
        co_await fail(db_, cmd, std::nullopt,
                      "runner " + holder + " stopped while the command was running (found by " +
                          cfg_.instance + " at start-up); not retried",
                      "", "", patch);
        log::warn("failed a command left running by a dead runner",
                  {{"command_id", cmd.id}, {"runner", holder}});
    }
}

net::awaitable<std::string> runner_service::sync_secrets_on(pg::session& db) {
    if (secrets_key_.empty() || gateway_id_.empty()) co_return "";
    pg::connection* c = co_await db.get();
    std::string failure;
    try {
        sync_result r = co_await sync_secrets(*c, gateway_id_, cfg_.secrets_dir, secrets_key_);
        secret_values_.clear();
        for (auto& v : r.values) {
            if (v.size() >= 6) secret_values_.push_back(std::move(v));
        }
        last_sync_ = std::chrono::steady_clock::now();
    } catch (const pg::connection_error& e) {
        failure = e.what();
        db.reset();
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty()) log::warn("secrets sync failed", {{"error", failure}});
    if (failure.empty() && !secrets_error_.empty()) log::info("secrets sync works again");
    if (failure != secrets_error_) {
        // A changed sync state reaches the heartbeat row now, not at the next safety poll.
        heartbeat_due_ = true;
        housekeeping_wake_.set();
    }
    secrets_error_ = failure;
    co_return failure;
}

net::awaitable<void> runner_service::housekeeping() {
    while (!stopping_) {
        co_await housekeeping_wake_.wait();
        if (stopping_) break;
        if (heartbeat_due_) {
            heartbeat_due_ = false;
            std::string failure;
            try {
                co_await heartbeat(hk_db_);
            } catch (const pg::connection_error& e) {
                failure = e.what();
                hk_db_.reset();
            } catch (const std::exception& e) {
                failure = e.what();
            }
            if (!failure.empty()) log::warn("heartbeat failed", {{"error", failure}});
        }
        const auto since = std::chrono::steady_clock::now() - last_sync_;
        if (secrets_due_ || since >= std::chrono::duration<double>(cfg_.secrets_interval_s)) {
            secrets_due_ = false;
            co_await sync_secrets_on(hk_db_);
        }
    }
    housekeeping_done_ = true;
    flows_idle_.set();
}

net::awaitable<void> runner_service::run() {
    co_await register_gateway();
    if (stopping_) co_return;
    // GATEWAY_ID (or the stored registration) resolved once to the gateway's id and tenant:
    // every call from now on names the id, so a gateway another tenant registers later under
    // the same name changes nothing here. Retried while Postgres is down.
    {
        std::optional<std::string> tenant;
        if (!cfg_.tenant_id.empty()) tenant = cfg_.tenant_id;
        for (;;) {
            std::string failure;
            try {
                const auto gw = co_await core::gateway::resolve(db_, configured_gateway_, tenant);
                gateway_id_ = gw.id;
                slug_ = gw.slug;
                tenant_id_ = gw.tenant_id;
                break;
            } catch (const pg::connection_error& e) {
                failure = e.what();
                db_.reset();
            }
            log::warn("start-up: cannot look up the gateway, retrying", {{"error", failure}});
            co_await sleep_ms(1s);
            if (stopping_) co_return;
        }
    }
    for (;;) {
        std::string failure;
        bool fatal = false;
        try {
            co_await heartbeat(db_);
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
    co_await recover_dead_runs();
    co_await sync_secrets_on(db_);
    secrets_due_ = false;

    auto ex = co_await net::this_coro::executor;
    const std::string commands_channel = core::channels::commands(gateway_id_),
                      secrets_channel = core::channels::secrets(gateway_id_);
    core::queue_options qo;
    qo.name = "commands";
    qo.concurrency = 1;
    driver_ = std::make_unique<core::queue_driver<command_row>>(
        ex, qo, [this]() { return lease(); },
        [this](command_row c) { return handle(std::move(c)); });
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
                secrets_due_ = true;
                housekeeping_wake_.set();
            }
        },
        [this](core::rescan_reason why) {
            driver_->wake();
            if (why == core::rescan_reason::safety_poll) {
                heartbeat_due_ = true;  // one timer for both: no extra wake-ups while idle
            } else {
                secrets_due_ = true;
            }
            housekeeping_wake_.set();
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
    net::co_spawn(ex, housekeeping(), net::detached);
    co_await driver_->run();
    co_await flush_final();  // the last command's transition, when no lease followed it
    while (!flows_.empty() || !housekeeping_done_ || !listener_done_) co_await flows_idle_.wait();
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
        co_await fail(db_, cmd, std::nullopt, invalid, "", "", scrub_patch(cmd, false));
        co_return;
    }
    if (cmd.action == "run_shell") {
        // The database decided at insert (sql/0022); checked again here, so a row written
        // around the trigger (a superuser, a restored dump) still runs only as the policy says.
        auto gate = co_await db_.query(
            "SELECT g.run_shell_policy, c.requested_by_operator FROM public.agent_commands c "
            "JOIN public.gateways g ON g.id = c.gateway_id WHERE c.id = $1::uuid",
            cmd.id);
        if (gate.empty() || (gate.get<std::string>(0, 0) != "members" && !gate.get<bool>(0, 1))) {
            co_await fail(db_, cmd, std::nullopt,
                          "run_shell: this gateway runs shell commands of operators only "
                          "(gateways.run_shell_policy = operators); nothing was executed",
                          "", "", "");
            co_return;
        }
    }
    if (cmd.action == "provision" || cmd.action == "remove") {
        // Two agents whose slugs the runtime maps to one id (Ana, ana) would be one agent in
        // the runtime: a second provision would take over the first, a remove delete both.
        const auto other =
            co_await shared_runtime_id(cmd, p.fields.at("agent_slug"), p.fields.at("agent_id"));
        if (!other.empty()) {
            co_await fail(
                db_, cmd, std::nullopt,
                cmd.action + ": agent \"" + p.fields.at("agent_slug") + "\" and agent \"" + other +
                    "\" of this gateway are the same agent in the runtime (id \"" +
                    p.fields.at("agent_id") + "\"); rename one of them; nothing was changed",
                "", "", "");
            co_return;
        }
    }
    switch (p.kind) {
        case plan_kind::spawn:
        case plan_kind::provision:
        case plan_kind::set_agent_model:
            co_await run_steps(std::move(cmd), std::move(p));
            break;
        case plan_kind::auth_start:
            co_await start_auth(std::move(cmd), std::move(p));
            break;
        case plan_kind::auth_paste:
            co_await paste_auth(std::move(cmd), std::move(p));
            break;
        case plan_kind::source_write:
            co_await run_source_write(std::move(cmd), std::move(p));
            break;
        default:
            co_await run_local(std::move(cmd), std::move(p));
            break;
    }
}

std::vector<std::string> runner_service::redactions(const command_row& cmd) const {
    std::vector<std::string> s = payload_secrets(cmd);
    s.insert(s.end(), secret_values_.begin(), secret_values_.end());
    return s;
}

std::string runner_service::keep(const std::string& text, const std::vector<std::string>& secrets,
                                 std::size_t limit) const {
    return clean_text(tail(redact(text, secrets), limit));
}

proc::spawn_options runner_service::child_options(std::vector<std::string> argv,
                                                  bool as_agent) const {
    proc::spawn_options o;
    o.argv = std::move(argv);
    if (as_agent) o.run_as = cfg_.agent_user;
    o.env["AGENT_RUNTIME"] = cfg_.agent_runtime;
    o.env["AWP_RUNTIME_HOME"] = cfg_.runtime_home;
    // The runtime's own setting: every CLI call works on the state this runner edits.
    o.env["OPENCLAW_STATE_DIR"] = cfg_.runtime_home;
    o.env["AWP_SECRETS_DIR"] = cfg_.secrets_dir;
    if (!cfg_.workspaces_dir.empty()) o.env["AWP_WORKSPACES_DIR"] = cfg_.workspaces_dir;
    o.env["AWP_GATEWAY"] = slug_;
    // The runner's own credentials never reach a child: an allowlisted environment.
    core::child_env::apply(o);
    // Room for redaction before the final cut, so no secret is split at the cut.
    o.max_output = cfg_.output_limit + 4096;
    o.kill_grace = 2s;
    return o;
}

namespace {

std::optional<std::string> field(const plan& p, const char* name) {
    const auto it = p.fields.find(name);
    if (it == p.fields.end()) return std::nullopt;
    return it->second;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

net::awaitable<std::string> runner_service::shared_runtime_id(const command_row& cmd,
                                                              std::string slug, std::string id) {
    auto r = co_await db_.query(
        "SELECT a.slug FROM public.agents a JOIN public.agent_commands c ON c.gateway_id = "
        "a.gateway_id AND c.tenant_id = a.tenant_id WHERE c.id = $1::uuid AND a.slug <> $2 "
        "ORDER BY a.slug",
        cmd.id, slug);
    for (int i = 0; i < r.size(); ++i) {
        const auto other = r.get<std::string>(i, 0);
        try {
            if (runtime::agent_id(other) == id) co_return other;
        } catch (const core::error&) {  // a slug the runtime cannot hold maps to no id
        }
    }
    co_return std::string();
}

std::string runner_service::read_runtime_file(const std::string& path) const {
    // The runtime's files are the agent user's (0600 as the runtime writes them).
    const core::identity::as_user_files as_agent(cfg_.agent_user);
    return read_text(path);
}

net::awaitable<void> runner_service::run_steps(command_row cmd, plan p) {
    const int lease = static_cast<int>(p.timeout.count()) *
                          static_cast<int>(std::max<std::size_t>(1, p.steps.size())) +
                      60;
    if (!co_await hold_for(db_, cmd, lease)) co_return;
    if (p.sync_secrets_first) {
        // provision: the agent's env file must be current before the runtime reads it.
        const std::string failure = co_await sync_secrets_on(db_);
        if (!failure.empty()) {
            const auto secrets = redactions(cmd);
            co_await fail(
                db_, cmd, std::nullopt,
                keep("secrets sync failed, the agent's env file is not current: " + failure,
                     secrets, kErrorLimit),
                "", "", scrub_patch(cmd, false));
            co_return;
        }
    }
    if (const std::string why = prepare_steps(cmd, p); !why.empty()) {
        co_await fail(db_, cmd, std::nullopt, keep(why, redactions(cmd), kErrorLimit), "", "",
                      scrub_patch(cmd, false));
        co_return;
    }
    const auto secrets = redactions(cmd);
    const auto deadline = std::chrono::steady_clock::now() + p.timeout;
    std::string out, err, error;
    std::optional<int> exit_code;
    bool ok = true;
    for (std::size_t i = 0; i < p.steps.size() && ok; ++i) {
        proc::spawn_options o = child_options(p.steps[i].argv, !p.steps[i].host_operation);
        o.stdin_data = p.steps[i].stdin_data;
        // A JSON output is read whole (up to 8 MiB), then trimmed by entries, never by bytes.
        if (p.json_output) o.max_output = std::size_t{8} << 20;
        if (p.fields.count("cwd") && std::filesystem::is_directory(p.fields.at("cwd")))
            o.working_dir = p.fields.at("cwd");
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        o.timeout = std::max(left, std::chrono::milliseconds(1));
        proc::process_result r;
        std::string spawn_failure;
        try {
            r = co_await proc::async_run(o);
        } catch (const proc::spawn_error& e) {
            spawn_failure = e.what();
        }
        if (!spawn_failure.empty()) {
            ok = false;
            error = spawn_failure;  // "cannot start <program>: <why>"
            break;
        }
        if (p.steps.size() > 1) {
            out += "$ " + o.argv[0] + (o.argv.size() > 1 ? " " + o.argv[1] : "") + " ...\n";
        }
        out += r.out;
        err += r.err;
        if (r.timed_out) {
            ok = false;
            error = "timed out after " + std::to_string(p.timeout.count()) +
                    " s (process group killed)";
        } else if (r.term_signal != 0) {
            ok = false;
            error = "killed by signal " + std::to_string(r.term_signal);
        } else if (r.exit_code != 0) {
            ok = false;
            exit_code = r.exit_code;
            error = "exited with code " + std::to_string(r.exit_code);
            const std::string why =
                runtime::error_line(redact(r.err, secrets), redact(r.out, secrets));
            if (!why.empty()) error += ": " + why;
        } else {
            exit_code = 0;
        }
    }
    if (ok && !p.success_stdout.empty() && out.find_first_not_of(" \r\n\t") == std::string::npos)
        out = p.success_stdout;
    if (ok && p.kind == plan_kind::set_agent_model) out += co_await reload_session(p);
    if (ok && field(p, "check") == std::optional<std::string>("gateway_restart")) {
        if (auto why = runtime::restart_failure(out)) {
            ok = false;
            error = "restart_gateway: " + *why;
        }
    }
    std::string kept_out;
    if (p.json_output) {
        // Valid JSON whatever its size: entries are trimmed, never bytes (docs/runtime.md).
        if (auto j = runtime::fit_json(redact(out, secrets), kJsonOutputLimit)) kept_out = *j;
    }
    if (kept_out.empty()) kept_out = keep(runtime::strip_terminal(out), secrets, cfg_.output_limit);
    const std::string kept_err = keep(err, secrets, cfg_.output_limit);
    if (ok) {
        co_await complete(db_, cmd, 0, kept_out, kept_err, scrub_patch(cmd, true));
    } else {
        co_await fail(db_, cmd, exit_code, keep(error, secrets, kErrorLimit), kept_out, kept_err,
                      scrub_patch(cmd, false));
    }
}

std::string runner_service::prepare_steps(const command_row& cmd, plan& p) {
    const runtime::cli& rt = cfg_.runtime;
    auto add = [&](runtime::call c) {
        p.steps.push_back({std::move(c.argv), std::move(c.stdin_data)});
    };
    const std::string config = cfg_.runtime_home + "/openclaw.json";
    if (p.kind == plan_kind::set_agent_model) {
        const std::string id = p.fields.at("agent_id");
        const auto index = rt.agent_index(read_runtime_file(config), id);
        if (!index) {
            return cmd.action + ": agent \"" + id + "\" is not configured in the runtime (" +
                   config + ")";
        }
        for (auto& c : rt.set_agent_model(id, index, field(p, "model"), field(p, "thinking")))
            add(std::move(c));
        return "";
    }
    if (p.kind != plan_kind::provision) return "";
    const std::string slug = p.fields.at("agent_slug");
    const std::string id = p.fields.at("agent_id");
    const std::string channel = p.fields.at("channel");
    const std::string workspace = cfg_.workspace(slug);
    std::string token_file;
    if (channel != "none") {
        // The runtime reads the bot token from a file awp keeps (0600), never from argv.
        std::string var = channel + "_BOT_TOKEN";
        for (char& c : var) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        auto env = read_env_file(cfg_.secrets_dir + "/agents/" + slug + ".env");
        if (env[var].empty()) env = read_env_file(cfg_.secrets_dir + "/gateway.env");
        if (env[var].empty()) {
            return "provision: no " + var + " among the agent's secrets (" + cfg_.secrets_dir +
                   "/agents/" + slug + ".env) or the gateway's; store the " + channel +
                   " bot token first, or provision with channel \"none\"";
        }
        token_file = cfg_.channel_token_dir() + "/" + id + "." + channel + ".token";
        // With AGENT_USER the file is the agent user's (the runtime reads it as that user).
        const core::identity::as_user_files as_agent(cfg_.agent_user);
        std::error_code ec;
        std::filesystem::create_directories(cfg_.channel_token_dir(), ec);
        std::filesystem::permissions(cfg_.channel_token_dir(), std::filesystem::perms::owner_all,
                                     ec);
        try {
            write_file_atomic(token_file, env[var], 0600);
        } catch (const std::exception& e) {
            return std::string("provision: cannot write the channel token file: ") + e.what();
        }
    }
    add(rt.add_agent(id, workspace, field(p, "model")));
    if (auto c = rt.set_identity(id, field(p, "name"), field(p, "emoji"))) add(std::move(*c));
    if (const auto t = field(p, "source_template")) {
        const std::string dir = (cfg_.scripts_dir.empty() ? std::string(".") : cfg_.scripts_dir) +
                                "/../templates/" + *t;
        if (!std::filesystem::is_directory(dir))
            return "provision: template \"" + *t + "\" does not exist on this gateway (" + dir +
                   ")";
        // The template's files over the runtime's seed files; argv only, no shell.
        p.steps.push_back({{"cp", "-R", "--", dir + "/.", workspace}, std::nullopt});
    }
    if (!token_file.empty()) {
        add(rt.add_channel(channel, id, token_file));
        add(rt.bind(id, channel));
    }
    // What the runtime has no place for stays in awp's own record of the agent.
    std::vector<std::pair<std::string, std::string>> record = {
        {"slug", slug}, {"runtime_agent_id", id}, {"command_id", cmd.id}};
    for (const char* k : {"channel", "discord_server_id", "discord_user_id", "source_template",
                          "description", "owner_name", "owner_preferred_name", "owner_timezone"}) {
        if (const auto v = field(p, k)) record.emplace_back(k, *v);
    }
    try {
        std::filesystem::create_directories(cfg_.state_dir + "/agents");
        write_file_atomic(cfg_.state_dir + "/agents/" + slug + ".json", json_object(record) + "\n",
                          0600);
    } catch (const std::exception& e) {
        return std::string("provision: cannot write awp's record of the agent: ") + e.what();
    }
    return "";
}

net::awaitable<std::string> runner_service::reload_session(const plan& p) {
    proc::spawn_options o = child_options(
        cfg_.runtime.session_patch(p.fields.at("agent_id"), field(p, "model"), field(p, "thinking"))
            .argv);
    o.timeout = std::chrono::seconds(30);
    try {
        const auto r = co_await proc::async_run(o);
        if (r.success()) co_return "\nsession agent:" + p.fields.at("agent_id") + ":main reloaded";
        co_return "\nsession not reloaded (the new settings apply to its next turn): " +
            runtime::error_line(r.err, r.out);
    } catch (const proc::spawn_error& e) {
        co_return std::string("\nsession not reloaded: ") + e.what();
    }
}

net::awaitable<std::string> runner_service::remove_profile(const std::string& id) {
    const runtime::cli& rt = cfg_.runtime;
    if (rt.kind() == runtime::dialect::v2026_6) {
        int n = 0;
        {
            // As the agent user, who owns the runtime's state (no await in between).
            const core::identity::as_user_files as_agent(cfg_.agent_user);
            n = runtime::remove_auth_profile(cfg_.runtime_home, id);
        }
        if (n == 0) throw local_op_error("profile " + id + " not found in any agent's auth store");
        co_return "Removed " + id + " from " + std::to_string(n) + " auth store(s)";
    }
    // 2026.9: the CLI removes it, agent by agent (agents.entries of its config).
    auto doc = core::json::try_parse(read_runtime_file(cfg_.runtime_home + "/openclaw.json"),
                                     core::json::kDocument);
    std::vector<std::string> agents;
    if (doc && doc->IsObject() && doc->HasMember("agents") && (*doc)["agents"].IsObject()) {
        const auto& a = (*doc)["agents"];
        if (a.HasMember("entries") && a["entries"].IsObject())
            for (const auto& m : a["entries"].GetObject()) agents.emplace_back(m.name.GetString());
    }
    int removed = 0;
    std::string last;
    for (const auto& agent : agents) {
        proc::spawn_options o = child_options(rt.auth_logout(id, agent)->argv);
        o.timeout = cfg_.command_timeout();
        const auto r = co_await proc::async_run(o);
        if (r.success()) {
            ++removed;
        } else {
            last = runtime::error_line(r.err, r.out);
        }
    }
    if (removed == 0)
        throw local_op_error("profile " + id + " not removed from any agent" +
                             (last.empty() ? std::string() : ": " + last));
    co_return "Removed " + id + " from " + std::to_string(removed) + " agent(s)";
}

net::awaitable<void> runner_service::run_local(command_row cmd, plan p) {
    if (!co_await hold_for(db_, cmd, static_cast<int>(p.timeout.count()) + 60)) co_return;
    std::string out, error;
    try {
        if (p.kind == plan_kind::auth_remove) {
            out = co_await remove_profile(p.fields.at("profile_id"));
        } else if (p.kind == plan_kind::upload_file) {
            // As the agent user: the file is the agent's, and a symlink or folder the agent
            // planted leads only where it could write itself.
            const core::identity::as_user_files as_agent(cfg_.agent_user);
            out = upload_file(p.fields.at("dir"), p.fields.at("path"), p.fields.at("content"),
                              p.fields.at("mode"));
        }
    } catch (const std::exception& e) {
        error = e.what();
    }
    const auto secrets = redactions(cmd);
    if (error.empty()) {
        co_await complete(db_, cmd, 0, keep(out, secrets, cfg_.output_limit), "",
                          scrub_patch(cmd, true));
    } else {
        co_await fail(db_, cmd, std::nullopt, keep(error, secrets, kErrorLimit), "", "",
                      scrub_patch(cmd, false));
    }
}

net::awaitable<void> runner_service::run_source_write(command_row cmd, plan p) {
    const std::string conn_id = p.fields.at("connection_id");
    auto r = co_await db_.query(
        "SELECT provider, writable, config::text, status FROM public.source_connections WHERE id = "
        "$1::uuid AND "
        "tenant_id = $2::uuid",
        conn_id, cmd.tenant_id);
    std::string refuse;
    if (r.empty()) {
        refuse = "source_write: connection " + conn_id + " not found";
    } else if (!r.get<bool>(0, 1)) {
        refuse = "source_write: connection " + conn_id +
                 " is not writable (writable = false); nothing was executed";
    }
    if (!refuse.empty()) {
        co_await fail(db_, cmd, std::nullopt, refuse, "", "", "");
        co_return;
    }
    source_call call;
    call.connection_id = conn_id;
    call.provider = r.get<std::string>(0, 0);
    call.config = r.get<std::string>(0, 2);
    call.action = p.fields.at("action");
    call.params = p.fields.at("params");
    call.timeout = p.timeout;
    call.check.emplace();
    call.check->scope = http::outbound_scope::internet;
    call.check->policy =
        http::outbound_policy(cfg_.outbound_allow, http::database_ports({cfg_.database_url}));
    auto provider = make_source_provider(call.provider);
    if (!provider) {
        co_await fail(
            db_, cmd, std::nullopt,
            "source_write: provider \"" + call.provider + "\" has no write support on this runner",
            "", "", "");
        co_return;
    }
    if (!co_await hold_for(db_, cmd, static_cast<int>(p.timeout.count()) + 60)) co_return;
    call.credentials = source_credentials(read_env_file(cfg_.secrets_dir + "/gateway.env"),
                                          call.provider, conn_id);
    std::vector<std::string> secrets = redactions(cmd);
    for (const auto& [k, v] : call.credentials) secrets.push_back(v);
    std::string out, error;
    try {
        out = co_await provider->execute(call);
    } catch (const std::exception& e) {
        error = e.what();
    }
    if (error.empty()) {
        co_await complete(db_, cmd, 0, keep(out, secrets, cfg_.output_limit), "", "");
    } else {
        co_await fail(db_, cmd, std::nullopt, keep(error, secrets, kErrorLimit), "", "", "");
    }
}

// ---- auth flows ----------------------------------------------------------------------------

net::awaitable<void> runner_service::start_auth(command_row cmd, plan p) {
    if (!co_await hold_for(db_, cmd, cfg_.auth_timeout_s + 60)) co_return;
    auto flow = std::make_shared<auth_flow>();
    flow->cmd = cmd;
    flow->provider = p.fields.at("provider");
    flow->profile_name = p.fields.at("profile_name");
    flow->mode = p.fields.at("mode");
    const std::string starting = connection_state({{"stage", "starting"}});
    co_await patch_payload(db_, cmd, starting);
    const bool auto_callback = flow->mode == "oauth_paste" && cfg_.networking_mode == "local";
    if (!auto_callback) {
        // Hold the runtime's callback port so its login falls back to paste-back.
        auto acc = std::make_unique<net::ip::tcp::acceptor>(ioc_);
        boost::system::error_code ec;
        const net::ip::tcp::endpoint ep(net::ip::make_address("127.0.0.1"),
                                        static_cast<unsigned short>(cfg_.callback_port));
        acc->open(ep.protocol(), ec);
        if (!ec) acc->set_option(net::socket_base::reuse_address(true), ec);
        if (!ec) acc->bind(ep, ec);
        if (!ec) acc->listen(1, ec);
        if (ec) {
            log::warn("cannot hold the OAuth callback port",
                      {{"port", cfg_.callback_port}, {"error", ec.message()}});
        } else {
            flow->callback_holder = std::move(acc);
        }
    }
    proc::spawn_options o = child_options(p.steps[0].argv);
    o.env["TERM"] = "xterm-256color";  // replace_env is set: env is the whole environment
    o.timeout = std::chrono::seconds(cfg_.auth_timeout_s);
    o.max_output = 64 * 1024;
    std::string failure;
    try {
        flow->process = std::make_unique<proc::interactive_process>(ioc_.get_executor(), o);
    } catch (const proc::spawn_error& e) {
        failure = e.what();
    }
    if (!failure.empty()) {
        const std::string error = failure;  // "cannot start <program>: <why>"
        const std::string state = connection_state({{"stage", "failed"}, {"error", error}});
        co_await fail(db_, cmd, std::nullopt, error, "", "", state);
        co_return;
    }
    flows_[cmd.id] = flow;
    log::info("auth flow started",
              {{"command_id", cmd.id}, {"provider", flow->provider}, {"mode", flow->mode}});
    net::co_spawn(ioc_, auth_flow_main(flow), [id = cmd.id](std::exception_ptr e) {
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            log::error("auth flow failed", {{"command_id", id}, {"error", ex.what()}});
        }
    });
}

net::awaitable<void> runner_service::auth_flow_main(std::shared_ptr<auth_flow> flow) {
    pg::session db(cfg_.database_url, "runner-auth");
    static const std::regex url_re(R"((https?://[^\s"'<>]+)[\s"'<>])");
    static const std::regex code_re(
        R"((?:code|Code|CODE)\s*[:=]?\s+([A-Z0-9]{4,8}(?:-[A-Z0-9]{4,8})?)[\s.,])");
    const bool auto_callback = flow->mode == "oauth_paste" && cfg_.networking_mode == "local";
    std::string seen, url, code;
    bool reported_url = false, reported_code = false;
    for (;;) {
        std::string chunk = co_await flow->process->async_read_some();
        if (chunk.empty()) break;
        seen += runtime::strip_terminal(chunk);
        if (seen.size() > 32 * 1024) seen.erase(0, seen.size() - 8 * 1024);
        if (url.empty()) {
            for (std::sregex_iterator it(seen.begin(), seen.end(), url_re), end; it != end; ++it) {
                std::string u = (*it)[1].str();
                while (!u.empty() &&
                       (u.back() == '.' || u.back() == ',' || u.back() == ';' || u.back() == ':'))
                    u.pop_back();
                if (u.find("://localhost") != std::string::npos ||
                    u.find("://127.0.0.1") != std::string::npos)
                    continue;
                url = u;
                break;
            }
        }
        if (flow->mode == "device_code" && code.empty()) {
            std::smatch m;
            if (std::regex_search(seen, m, code_re)) code = m[1].str();
        }
        std::string patch;
        if (!url.empty() && !reported_url) {
            reported_url = true;
            reported_code = !code.empty();
            if (flow->mode == "device_code") {
                std::vector<std::pair<std::string, std::string>> f = {{"stage", "polling"},
                                                                      {"url", url}};
                if (!code.empty()) f.emplace_back("verificationCode", code);
                patch = connection_state(f);
            } else {
                patch = connection_state({{"stage", "url_ready"}, {"url", url}}, auto_callback);
            }
        } else if (reported_url && !reported_code && !code.empty()) {
            // A code printed after the URL still reaches the UI.
            reported_code = true;
            patch =
                connection_state({{"stage", "polling"}, {"url", url}, {"verificationCode", code}});
        }
        if (!patch.empty()) co_await patch_payload(db, flow->cmd, patch);
    }
    proc::process_result r = co_await flow->process->async_wait();
    flow->callback_holder.reset();
    flows_.erase(flow->cmd.id);
    std::vector<std::string> secrets = redactions(flow->cmd);
    secrets.insert(secrets.end(), flow->secrets.begin(), flow->secrets.end());
    const std::string out = keep(runtime::strip_terminal(r.out), secrets, kAuthOutputLimit);
    const std::string profile = flow->provider + ":" + flow->profile_name;
    if (r.success()) {
        const std::string state =
            connection_state({{"stage", "completed"}, {"profileId", profile}});
        co_await complete(db, flow->cmd, 0, out, "", state);
        log::info("auth flow completed", {{"command_id", flow->cmd.id}, {"profile", profile}});
    } else {
        std::string error;
        std::optional<int> code_out;
        if (r.timed_out) {
            error = "auth flow timed out after " + std::to_string(cfg_.auth_timeout_s) + " s";
        } else if (flow->stopped_by_runner) {
            error = "the runner stopped during the auth flow; start it again";
        } else if (r.term_signal != 0) {
            error = "login killed by signal " + std::to_string(r.term_signal);
        } else {
            code_out = r.exit_code;
            error = "login exited with code " + std::to_string(r.exit_code);
            const std::string why = runtime::error_line("", redact(r.out, secrets));
            if (!why.empty()) error += ": " + why;
        }
        const std::string state = connection_state({{"stage", "failed"}, {"error", error}});
        co_await fail(db, flow->cmd, code_out, error, out, "", state);
        log::warn("auth flow failed", {{"command_id", flow->cmd.id}, {"error", error}});
    }
    flows_idle_.set();
}

net::awaitable<void> runner_service::paste_auth(command_row cmd, plan p) {
    const std::string parent = p.fields.at("parent_command_id");
    auto it = flows_.find(parent);
    if (it == flows_.end()) {
        co_await fail(
            db_, cmd, std::nullopt,
            "no auth flow in progress for command " + parent +
                " on this runner (it finished, timed out, never started, or the runner restarted); "
                "start a new auth_start",
            "", "", scrub_patch(cmd, false));
        co_return;
    }
    std::shared_ptr<auth_flow> flow = it->second;
    const std::string value = p.fields.at("value");
    flow->secrets.push_back(value);
    const bool delivered = co_await flow->process->async_write(value + "\r");
    if (delivered) {
        co_await complete(db_, cmd, 0, "Pasted to the auth flow of command " + parent + ".", "",
                          scrub_patch(cmd, true));
    } else {
        co_await fail(db_, cmd, std::nullopt,
                      "the auth flow of command " + parent + " ended before the value arrived", "",
                      "", scrub_patch(cmd, false));
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
    f.error = clean_text(error.size() > kErrorLimit ? error.substr(0, kErrorLimit) + "..." : error);
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
