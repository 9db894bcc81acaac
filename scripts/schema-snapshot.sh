#!/usr/bin/env bash
# sql/schema.snapshot.sql: the migrated schema as sorted text (tables, constraints, indexes,
# enums, row-level security, policies, grants, function signatures and their EXECUTE grants,
# triggers, roles), so a review sees what a migration changes. Function bodies are not in it:
# they are in sql/functions/*.sql.
#
#   scripts/schema-snapshot.sh                 migrate a scratch database on the project's cluster
#                                              (scripts/pg-cluster.sh up) and rewrite the file
#   scripts/schema-snapshot.sh --render DSN    print the snapshot of an already migrated database
#
# tests/integration/schema_snapshot_test.cpp renders its freshly migrated database with --render
# and compares the result with the checked-in file.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
AWPCTL=${AWPCTL:-$REPO/build/bin/awpctl}
OUT=$REPO/sql/schema.snapshot.sql

render() {
  PGOPTIONS="-c search_path=pg_catalog -c client_min_messages=warning" \
    psql -X -q -v ON_ERROR_STOP=1 -d "$1" -f "$REPO/scripts/schema-snapshot.sql"
}

if [[ ${1:-} == --render ]]; then
  render "${2:?usage: schema-snapshot.sh --render DSN}"
  exit 0
fi
[[ $# -eq 0 ]] || { echo "usage: schema-snapshot.sh [--render DSN]" >&2; exit 2; }

ENV_FILE=${AWP_STATE_DIR:-$REPO/.awp}/cluster.env
[[ -f $ENV_FILE ]] || { echo "schema-snapshot: no $ENV_FILE: run scripts/pg-cluster.sh up" >&2; exit 1; }
[[ -x $AWPCTL ]] || { echo "schema-snapshot: $AWPCTL is missing: build awpctl first" >&2; exit 1; }
# shellcheck disable=SC1090
. "$ENV_FILE"
db=awp_snapshot_$$
admin="$AWP_PG_ADMIN_DSN dbname=postgres"
q() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -d "$admin" -c "$1"; }
q "CREATE DATABASE $db"
trap 'q "DROP DATABASE IF EXISTS $db WITH (FORCE)"' EXIT
"$AWPCTL" --database-url "$AWP_PG_ADMIN_DSN dbname=$db" migrate --sql-dir "$REPO/sql" >/dev/null
render "$AWP_PG_ADMIN_DSN dbname=$db" >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "schema-snapshot: wrote ${OUT#"$REPO"/}"
