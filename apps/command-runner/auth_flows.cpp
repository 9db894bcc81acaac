// Interactive logins in the background (auth_flows.hpp).
#include "auth_flows.hpp"

#include <regex>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "awp/core/log.hpp"
#include "awp/core/process.hpp"
#include "awp/runtime/openclaw.hpp"
#include "executor.hpp"

namespace awp::runner {

namespace pg = core::pg;
namespace log = core::log;
namespace proc = core::process;

/// One interactive login in progress (spec: auth_start runs in the background).
struct auth_flow {
    command_row cmd;
    std::string provider, profile_name, mode;
    std::unique_ptr<proc::interactive_process> process;
    std::unique_ptr<net::ip::tcp::acceptor> callback_holder;  // keeps 127.0.0.1:1455 busy
    std::vector<std::string> secrets;                         // pasted values: never stored
    bool stopped_by_runner = false;
};

std::string auth_state(const std::vector<std::pair<std::string, std::string>>& fields,
                       bool auto_callback) {
    std::string obj = json_object(fields);
    if (auto_callback) obj = obj.substr(0, obj.size() - 1) + ",\"autoCallback\":true}";
    return "{\"connection_state\":" + obj + "}";
}

auth_flows::auth_flows(net::io_context& ioc, const runner_config& cfg, std::string gateway_slug,
                       command_io& io, const known_secrets& secrets, core::event& ended)
    : ioc_(ioc),
      cfg_(cfg),
      slug_(std::move(gateway_slug)),
      io_(io),
      secrets_(secrets),
      ended_(ended) {}

auth_flows::~auth_flows() = default;

void auth_flows::stop_all() {
    for (auto& [id, f] : flows_) {
        f->stopped_by_runner = true;
        if (f->process) f->process->terminate();
    }
}

net::awaitable<command_outcome> auth_flows::start(pg::session& db, command_row cmd, plan p) {
    if (!co_await io_.hold_for(db, cmd, cfg_.auth_timeout_s + 60))
        co_return command_outcome::of(command_outcome::kind::lease_lost);
    auto flow = std::make_shared<auth_flow>();
    flow->cmd = cmd;
    flow->provider = p.fields.at("provider");
    flow->profile_name = p.fields.at("profile_name");
    flow->mode = p.fields.at("mode");
    const std::string starting = auth_state({{"stage", "starting"}});
    co_await io_.patch_payload(db, cmd, starting);
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
    proc::spawn_options o = child_options(cfg_, slug_, p.steps[0].argv);
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
        const std::string state = auth_state({{"stage", "failed"}, {"error", error}});
        co_return command_outcome::failure(error, std::nullopt, "", "", state);
    }
    flows_[cmd.id] = flow;
    log::info("auth flow started",
              {{"command_id", cmd.id}, {"provider", flow->provider}, {"mode", flow->mode}});
    net::co_spawn(ioc_, follow(flow), [id = cmd.id](std::exception_ptr e) {
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            log::error("auth flow failed", {{"command_id", id}, {"error", ex.what()}});
        }
    });
    co_return command_outcome::of(command_outcome::kind::handed_off);
}

net::awaitable<void> auth_flows::follow(std::shared_ptr<auth_flow> flow) {
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
                patch = auth_state(f);
            } else {
                patch = auth_state({{"stage", "url_ready"}, {"url", url}}, auto_callback);
            }
        } else if (reported_url && !reported_code && !code.empty()) {
            // A code printed after the URL still reaches the UI.
            reported_code = true;
            patch = auth_state({{"stage", "polling"}, {"url", url}, {"verificationCode", code}});
        }
        if (!patch.empty()) co_await io_.patch_payload(db, flow->cmd, patch);
    }
    proc::process_result r = co_await flow->process->async_wait();
    flow->callback_holder.reset();
    flows_.erase(flow->cmd.id);
    // Redacted here too: the state's error is a payload value, which settle() does not touch.
    std::vector<std::string> secrets = secrets_.for_command(flow->cmd);
    secrets.insert(secrets.end(), flow->secrets.begin(), flow->secrets.end());
    const std::string profile = flow->provider + ":" + flow->profile_name;
    command_outcome o;
    if (r.success()) {
        o = command_outcome::success(r.out, "",
                                     auth_state({{"stage", "completed"}, {"profileId", profile}}));
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
        o = command_outcome::failure(error, code_out, r.out, "",
                                     auth_state({{"stage", "failed"}, {"error", error}}));
        log::warn("auth flow failed", {{"command_id", flow->cmd.id}, {"error", error}});
    }
    // The login's output, settled with the values pasted into it (never stored).
    o.out_limit = kAuthOutputLimit;
    o.secrets = flow->secrets;
    co_await io_.write_outcome(db, flow->cmd, std::move(o));
    ended_.set();
}

net::awaitable<command_outcome> auth_flows::paste(command_row cmd, plan p) {
    const std::string parent = p.fields.at("parent_command_id");
    auto it = flows_.find(parent);
    if (it == flows_.end()) {
        co_return command_outcome::failure(
            "no auth flow in progress for command " + parent +
            " on this runner (it finished, timed out, never started, or the runner restarted); "
            "start a new auth_start");
    }
    std::shared_ptr<auth_flow> flow = it->second;
    const std::string value = p.fields.at("value");
    flow->secrets.push_back(value);
    const bool delivered = co_await flow->process->async_write(value + "\r");
    if (delivered) {
        log::info("value pasted to an auth flow", {{"command_id", cmd.id}, {"flow", parent}});
        co_return command_outcome::success("Pasted to the auth flow of command " + parent + ".");
    }
    co_return command_outcome::failure("the auth flow of command " + parent +
                                       " ended before the value arrived");
}

}  // namespace awp::runner
