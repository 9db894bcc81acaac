// Login users (app_users) as the sign-in paths read and show them: the one column list both
// /api/auth/login and /auth/v1 select, and GoTrue's user object and app_metadata.
#pragma once

#include <string>

#include "awp/core/pg.hpp"
#include "gateway.hpp"

namespace awp::api {

/// The columns of an app_users row aliased `u`, in the order app_user_at reads them. Works on
/// any schema version (user_metadata is read through to_jsonb, absent before sql/0028).
extern const char* const kAppUserColumns;

/// The app_user of row `row` of a result selected with kAppUserColumns.
[[nodiscard]] app_user app_user_at(const core::pg::result& r, int row);

/// The user's app_metadata, as sql's awp_user_app_metadata makes it: the provider, the tenant
/// when there is one, awp_role for an operator.
[[nodiscard]] std::string app_metadata_json(const app_user& u);

/// GoTrue's user object (auth-js's User) of `u`.
[[nodiscard]] std::string user_json(const app_user& u);

}  // namespace awp::api
