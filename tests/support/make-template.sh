#!/usr/bin/env bash
# ctest fixture: (re)build the migrated template database the integration tests clone, and
# sweep test databases left behind by killed runs.
set -euo pipefail
awpctl=${1:?usage: make-template.sh path/to/awpctl}
: "${AWP_PG_ADMIN_DSN:?source .awp/cluster.env (scripts/test.sh does)}"
admin="$AWP_PG_ADMIN_DSN dbname=postgres"
q() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$admin" "$@"; }
# A killed realtime test leaves its replication slot, which holds WAL and keeps its database from
# being dropped: inactive slots of test databases no session uses go first.
q -tAc "SELECT format('SELECT pg_drop_replication_slot(%L);', slot_name) FROM pg_replication_slots
        WHERE NOT active AND database LIKE 'awp\_t\_%' AND database NOT IN (SELECT datname
        FROM pg_stat_activity WHERE datname IS NOT NULL)" | q >/dev/null
q -tAc "SELECT format('DROP DATABASE %I WITH (FORCE);', datname) FROM pg_database
        WHERE datname LIKE 'awp\_t\_%' AND datname NOT IN (SELECT datname FROM pg_stat_activity
        WHERE datname IS NOT NULL)" | q >/dev/null
q -c "UPDATE pg_database SET datistemplate = false WHERE datname = 'awp_test_template'"
q -c "DROP DATABASE IF EXISTS awp_test_template WITH (FORCE)"
q -c "CREATE DATABASE awp_test_template"
"$awpctl" --database-url "$AWP_PG_ADMIN_DSN dbname=awp_test_template" migrate >/dev/null
q -c "ALTER DATABASE awp_test_template WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"
