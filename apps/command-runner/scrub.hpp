// Output scrubbing: what the runner stores of a command (stdout, stderr, error text, payload)
// carries no secret, fits its limit and is text Postgres accepts.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "command.hpp"

namespace awp::runner {

/// An error text is cut here (with "...") before it is stored.
inline constexpr std::size_t kErrorLimit = 2000;
/// Ceiling of a JSON stdout (list_models, auth_list, auth_refresh), kept valid by trimming
/// entries (docs/runtime.md).
inline constexpr std::size_t kJsonOutputLimit = 256 * 1024;
/// The output of an interactive login kept with its command.
inline constexpr std::size_t kAuthOutputLimit = 2000;

/// The payload patch that removes the secrets the command carries (spec, Authentication rule
/// 6), or "" when there is nothing to scrub. Applied on success and on failure alike; `ok`
/// says which. auth_set_api_key always gets api_key_scrubbed: true and base_url_applied (true
/// only when a base_url was given and the command succeeded).
std::string scrub_patch(const command_row& cmd, bool ok);

/// Secret values the command carries (api_key, base_url, value, *_token): redacted from any
/// output stored or logged.
std::vector<std::string> payload_secrets(const command_row& cmd);

/// Replaces every occurrence of each secret (4 bytes or longer) with "[redacted]".
std::string redact(std::string text, const std::vector<std::string>& secrets);

/// The tail of `text` of at most `limit` bytes, with a marker line when something was cut.
std::string tail(const std::string& text, std::size_t limit);

/// Text Postgres accepts: invalid UTF-8 and NUL bytes become U+FFFD.
std::string clean_text(const std::string& bytes);

/// Redacted, cut to its last `limit` bytes and made valid text: what is stored of an output.
std::string keep(const std::string& text, const std::vector<std::string>& secrets,
                 std::size_t limit);

/// A stdout as stored: with `json`, valid JSON whatever its size (entries trimmed to
/// kJsonOutputLimit, never bytes); otherwise (or when it is not JSON) its terminal escapes
/// stripped and kept like any output.
std::string keep_stdout(const std::string& out, const std::vector<std::string>& secrets, bool json,
                        std::size_t limit);

/// An error text as fail_command stores it: cut to kErrorLimit (with "...") and made valid.
std::string error_text(const std::string& error);

/// The decrypted secrets of the last sync (values of 6 bytes or more): redacted from every
/// output, with what the command itself carries.
class known_secrets {
public:
    void replace(std::vector<std::string> values);
    /// What to redact from the outputs of `cmd`: its payload's secrets, then the synced ones.
    std::vector<std::string> for_command(const command_row& cmd) const;
    std::size_t size() const noexcept { return values_.size(); }

private:
    std::vector<std::string> values_;
};

}  // namespace awp::runner
