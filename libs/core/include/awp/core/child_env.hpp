// The one environment policy for every process a daemon starts (runtime CLIs, agent wakes,
// shell commands): an allowlist, never a strip list. A child inherits only what a program needs
// to run (PATH, HOME, locale, time zone, terminal, temporary and XDG folders, proxy and CA
// settings, the agent runtime's own OPENCLAW_* settings) plus what the caller sets on purpose
// (spawn_options::env: the action's variables, the agent's own secrets where the action calls
// for them). Nothing that names a credential is inherited, allowlisted or not. docs/security.md.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "awp/core/process.hpp"

namespace awp::core::child_env {

using env_map = std::map<std::string, std::string, std::less<>>;

/// Variable names an operator adds to the allowlist: AWP_CHILD_ENV_ALLOW, a comma list of names
/// or prefixes ending in '*' ("MYTOOL_*"); a name that looks like a credential stays refused.
inline constexpr const char* kAllowVariable = "AWP_CHILD_ENV_ALLOW";

/// A name that looks like a credential: contains KEY, SECRET, PASSWORD, PASSWD, TOKEN,
/// CREDENTIAL, DSN, DATABASE_URL, COOKIE or AUTH (any case), or starts with PG (libpq's
/// settings: PGPASSWORD, PGPASSFILE, PGSERVICEFILE...).
[[nodiscard]] bool looks_secret(std::string_view name) noexcept;

/// Whether a child inherits this variable of the daemon: on the allowlist (or in `extra_allow`,
/// the parsed AWP_CHILD_ENV_ALLOW) and not looks_secret().
[[nodiscard]] bool inherited(std::string_view name, std::string_view extra_allow = {}) noexcept;

/// `scheme://user:password@host/...` without the password (`scheme://user@host/...`); any other
/// value unchanged.
[[nodiscard]] std::string without_url_password(std::string_view value);

/// The environment of a child: the inherited variables of `parent` (an environ-style array;
/// nullptr = this process's environ), a URL's password removed unless the variable is named in
/// AWP_CHILD_ENV_ALLOW, then `set` on top (set wins; set may name anything).
[[nodiscard]] env_map build(const env_map& set, char** parent = nullptr);

/// Makes `o` use the policy: o.env becomes build(o.env) and replace_env is set.
void apply(process::spawn_options& o);

}  // namespace awp::core::child_env
