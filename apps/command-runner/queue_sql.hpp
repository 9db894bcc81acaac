// The runner's queue statements, in one place: the runner (service.cpp) and its benchmark
// (bench/runner) run exactly these texts, as prepared statements (pg::session::query_prepared).
#pragma once

namespace awp::runner::sql {

/// Takes the oldest pending command of the gateway straight to running under a new lease token
/// (lease_and_start_command, sql/0013): one statement, one row version, one synchronous commit.
/// Nothing runs before this commit is durable, so a command is never run twice; a runner that
/// dies before the commit leaves the command pending. A payload the runner then refuses ends
/// failed from running, the runtime never called.
/// $1 lease seconds (COMMAND_TIMEOUT + 60), $2 gateway slug, $3 runner instance, $4 tenant id
/// (or NULL). Columns: id, tenant_id, gateway_id, action, agent_slug, payload, lease_token,
/// requested_by_operator.
inline constexpr const char* kLeaseAndStart =
    "SELECT l.id::text, l.tenant_id::text, l.gateway_id::text, l.action::text, "
    "l.agent_slug, l.payload::text, l.lease_token::text, l.requested_by_operator "
    "FROM public.lease_and_start_command($1, $2, $3, $4::uuid) AS l";

/// The final transition of the command that just ended (complete_command when $3 is "done",
/// fail_command when "failed") and kLeaseAndStart of the next, in one statement and one commit
/// (finish_and_lease_command, sql/0015): one WAL flush per command instead of two. Refused as a
/// whole when either part is; the runner then makes the two calls apart (kComplete / kFail, then
/// kLeaseAndStart) so each reports its own error. Returns the next command as kLeaseAndStart
/// does, or no row when none is pending (the transition is committed either way).
/// $1 command id, $2 lease token, $3 outcome, $4 exit code, $5 error, $6 stdout, $7 stderr,
/// $8 payload patch, then $9-$12 as kLeaseAndStart's $1-$4.
inline constexpr const char* kFinishAndLease =
    "SELECT l.id::text, l.tenant_id::text, l.gateway_id::text, l.action::text, "
    "l.agent_slug, l.payload::text, l.lease_token::text, l.requested_by_operator "
    "FROM public.finish_and_lease_command(p_command_id => $1::uuid, p_lease_token => $2::uuid, "
    "p_outcome => $3, p_exit_code => $4::int, p_error => $5, p_stdout => $6, p_stderr => $7, "
    "p_payload_patch => $8::jsonb, p_lease_seconds => $9::int, p_gateway_slug => $10, "
    "p_runner => $11, p_tenant_id => $12::uuid) AS l";

/// A longer lease for an action that may run longer than COMMAND_TIMEOUT (several steps, an
/// auth flow). $1 command id, $2 lease token, $3 lease seconds from now.
inline constexpr const char* kExtendLease =
    "SELECT 1 FROM public.extend_command_lease(p_command_id => $1::uuid, p_lease_token => "
    "$2::uuid, p_lease_seconds => $3::int)";

/// $1 command id, $2 exit code, $3 stdout, $4 stderr, $5 lease token, $6 payload patch.
inline constexpr const char* kComplete =
    "SELECT 1 FROM public.complete_command(p_command_id => $1::uuid, p_exit_code => $2::int, "
    "p_stdout => $3, p_stderr => $4, p_lease_token => $5::uuid, p_payload_patch => $6::jsonb)";

/// $1 command id, $2 exit code, $3 error, $4 lease token, $5 stdout, $6 stderr, $7 patch.
inline constexpr const char* kFail =
    "SELECT 1 FROM public.fail_command(p_command_id => $1::uuid, p_exit_code => $2::int, "
    "p_error => $3, p_lease_token => $4::uuid, p_stdout => $5, p_stderr => $6, "
    "p_payload_patch => $7::jsonb)";

/// $1 command id, $2 patch, $3 lease token.
inline constexpr const char* kPatchPayload =
    "SELECT 1 FROM public.patch_command_payload(p_command_id => $1::uuid, p_patch => $2::jsonb, "
    "p_lease_token => $3::uuid)";

/// The command's agents row (status, error, model, thinking: the keys of $4 that are present)
/// while the command holds its lease (awp_command_agent_state, sql/0030): only provision and
/// set_agent_model, only an agent of the command's gateway the command names. Returns whether a
/// row was changed. $1 command id, $2 lease token, $3 agent slug, $4 state (JSON object).
inline constexpr const char* kAgentState =
    "SELECT public.awp_command_agent_state(p_command_id => $1::uuid, p_lease_token => $2::uuid, "
    "p_agent_slug => $3, p_state => $4::jsonb)";

}  // namespace awp::runner::sql
