// settle(): what a command's row stores of its outcome (outcome.hpp).
#include "outcome.hpp"

#include <rapidjson/document.h>

namespace awp::runner {

namespace rj = rapidjson;

std::string merge_patches(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    auto first = core::json::try_parse(a, core::json::kPayload);
    auto second = core::json::try_parse(b, core::json::kPayload);
    if (!first || !first->IsObject()) return b;
    if (!second || !second->IsObject()) return a;
    auto& al = first->GetAllocator();
    for (auto& m : second->GetObject()) {
        first->RemoveMember(m.name);
        first->AddMember(rj::Value(m.name, al), rj::Value(m.value, al), al);
    }
    return core::json::to_string(*first);
}

final_outcome settle(const command_row& cmd, command_outcome raw, const known_secrets& known,
                     std::size_t output_limit) {
    final_outcome f;
    f.k_ = raw.k;
    if (raw.writes_nothing()) return f;
    std::vector<std::string> secrets = known.for_command(cmd);
    secrets.insert(secrets.end(), raw.secrets.begin(), raw.secrets.end());
    const std::size_t limit = raw.out_limit ? raw.out_limit : output_limit;
    f.exit_code_ = raw.k == final_outcome::kind::done
                       ? std::optional<int>(raw.exit_code.value_or(0))
                       : raw.exit_code;
    f.out_ = keep_stdout(raw.out, secrets, raw.json_out, limit);
    f.err_ = keep(raw.err, secrets, limit);
    if (!f.done()) f.error_ = error_text(redact(raw.error, secrets));
    f.patch_ = merge_patches(scrub_patch(cmd, f.done()), raw.patch);
    return f;
}

}  // namespace awp::runner
