// The runtime operations of the executor that read what the runtime answered before the next
// call (executor.hpp): set_agent_model's session reload, auth_remove, list_models of the
// connected providers, auth_set_default. docs/runtime.md has the mapping of each.
#include <filesystem>

#include "awp/core/json.hpp"
#include "executor.hpp"
#include "local_ops.hpp"
#include "scrub.hpp"

namespace awp::runner {

namespace proc = core::process;
using namespace std::chrono_literals;

namespace {

/// Why a runtime call failed, in the runtime's words.
std::string failure_of(const std::string& what, const proc::process_result& r,
                       const std::vector<std::string>& secrets) {
    if (r.timed_out) return what + ": timed out (process group killed)";
    if (r.term_signal != 0) return what + ": killed by signal " + std::to_string(r.term_signal);
    std::string why = what + ": exited with code " + std::to_string(r.exit_code);
    const std::string line = runtime::error_line(redact(r.err, secrets), redact(r.out, secrets));
    return line.empty() ? why : why + ": " + line;
}

}  // namespace

net::awaitable<proc::process_result> executor::call(runtime::call c,
                                                    std::chrono::milliseconds timeout,
                                                    bool whole_output) const {
    proc::spawn_options o = child(std::move(c.argv));
    o.stdin_data = std::move(c.stdin_data);
    o.timeout = timeout;
    // A JSON answer is read whole (the catalogue is 58 KB, a status a few KB).
    if (whole_output) o.max_output = std::size_t{8} << 20;
    proc::process_result r;
    std::string failure;
    try {
        r = co_await proc::async_run(o);
    } catch (const proc::spawn_error& e) {
        failure = e.what();  // "cannot start <program>: <why>"
    }
    if (!failure.empty()) {
        r = proc::process_result{};
        r.exit_code = 127;
        r.err = failure;
    }
    co_return r;
}

net::awaitable<std::string> executor::reload_session(const plan& p) {
    // Calls built apart from the co_await (GCC 12 and temporaries inside one).
    runtime::call patch =
        cfg_.runtime.session_patch(p.fields.at("agent_id"), p.field("model"), p.field("thinking"));
    const auto r = co_await call(std::move(patch), 30s);
    // Said in the payload, where the spec's reader looks: the config is written either way (the
    // command is done), but a live session keeps its old settings until its next turn.
    if (r.success()) co_return R"({"session_reloaded":true,"session_reload_error":null})";
    std::string why = runtime::error_line(r.err, r.out);
    if (why.empty()) why = "exited with code " + std::to_string(r.exit_code);
    core::json::writer j;
    j.w.StartObject();
    j.key("session_reloaded");
    j.w.Bool(false);
    j.kv("session_reload_error", why);
    j.w.EndObject();
    co_return j.str();
}

net::awaitable<std::string> executor::remove_profile(const std::string& id) {
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
        runtime::call logout = *rt.auth_logout(id, agent);
        const auto r = co_await call(std::move(logout), cfg_.command_timeout());
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

net::awaitable<command_outcome> executor::connected_models(command_row cmd, plan p) {
    const runtime::cli& rt = cfg_.runtime;
    const auto secrets = redactions(cmd);
    // The providers the runtime has credentials for (auth profiles, its config, environment).
    runtime::call status_call = rt.model_status();
    const auto status = co_await call(std::move(status_call), p.timeout, true);
    if (!status.success())
        co_return command_outcome::failure(failure_of("models status", status, secrets));
    const auto providers = runtime::connected_providers(status.out);
    if (!providers) {
        co_return command_outcome::failure("models status answered no JSON: " +
                                           runtime::error_line(status.err, status.out));
    }
    // Their catalogues one provider at a time (`models list --provider P`: 4 s on two cores,
    // most of it the CLI's start-up) while that costs less than the whole catalogue (`--all`:
    // 24 s for 242 models, 2026.6.1); none connected, nothing to list.
    constexpr std::size_t kPerProviderLists = 4;
    std::vector<std::optional<std::string>> targets;
    if (providers->size() <= kPerProviderLists) {
        targets.assign(providers->begin(), providers->end());
    } else {
        targets.emplace_back(std::nullopt);
    }
    std::vector<std::string> outputs, errors;
    for (const auto& target : targets) {
        runtime::call list_call = rt.list_models(target);
        auto list = co_await call(std::move(list_call), p.timeout, true);
        if (!list.success())
            co_return command_outcome::failure(failure_of("models list", list, secrets));
        outputs.push_back(std::move(list.out));
        errors.push_back(std::move(list.err));
    }
    auto models = runtime::models_of(std::vector<std::string_view>(outputs.begin(), outputs.end()),
                                     *providers);
    if (!models) {
        // Only now, on the way out, which answer was not a list.
        std::size_t bad = 0;
        while (bad + 1 < outputs.size() && runtime::models_of(outputs[bad], *providers)) ++bad;
        co_return command_outcome::failure("models list answered no JSON: " +
                                           runtime::error_line(errors[bad], outputs[bad]));
    }
    command_outcome o = command_outcome::success(std::move(*models));
    o.json_out = true;
    co_return o;
}

net::awaitable<command_outcome> executor::set_default_provider(command_row cmd, plan p) {
    const runtime::cli& rt = cfg_.runtime;
    const auto secrets = redactions(cmd);
    const std::string provider = p.fields.at("provider");
    const std::string profile = provider + ":" + p.fields.at("profile_name");
    // 1. The profile first in its provider's order (the row's agent's, else the default
    //    agent's, which every agent reads through to).
    runtime::call order_call = rt.auth_order(provider, profile, p.field("agent_id"));
    const auto order = co_await call(std::move(order_call), p.timeout);
    if (!order.success())
        co_return command_outcome::failure(failure_of("models auth order set", order, secrets),
                                           order.exit_code, order.out, order.err);
    // 2. The gateway's default model (agents.defaults.model): the runtime's only notion of a
    //    default provider is the provider of that model.
    std::optional<std::string> target = p.field("model");
    std::string before;
    if (!target) {
        runtime::call status_call = rt.model_status();
        const auto status = co_await call(std::move(status_call), p.timeout, true);
        if (!status.success())
            co_return command_outcome::failure(failure_of("models status", status, secrets));
        before = runtime::default_model(status.out).value_or("");
        if (before.rfind(provider + "/", 0) != 0) {
            runtime::call list_call = rt.list_models(provider);
            const auto list = co_await call(std::move(list_call), p.timeout, true);
            if (!list.success())
                co_return command_outcome::failure(failure_of("models list", list, secrets));
            target = runtime::first_model(list.out, provider);
            if (!target) {
                co_return command_outcome::failure(
                    "auth_set_default: the runtime's catalogue has no model of provider \"" +
                    provider + "\" to make the default (the default model stays \"" + before +
                    "\"); give payload field \"model\" (<provider>/<model_name>), or refresh the "
                    "catalogue (openclaw models list --refresh)");
            }
        }
    }
    if (target) {
        runtime::call set_call = rt.set_default_model(*target);
        const auto set = co_await call(std::move(set_call), p.timeout);
        if (!set.success())
            co_return command_outcome::failure(failure_of("models set", set, secrets),
                                               set.exit_code, set.out, set.err);
    }
    const std::string now = target.value_or(before);
    command_outcome o = command_outcome::success(
        json_object({{"provider", provider}, {"profileId", profile}, {"defaultModel", now}}));
    o.json_out = true;
    co_return o;
}

}  // namespace awp::runner
