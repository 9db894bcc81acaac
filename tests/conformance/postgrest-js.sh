#!/usr/bin/env bash
# postgrest-js's own test suite (packages/core/postgrest-js/test of github.com/supabase/supabase-js
# at v2.112.2), unmodified, against awp-api-gateway: its fixture (test/supabase/migrations/*.sql,
# then seed.sql) in a scratch database of the project's cluster after a Supabase-like base
# (base.sql; PostGIS from Debian when missing, the fixture makes a geometry column), the gateway on
# 127.0.0.1:54321 exposing public and personal with the fixture's settings (config.toml and the
# fixture's ALTER ROLE authenticator: max rows 1000, aggregates, the EXPLAIN media type, tx
# override), then jest --ci --runInBand with the published @supabase/postgrest-js in place of
# ../src/index. Prints total, passed, failed and every failure; the JSON summary, jest's results
# and the gateway's log go to build/conformance/postgrest-js (AWP_CONFORMANCE_OUT).
# Usage: tests/conformance/postgrest-js.sh <supabase-js checkout> [jest arguments, e.g. -t name]
# Exit status: 0 all passed, 1 some failed, 2 the run itself could not be made.
set -euo pipefail
# shellcheck source=tests/conformance/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

conformance_checkout "${1:-}" packages/core/postgrest-js
shift
conformance_tools
conformance_debian_package postgresql-15-postgis-3
conformance_scratch postgrest-js

fixture=$PKG_SRC/test/supabase
conformance_load "$CONF/base.sql" -v with_auth=true
for f in "$fixture"/migrations/*.sql; do
  conformance_load "$f"
done
conformance_load "$fixture/seed.sql"
log "fixture loaded into $DB"

conformance_copy_package packages/core/postgrest-js
conformance_serve_and_test JWT_SECRET="$(openssl rand -hex 32)" SERVICE_ROLE_KEY="$(openssl rand -hex 32)" \
  API_REST_SCHEMAS=public,personal API_REST_EXTRA_SEARCH_PATH=public,extensions \
  API_REST_MAX_ROWS=1000 API_REST_AGGREGATES=on API_REST_PLAN=on API_REST_TX_OVERRIDE=on \
  -- jest.postgrest-js.config.cjs postgrest-js "$@"
