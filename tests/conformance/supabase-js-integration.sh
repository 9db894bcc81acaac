#!/usr/bin/env bash
# supabase-js's integration test (packages/core/supabase-js/test/integration.test.ts of
# github.com/supabase/supabase-js at v2.112.2), unmodified, its PostgREST, PostgreSQL RLS and
# Authentication groups, against awp-api-gateway: a scratch database with the Supabase-like base
# (base.sql), awp's own migrations (its users, /auth/v1's sessions, auth.users in step with them),
# the base's default privileges again (awp's migrations revoke them), then the fixture's todos
# table with its auth.uid() policies and its seed; the gateway on
# 127.0.0.1:54321 with the platform's demo JWT secret (the test's anon key is signed with it) and
# sign-up on; jest --ci --runInBand -t '<the three groups>' with the published
# @supabase/supabase-js in place of ../src/index. The other groups need Realtime, the API gateway's
# trace headers and Storage. Prints total, passed, failed and every failure; the JSON summary,
# jest's results and the gateway's log go to build/conformance/supabase-js-integration.
# Usage: tests/conformance/supabase-js-integration.sh <supabase-js checkout> [jest arguments]
# Exit status: 0 all passed, 1 some failed, 2 the run itself could not be made.
set -euo pipefail
# shellcheck source=tests/conformance/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

conformance_checkout "${1:-}" packages/core/supabase-js
shift
conformance_tools
conformance_scratch supabase-js-integration

fixture=$PKG_SRC/supabase
[[ -f $fixture/migrations/20250422000000_create_todos_table.sql ]] || die "the todos migration is missing in $fixture/migrations"
conformance_load "$CONF/base.sql" -v with_auth=false
"$BIN/awpctl" --database-url "$DB_ADMIN" migrate >/dev/null || die "awpctl migrate failed on the scratch database"
# awp's sql/0001 revokes the platform's default privileges on public from anon and authenticated
# (for its own tables, which it grants one by one); the fixture, written for a hosted project,
# counts on them (todos has policies for anon and authenticated but no GRANT). Made again here,
# as they were: on a hosted project with awp's schema the fixture's tables would get no grants
# (tests/conformance/README.md).
conformance_load "$CONF/base.sql" -v with_auth=false
log "the platform's default privileges made again after awp's migrations (sql/0001 revokes them)"
conformance_load "$fixture/migrations/20250422000000_create_todos_table.sql"
conformance_load "$fixture/seed/seed_todos.sql"
log "awp's schema and the todos fixture loaded into $DB"

conformance_copy_package packages/core/supabase-js
# The platform's local demo secret: the anon key the test hard-codes is signed with it.
conformance_serve_and_test JWT_SECRET=super-secret-jwt-token-with-at-least-32-characters-long \
  SERVICE_ROLE_KEY="$(openssl rand -hex 32)" API_SIGNUP=on \
  -- jest.supabase-js.config.cjs supabase-js-integration \
  -t '^Supabase Integration Tests (PostgREST|PostgreSQL RLS|Authentication) ' "$@"
