// A command's outcome as its row stores it, and settle(): the one place every action's outcome
// passes on its way to complete_command / fail_command, so no action can forget to scrub.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "command.hpp"
#include "scrub.hpp"

namespace awp::runner {

class final_outcome;

/// The outcome as it is written: the payload's secrets removed (spec, Authentication rule 6)
/// on success and on failure alike, its own patch merged after; every value in `secrets` (the
/// synced ones, the payload's, the action's own) redacted from stdout, stderr and the error;
/// each output cut to its limit (a JSON stdout trimmed by entries, kept valid); the error cut
/// to kErrorLimit; all valid text.
final_outcome settle(const command_row& cmd, command_outcome raw, const known_secrets& secrets,
                     std::size_t output_limit);

/// Made only by settle(): a final transition cannot be written from an unscrubbed outcome.
class final_outcome {
public:
    using kind = command_outcome::kind;
    kind k() const noexcept { return k_; }
    bool done() const noexcept { return k_ == kind::done; }
    bool writes_nothing() const noexcept { return k_ != kind::done && k_ != kind::failed; }
    const std::optional<int>& exit_code() const noexcept { return exit_code_; }
    const std::string& error() const noexcept { return error_; }
    const std::string& out() const noexcept { return out_; }
    const std::string& err() const noexcept { return err_; }
    /// The payload patch (JSON object text), "" for none.
    const std::string& patch() const noexcept { return patch_; }

private:
    friend final_outcome settle(const command_row&, command_outcome, const known_secrets&,
                                std::size_t);
    final_outcome() = default;
    kind k_ = kind::done;
    std::optional<int> exit_code_;
    std::string error_, out_, err_, patch_;
};

/// Two payload patches (JSON object texts, "" for none) as one; `b`'s members win.
std::string merge_patches(const std::string& a, const std::string& b);

}  // namespace awp::runner
