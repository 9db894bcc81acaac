// What a finished command tells the agents row (spec: agents.status, model, thinking): a
// provision makes its agent ready, or error with the reason; a set_agent_model that worked sets
// the model and thinking it wrote into the runtime. Written by the runner through
// awp_command_agent_state (sql/0030), the one write its gateway login has on agents.
#pragma once

#include <optional>
#include <string>

#include "command.hpp"
#include "outcome.hpp"

namespace awp::runner {

struct agent_row_state {
    std::string agent_slug;
    std::string json;  // {"status", "error", "model", "thinking"}: each key present is written
};

/// The state a provision sets while it runs: {"status":"provisioning","error":null}.
std::string provisioning_state();

/// The agents row change of a finished command, or nullopt when its action changes none.
std::optional<agent_row_state> agent_state_of(const command_row& cmd, const final_outcome& o);

}  // namespace awp::runner
