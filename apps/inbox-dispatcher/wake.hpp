// What a wake is made of: the leased item, the message the agent reads, the runtime argv, and the
// failure reason recorded on the item (bounded, secrets redacted). Pure functions, unit-tested.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "awp/core/process.hpp"
#include "awp/runtime/openclaw.hpp"

namespace awp::dispatcher {

/// An inbox item as leased, with the agent's model and thinking level at lease time.
struct inbox_item {
    std::string id;
    std::string agent_id;
    std::string agent_slug;
    std::string event_type;
    std::string title;
    std::string summary;
    std::string payload_json = "{}";
    std::optional<std::string> task_id;
    std::string lease_token;
    int attempts = 0;
    int max_attempts = 3;
    std::optional<std::string> model;
    std::optional<std::string> thinking;
};

/// A task that still blocks the item's task (from get_task_relations).
struct blocker {
    std::string title;
    std::string status;
};

/// Upper bound of the message handed to the runtime.
inline constexpr std::size_t kMaxMessage = 16 * 1024;
/// Upper bound of the failure reason stored on the item.
inline constexpr std::size_t kMaxReason = 2000;

/// Whether the item's message carries the task's unresolved blockers.
bool wants_blockers(const inbox_item& item);

/// The message the agent reads: event, summary, item, task, context (payload without overrides
/// or secret-looking keys) and, for task assignments, the unresolved blockers.
std::string build_message(const inbox_item& item, const std::vector<blocker>& blockers);

/// The model and thinking level of the wake: the item's payload overrides, else the agent's.
std::optional<std::string> effective_model(const inbox_item& item);
std::optional<std::string> effective_thinking(const inbox_item& item);

/// The runtime's agent turn for the item (awp::runtime: the agent's runtime id, the thinking
/// level as the runtime spells it). Throws core::error when the slug or level cannot be mapped.
std::vector<std::string> build_argv(const runtime::cli& cli, const inbox_item& item,
                                    const std::string& message);

/// Replaces every known secret and every secret-looking token (key=value pairs named like keys,
/// tokens or passwords, bearer tokens, sk- keys, URL passwords) by ***.
std::string redact(std::string text, const std::vector<std::string>& secrets);

/// Why a wake failed, for fail_inbox_item: exit code, signal or timeout, then the stderr tail
/// (redacted, bounded by kMaxReason).
std::string failure_reason(const core::process::process_result& r,
                           std::chrono::milliseconds timeout,
                           const std::vector<std::string>& secrets);

}  // namespace awp::dispatcher
