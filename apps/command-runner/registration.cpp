// The runner's start-up: registration, gateway resolution, dead runs (registration.hpp).
#include "registration.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "auth_flows.hpp"
#include "awp/core/error.hpp"
#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "secrets.hpp"

namespace awp::runner {

namespace pg = core::pg;
namespace log = core::log;
using namespace std::chrono_literals;

namespace {

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

}  // namespace

net::awaitable<std::string> register_gateway(pg::session& db, const runner_config& cfg,
                                             const bool& stopping) {
    std::string configured = cfg.gateway_slug;
    if (!configured.empty()) co_return configured;
    const std::filesystem::path state = std::filesystem::path(cfg.state_dir) / "registration.json";
    {
        std::ifstream in(state);
        std::stringstream ss;
        ss << in.rdbuf();
        auto d = core::json::try_parse(ss.str(), core::json::kSmall);
        // The id when the file has it (a slug could be renamed; the id never changes).
        if (in && d && d->IsObject()) {
            configured = core::json::string_or(*d, "gateway_id");
            if (configured.empty()) configured = core::json::string_or(*d, "gateway_slug");
        }
        if (!configured.empty()) {
            log::info("gateway registration found",
                      {{"gateway", configured}, {"file", state.string()}});
            co_return configured;
        }
    }
    if (cfg.gateway_token.empty()) {
        throw core::config_error("GATEWAY_ID is not set and no registration is stored in " +
                                 state.string() + ": set GATEWAY_ID or GATEWAY_TOKEN");
    }
    if (!pg::default_gateway_key().empty()) {
        // A pool login (GATEWAY_KEY) cannot register: its key already names a gateway.
        throw core::config_error(
            "GATEWAY_KEY is set but GATEWAY_ID is not: set GATEWAY_ID to "
            "the gateway the key belongs to (GATEWAY_TOKEN registers with "
            "the daemons' shared login, not with a key)");
    }
    std::optional<std::string> tenant;
    if (!cfg.tenant_id.empty()) tenant = cfg.tenant_id;
    std::optional<std::string> label;
    if (!cfg.gateway_label.empty()) label = cfg.gateway_label;
    std::string failure;
    std::string answer;
    for (;;) {
        try {
            auto r = co_await db.query("SELECT public.consume_gateway_token($1, $2, $3, $4)::text",
                                       cfg.gateway_token, label, label, tenant);
            answer = r.get<std::string>(0, 0);
            break;
        } catch (const pg::connection_error& e) {
            failure = e.what();
            db.reset();
        } catch (const pg::sql_error& e) {
            // Refused token (invalid, used, expired): the operator must act; never retry blindly.
            failure = e.what();
            answer.clear();
            break;
        }
        log::warn("registration: database unavailable, retrying", {{"error", failure}});
        co_await sleep_ms(2s);
        if (stopping) co_return std::string();
    }
    if (answer.empty()) throw core::config_error("gateway registration failed: " + failure);
    const auto d = core::json::parse_object(answer, core::json::kSmall);
    const auto slug = core::json::string_or(d, "gateway_slug");
    const auto gateway_id = core::json::string_or(d, "gateway_id");
    if (slug.empty() || gateway_id.empty()) {
        throw core::config_error("gateway registration answered without gateway_id/gateway_slug");
    }
    std::filesystem::create_directories(cfg.state_dir);
    write_file_atomic(state.string(),
                      json_object({{"gateway_id", gateway_id}, {"gateway_slug", slug}}) + "\n",
                      0600);
    log::info("gateway registered", {{"gateway", slug}, {"gateway_id", gateway_id}});
    co_return gateway_id;
}

net::awaitable<std::optional<core::gateway::ref>> resolve_gateway(pg::session& db,
                                                                  const runner_config& cfg,
                                                                  const std::string& configured,
                                                                  const bool& stopping) {
    // Every call from now on names the id, so a gateway another tenant registers later under
    // the same name changes nothing here.
    std::optional<std::string> tenant;
    if (!cfg.tenant_id.empty()) tenant = cfg.tenant_id;
    co_return co_await core::gateway::resolve_at_start(db, configured, tenant, stopping);
}

net::awaitable<std::vector<dead_run>> recover_dead_runs(pg::session& db,
                                                        const std::string& gateway_id,
                                                        const std::string& instance) {
    std::vector<dead_run> dead_runs;
    const std::string me_host = hostname() + ":awp-command-runner:";
    auto r = co_await db.query(
        "SELECT id::text, status::text, leased_by, lease_token::text, action::text, "
        "tenant_id::text, agent_slug, payload::text FROM public.agent_commands "
        "WHERE gateway_id = $1 AND status IN ('leased', 'running') AND leased_by IS NOT NULL",
        gateway_id);
    for (int i = 0; i < r.size(); ++i) {
        const std::string holder = r.get<std::string>(i, 2);
        bool dead = holder == instance;
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
        cmd.tenant_id = r.get<std::string>(i, 5);
        cmd.gateway_id = gateway_id;
        cmd.agent_slug = r.get_optional<std::string>(i, 6);
        cmd.payload = r.get<std::string>(i, 7);  // its secrets are scrubbed when it is failed
        if (r.get<std::string>(i, 1) == "leased") {
            // Leased but never started: nothing ran, so it may go back to the queue. This
            // runner leases and starts in one commit; such rows come from a runner of an earlier
            // release (rolling upgrade).
            co_await db.query(
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
            patch =
                auth_state({{"stage", "failed"},
                            {"error", "the runner restarted during the login; start it again"}});
        }
        auto outcome = command_outcome::failure(
            "runner " + holder + " stopped while the command was running (found by " + instance +
                " at start-up); not retried",
            std::nullopt, "", "", patch);
        dead_runs.push_back({std::move(cmd), holder, std::move(outcome)});
    }
    co_return dead_runs;
}

}  // namespace awp::runner
