#!/usr/bin/env bash
# /storage/v1 of awp-api-gateway (docs/storage.md) beside the limits of the same machine, one
# command, every figure printed beside its peer with the ratio:
#   1. upload and download throughput of 1 MB and 100 MB objects (curl, the service-role key,
#      raw bodies; 100 MB also as a multipart form) beside cp of the same bytes on the same disk
#      (cp, and cp with fsync as awp fsyncs before a row names the bytes; downloads beside reading
#      the stored file);
#   2. the gateway's RSS while a 100 MB upload and download run (sampled every 10 ms; the goal:
#      flat, at most 2 MB above idle);
#   3. small objects (1 KiB): requests/s of an authenticated download (wrk, a user's token, RLS)
#      beside the data API's one-row read with the same token, and of small uploads.
# Usage: bench/storage/run.sh [build dir]. API_PORT (38184), DUR (seconds per wrk cell, 10),
# OUT (/tmp/awp-storage-bench: the store is made there, so cp runs on the same disk).
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-${AWP_BUILD_DIR:-$REPO/build}}
OUT=${OUT:-/tmp/awp-storage-bench}
API_PORT=${API_PORT:-38184}
DUR=${DUR:-10}
for t in wrk psql curl; do
  command -v "$t" >/dev/null || { echo "missing $t (scripts/install-deps.sh with AWP_DEPS=full)" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT"
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awp-api-gateway
BIN=$BENCH_BIN_run

db=awp_bench_storage_$$
gw_pid=
sampler=
cleanup() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null && wait "$gw_pid" 2>/dev/null
  psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
  rm -rf "$OUT/store" "$OUT"/*.bin "$OUT"/cp.*
  return 0
}
trap cleanup EXIT
psql -X -q "$AWP_PG_ADMIN_DSN" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
ADMIN="$AWP_PG_ADMIN_DSN dbname=$db"
API_DSN="postgresql://awp_api:${AWP_PG_API_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
TENANT=aaaaaaaa-0000-0000-0000-000000000001
psql -X -q -v ON_ERROR_STOP=1 "$ADMIN" >/dev/null <<SQL
INSERT INTO tenants (id, name, slug) VALUES ('$TENANT', 'A', 'bench-a');
INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('$TENANT', 'gw-a', 'A', 'ready');
SQL
JWT_SECRET=bench-jwt-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
SERVICE_KEY=bench-service-key-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export JWT_SECRET
TOKEN=$("$BUILD/bin/awpctl" token --user-id "$(cat /proc/sys/kernel/random/uuid)" \
  --tenant-id "$TENANT" --email bench@example.com --ttl 7200)

API_PORT=$API_PORT AWP_API_DATABASE_URL=$API_DSN AWP_CONFIG_DIR=$OUT/config \
  SERVICE_ROLE_KEY=$SERVICE_KEY STORAGE_DIR=$OUT/store STORAGE_FILE_SIZE_LIMIT=200000000 \
  STORAGE_MIN_FREE=0 STORAGE_TENANT_QUOTA=0 STORAGE_MAX_UPLOADS=64 STORAGE_MAX_UPLOADS_PER_CLIENT=64 \
  API_ACCESS_LOG=${API_ACCESS_LOG:-true} \
  API_TEMPLATES_DIR=$REPO/deploy/templates API_CONNECTORS_DIR=$REPO/deploy/connectors \
  "$BIN/awp-api-gateway" 2>"$OUT/gateway.log" &
gw_pid=$!
base=http://127.0.0.1:$API_PORT
for _ in $(seq 1 150); do curl -fsS -o /dev/null "$base/api/health" 2>/dev/null && break; sleep 0.2; done
curl -fsS -o /dev/null "$base/api/health" || { echo "the gateway did not start" >&2; tail "$OUT/gateway.log" >&2; exit 1; }

svc=(-H "apikey: $SERVICE_KEY" -H "Authorization: Bearer $SERVICE_KEY")
head -c 1000000 /dev/urandom >"$OUT/1mb.bin"
head -c 100000000 /dev/urandom >"$OUT/100mb.bin"
sync

now() { date +%s.%N; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", b / s / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$gw_pid/status"; }

# Seconds for `runs` copies of one file on the store's disk, with and without fsync.
cp_seconds() {  # file runs fsync(0|1)
  local t0 t1 i
  t0=$(now)
  for ((i = 0; i < $2; i++)); do
    if (($3)); then dd if="$1" of="$OUT/cp.$i" bs=1M conv=fsync status=none; else cp "$1" "$OUT/cp.$i"; fi
  done
  t1=$(now)
  rm -f "$OUT"/cp.*
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}
read_seconds() {  # file runs
  local t0 t1 i
  t0=$(now)
  for ((i = 0; i < $2; i++)); do cat "$1" >/dev/null; done
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}
# Seconds for `runs` uploads of one file (raw body, upsert), each checked.
upload_seconds() {  # file name runs [form]
  local t0 t1 i code
  t0=$(now)
  for ((i = 0; i < $3; i++)); do
    if [[ ${4:-} == form ]]; then
      code=$(curl -sS -o /dev/null -w '%{http_code}' "${svc[@]}" -H "x-upsert: true" \
        -F "cacheControl=3600" -F "file=@$1;type=application/octet-stream" "$base/storage/v1/object/bench/$2")
    else
      code=$(curl -sS -o /dev/null -w '%{http_code}' "${svc[@]}" -H "x-upsert: true" \
        -H "Content-Type: application/octet-stream" --data-binary "@$1" "$base/storage/v1/object/bench/$2")
    fi
    [[ $code == 200 ]] || { echo "upload of $2 answered $code" >&2; tail "$OUT/gateway.log" >&2; exit 1; }
  done
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}
download_seconds() {  # name runs expected-size
  local t0 t1 i size
  t0=$(now)
  for ((i = 0; i < $2; i++)); do
    size=$(curl -sS -o /dev/null -w '%{size_download}' "${svc[@]}" "$base/storage/v1/object/bench/$1")
    [[ $size == "$3" ]] || { echo "download of $1 gave $size bytes" >&2; exit 1; }
  done
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}

curl -fsS -o /dev/null "${svc[@]}" -H 'Content-Type: application/json' \
  -d '{"name":"bench","public":false}' "$base/storage/v1/bucket"
idle=$(rss_kb)
echo "== /storage/v1 benchmark ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ))"
echo "store $OUT/store on $(df -P "$OUT" | awk 'NR == 2 {print $1}'); gateway idle RSS $((idle / 1024)) MiB"
printf '\n%-46s %12s %12s %12s %8s %8s\n' "throughput (MB/s)" "awp" "cp" "cp+fsync" "awp/cp" "awp/fsync"
row() { printf '%-46s %12s %12s %12s %8s %8s\n' "$1" "$2" "$3" "$4" "$(ratio "$2" "$3")" "$(ratio "$2" "$4")"; }
for spec in "1mb.bin 1000000 20" "100mb.bin 100000000 3"; do
  read -r f size runs <<<"$spec"
  c=$(cp_seconds "$OUT/$f" "$runs" 0)
  cs=$(cp_seconds "$OUT/$f" "$runs" 1)
  u=$(upload_seconds "$OUT/$f" "$f" "$runs")
  row "upload $((size / 1000000)) MB (raw body) x$runs" "$(mbps $((size * runs)) "$u")" \
    "$(mbps $((size * runs)) "$c")" "$(mbps $((size * runs)) "$cs")"
  if [[ $f == 100mb.bin ]]; then
    uf=$(upload_seconds "$OUT/$f" "form-$f" "$runs" form)
    row "upload $((size / 1000000)) MB (multipart form) x$runs" "$(mbps $((size * runs)) "$uf")" \
      "$(mbps $((size * runs)) "$c")" "$(mbps $((size * runs)) "$cs")"
  fi
  d=$(download_seconds "$f" "$runs" "$size")
  r=$(read_seconds "$OUT/$f" "$runs")
  printf '%-46s %12s %12s %12s %8s %8s\n' "download $((size / 1000000)) MB x$runs (beside reading it)" \
    "$(mbps $((size * runs)) "$d")" "$(mbps $((size * runs)) "$r")" "-" "$(ratio "$(mbps $((size * runs)) "$d")" "$(mbps $((size * runs)) "$r")")" "-"
done

# RSS while 100 MB go in and out: sampled every 10 ms.
sample() { while :; do rss_kb >>"$OUT/rss.$1"; sleep 0.01; done; }
printf '\n%-46s %12s %12s %12s %8s\n' "gateway RSS (KiB)" "idle" "max" "max-idle" "goal"
for what in raw form download; do
  idle=$(rss_kb)
  : >"$OUT/rss.$what"
  sample "$what" &
  sampler=$!
  case $what in
    raw) upload_seconds "$OUT/100mb.bin" "rss-100mb" 1 >/dev/null ;;
    form) upload_seconds "$OUT/100mb.bin" "rss-form-100mb" 1 form >/dev/null ;;
    download) download_seconds "rss-100mb" 1 100000000 >/dev/null ;;
  esac
  kill "$sampler"; wait "$sampler" 2>/dev/null || true; sampler=
  max=$(sort -n "$OUT/rss.$what" | tail -1)
  printf '%-46s %12s %12s %12s %8s\n' "during a 100 MB $what" "$idle" "$max" "$((max - idle))" "<= 2048"
done

# Small objects: an authenticated download (the user's token: one statement under RLS, then the
# file) beside the data API's one-row read with the same token; and small uploads (the upload
# slots are raised to 64 for this one client, so wrk's 10 connections measure the path, not the
# limiter).
head -c 1024 /dev/urandom >"$OUT/small.bin"
small=$TENANT/small.bin
curl -fsS -o /dev/null -H "apikey: $TOKEN" -H "Authorization: Bearer $TOKEN" \
  -H "Content-Type: application/octet-stream" --data-binary "@$OUT/small.bin" "$base/storage/v1/object/assets/$small"
hdr=(-H "Authorization: Bearer $TOKEN" -H "apikey: $TOKEN")
curl -fsS -o /dev/null "${hdr[@]}" "$base/storage/v1/object/authenticated/assets/$small"
curl -fsS -o /dev/null "${hdr[@]}" "$base/rest/v1/tenants?select=id,name&limit=1"
rps() { awk '/^Requests\/sec/ {printf "%.0f", $2}' "$1"; }
p99() { awk '$1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
  f = (u == "us") ? 0.001 : (u == "s") ? 1000 : 1; printf "%.2f", v * f }' "$1"; }
wrk -t2 -c10 -d"$DUR"s --latency "${hdr[@]}" "$base/storage/v1/object/authenticated/assets/$small" >"$OUT/small-get.txt"
wrk -t2 -c10 -d"$DUR"s --latency "${hdr[@]}" "$base/rest/v1/tenants?select=id,name&limit=1" >"$OUT/rest-get.txt"
cat >"$OUT/upload.lua" <<LUA
-- Each thread names its objects apart (its own seed), so no upload meets another's name.
counter = 0
init = function(args)
  math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 100000)
end
request = function()
  counter = counter + 1
  local path = "/storage/v1/object/assets/$TENANT/up/" .. counter .. "-" .. math.random(1, 1e9)
  local headers = {}
  for k, v in pairs(wrk.headers) do headers[k] = v end  -- the token given with -H
  headers["Content-Type"] = "application/octet-stream"
  return wrk.format("POST", path, headers, string.rep("x", 1024))
end
LUA
wrk -t2 -c10 -d"$DUR"s --latency "${hdr[@]}" -s "$OUT/upload.lua" "$base" >"$OUT/small-put.txt"
printf '\n%-46s %12s %12s %8s\n' "small objects (wrk -t2 -c10, ${DUR}s)" "req/s" "p99 ms" "ratio"
g=$(rps "$OUT/small-get.txt"); r=$(rps "$OUT/rest-get.txt"); p=$(rps "$OUT/small-put.txt")
printf '%-46s %12s %12s %8s\n' "download 1 KiB (authenticated, RLS)" "$g" "$(p99 "$OUT/small-get.txt")" "$(ratio "$g" "$r")"
printf '%-46s %12s %12s %8s\n' "data API one-row read (peer)" "$r" "$(p99 "$OUT/rest-get.txt")" "1.00"
printf '%-46s %12s %12s %8s\n' "upload 1 KiB (new object each, fsync)" "$p" "$(p99 "$OUT/small-put.txt")" "$(ratio "$p" "$r")"
for f in small-get rest-get small-put; do
  e=$(awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' "$OUT/$f.txt")
  [ -z "$e" ] || echo "  $f: $e"
done
