// awpctl status: per gateway, the daemons alive (last heartbeat), queue depths by status, the
// oldest pending age, dead letters and failed commands in the last hour; realtime's replication
// slots, one per api-gateway (lag, confirmed LSN, WAL status against the cap); the object store's
// rows and its disk's free space; --json for scripts, --watch to refresh.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <rapidjson/document.h>

#include "awp/core/json.hpp"
#include "awp/core/migrate.hpp"
#include "awp/core/pg.hpp"
#include "awp/storage/store.hpp"
#include "commands.hpp"

namespace awp::ctl {
namespace {

// One statement, one snapshot: every figure comes from the same moment.
constexpr const char* kStatusSql = R"SQL(
SELECT json_build_object(
  'at', now(),
  'schema', (SELECT max(version) FROM schema_migrations),
  'gateways', COALESCE((SELECT json_agg(g ORDER BY g.slug) FROM (
    SELECT gw.slug, gw.id, gw.status, gw.last_seen_at,
      (SELECT COALESCE(json_agg(json_build_object(
                 'daemon', h.daemon, 'instance', h.instance, 'pid', h.pid,
                 'age_s', floor(extract(epoch FROM now() - h.last_seen_at))::bigint,
                 'alive', h.last_seen_at > now() - make_interval(secs => $1::int))
               ORDER BY h.daemon, h.instance), '[]')
         FROM daemon_heartbeats h WHERE h.gateway_id = gw.id) AS daemons,
      (SELECT COALESCE(json_object_agg(status, n), '{}')
         FROM (SELECT status, count(*) AS n FROM agent_commands c
                WHERE c.gateway_id = gw.id GROUP BY status) x) AS commands,
      (SELECT floor(extract(epoch FROM now() - min(created_at)))::bigint FROM agent_commands c
        WHERE c.gateway_id = gw.id AND c.status = 'pending') AS oldest_pending_command_s,
      (SELECT count(*) FROM agent_commands c
        WHERE c.gateway_id = gw.id AND c.status = 'failed'
          AND c.finished_at > now() - interval '1 hour') AS failed_commands_last_hour,
      (SELECT COALESCE(json_object_agg(status, n), '{}')
         FROM (SELECT status, count(*) AS n FROM agent_inbox_items i
                WHERE i.gateway_id = gw.id GROUP BY status) y) AS inbox,
      (SELECT floor(extract(epoch FROM now() - min(created_at)))::bigint FROM agent_inbox_items i
        WHERE i.gateway_id = gw.id AND i.status = 'pending') AS oldest_pending_inbox_s
    FROM gateways gw) g), '[]'),
  'knowledge', (SELECT COALESCE(json_object_agg(embedding_status, n), '{}')
                  FROM (SELECT embedding_status, count(*) AS n FROM knowledge_items GROUP BY 1) k),
  -- realtime's slots, one per api-gateway (<prefix>_<instance>, docs/realtime-capture.md): how
  -- far each reader is behind and how close its slot is to the cap (max_slot_wal_keep_size)
  -- that would invalidate it.
  'realtime', json_build_object(
    'wal_level', current_setting('wal_level'),
    'max_slot_wal_keep_size', current_setting('max_slot_wal_keep_size'),
    'slot', $2::text,
    'slots', COALESCE((SELECT json_agg(json_build_object(
        'name', s.slot_name, 'active', s.active, 'active_pid', s.active_pid,
        'wal_status', s.wal_status, 'confirmed_lsn', s.confirmed_flush_lsn::text,
        'lag_bytes', pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(),
                                                s.confirmed_flush_lsn)::bigint,
        'safe_wal_size', s.safe_wal_size) ORDER BY s.slot_name)
      FROM pg_catalog.pg_replication_slots s
     WHERE s.database = current_database()
       AND (s.slot_name = $2::text
            OR left(s.slot_name::text, length($2::text) + 1) = $2::text || '_')), '[]')),
  -- the object store of /storage/v1 (docs/storage.md): its rows from the database, its disk
  -- from STORAGE_DIR when this host has it
  'storage', json_build_object('dir', $3::text, 'free_bytes', $4::bigint,
                               'total_bytes', $5::bigint, 'usage', $6::json)
)::text
)SQL";

// What the store holds, by the database: objects, bytes, tenants, deletions not yet reaped
// (NULL where awp made no storage schema, e.g. a hosted project's own).
constexpr const char* kStorageSql = R"SQL(
SELECT CASE WHEN to_regclass('storage.tenant_usage') IS NULL THEN NULL ELSE 'present' END
)SQL";
constexpr const char* kStorageUsageSql = R"SQL(
SELECT json_build_object(
  'objects', COALESCE(sum(u.objects), 0), 'bytes', COALESCE(sum(u.bytes), 0),
  'tenants', count(*) FILTER (WHERE u.objects > 0),
  'queued_deletions', (SELECT count(*) FROM storage.deleted_versions))::text
FROM storage.tenant_usage u
)SQL";

struct status_options {
    double watch_s = 0;
    int alive_s = 90;
    std::string slot = "awp_realtime";
    std::string storage_dir;  // STORAGE_DIR
};

std::int64_t count_of(const rapidjson::Value& obj, const char* key) {
    if (!obj.IsObject() || !obj.HasMember(key) || !obj[key].IsInt64()) return 0;
    return obj[key].GetInt64();
}

std::string age(const rapidjson::Value& v) {
    if (!v.IsInt64()) return "-";
    const auto s = v.GetInt64();
    if (s < 120) return std::to_string(s) + "s";
    if (s < 7200) return std::to_string(s / 60) + "m";
    return std::to_string(s / 3600) + "h";
}

std::string bytes(std::int64_t n) {
    if (n < 10 * 1024) return std::to_string(n) + " B";
    if (n < 10 * 1024 * 1024) return std::to_string(n / 1024) + " KiB";
    if (n < 10LL * 1024 * 1024 * 1024) return std::to_string(n / (1024 * 1024)) + " MiB";
    return std::to_string(n / (1024LL * 1024 * 1024)) + " GiB";
}

// One line: whether realtime can run, and its slot's lag against the cap.
void print_realtime(const rapidjson::Value& r) {
    if (!r.IsObject()) return;
    const std::string wal_level = r["wal_level"].GetString();
    const std::string slot = r["slot"].GetString();
    std::cout << "\nrealtime: ";
    if (wal_level != "logical") {
        std::cout << "off: wal_level is " << wal_level
                  << " (needs logical and a server restart; docs/realtime-capture.md)\n";
        return;
    }
    const auto& slots = r["slots"];
    if (!slots.IsArray() || slots.Empty()) {
        std::cout << "no slot " << slot
                  << "_* yet (each api-gateway makes its own when it starts)\n";
        return;
    }
    bool first = true;
    for (const auto& s : slots.GetArray()) {
        if (!first) std::cout << "realtime: ";
        first = false;
        std::cout << "slot " << s["name"].GetString() << " "
                  << (s["active"].GetBool() ? "active" : "INACTIVE") << ", "
                  << bytes(count_of(s, "lag_bytes")) << " behind (confirmed "
                  << (s["confirmed_lsn"].IsString() ? s["confirmed_lsn"].GetString() : "-")
                  << "), wal_status "
                  << (s["wal_status"].IsString() ? s["wal_status"].GetString() : "-") << ", cap "
                  << r["max_slot_wal_keep_size"].GetString();
        if (s["safe_wal_size"].IsInt64()) {
            std::cout << " (" << bytes(s["safe_wal_size"].GetInt64()) << " left)";
        }
        std::cout << "\n";
    }
}

// One line: the store's objects and bytes, and its disk's free space.
void print_storage(const rapidjson::Value& s) {
    if (!s.IsObject()) return;
    std::cout << "\nstorage: ";
    const auto& u = s["usage"];
    if (u.IsObject()) {
        std::cout << count_of(u, "objects") << " objects, " << bytes(count_of(u, "bytes")) << " in "
                  << count_of(u, "tenants") << " tenant(s), " << count_of(u, "queued_deletions")
                  << " deletion(s) to reap";
    } else {
        std::cout << "no storage schema here";
    }
    if (s["dir"].IsString() && s["free_bytes"].IsInt64()) {
        std::cout << "; " << s["dir"].GetString() << ": " << bytes(s["free_bytes"].GetInt64())
                  << " free of " << bytes(s["total_bytes"].GetInt64());
    } else if (s["dir"].IsString()) {
        std::cout << "; " << s["dir"].GetString() << " is not readable here";
    }
    std::cout << "\n";
}

void print_human(const std::string& json) {
    const auto d = core::json::parse_object(json, core::json::kDocument);
    std::cout << "schema " << (d["schema"].IsString() ? d["schema"].GetString() : "(none)") << "\n";
    const auto& gws = d["gateways"];
    if (gws.Empty()) std::cout << "no gateways registered\n";
    for (const auto& g : gws.GetArray()) {
        std::cout << "\ngateway " << g["slug"].GetString() << " (" << g["status"].GetString()
                  << ")\n";
        std::cout << "  daemons:";
        if (g["daemons"].Empty()) std::cout << " none reporting";
        for (const auto& h : g["daemons"].GetArray()) {
            std::cout << "\n    " << std::left << std::setw(20) << h["daemon"].GetString()
                      << (h["alive"].GetBool() ? "alive " : "SILENT") << "  last seen "
                      << age(h["age_s"]) << " ago  (" << h["instance"].GetString() << ")";
        }
        const auto& c = g["commands"];
        std::cout << "\n  commands: pending " << count_of(c, "pending") << ", leased "
                  << count_of(c, "leased") << ", running " << count_of(c, "running") << ", done "
                  << count_of(c, "done") << ", failed " << count_of(c, "failed") << " (last hour "
                  << g["failed_commands_last_hour"].GetInt64() << "), cancelled "
                  << count_of(c, "cancelled") << "; oldest pending "
                  << age(g["oldest_pending_command_s"]) << "\n";
        const auto& i = g["inbox"];
        std::cout << "  inbox:    pending " << count_of(i, "pending") << ", leased "
                  << count_of(i, "leased") << ", waiting to retry " << count_of(i, "failed")
                  << ", done " << count_of(i, "done") << ", dead letters "
                  << count_of(i, "dead_letter") << "; oldest pending "
                  << age(g["oldest_pending_inbox_s"]) << "\n";
    }
    const auto& k = d["knowledge"];
    std::cout << "\nknowledge: pending " << count_of(k, "pending") << ", indexed "
              << count_of(k, "indexed") << ", failed " << count_of(k, "failed") << "\n";
    if (d.HasMember("realtime")) print_realtime(d["realtime"]);
    if (d.HasMember("storage")) print_storage(d["storage"]);
}

command add_status(CLI::App& root, context& ctx) {
    static status_options o;
    auto* app = root.add_subcommand(
        "status",
        "Per gateway: daemons alive, queue depths by status, oldest pending age, dead letters, "
        "failed commands in the last hour");
    app->add_option("--watch", o.watch_s, "Refresh every N seconds until interrupted")
        ->check(CLI::Range(0.5, 3600.0));
    app->add_option("--alive-within", o.alive_s,
                    "A daemon is alive when its heartbeat is younger than this (seconds)")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    app->add_option("--realtime-slot", o.slot,
                    "The prefix of realtime's replication slots (REALTIME_SLOT)")
        ->envname("REALTIME_SLOT")
        ->capture_default_str();
    app->add_option("--storage-dir", o.storage_dir,
                    "The object store's folder, for its disk's free space (STORAGE_DIR)")
        ->envname("STORAGE_DIR");
    return {app, [&ctx] {
                auto conn = core::pg::connection::connect(ctx.database_url);
                if (core::migrate::current_version(conn).empty()) {
                    std::cerr << "awpctl status: the database has no awp schema (run awpctl "
                                 "migrate)\n";
                    return 1;
                }
                for (;;) {
                    std::optional<std::string> usage;
                    if (!conn.exec(kStorageSql).is_null(0, 0)) {
                        usage = conn.exec(kStorageUsageSql).get<std::string>(0, 0);
                    }
                    std::optional<std::string> dir;
                    std::optional<std::int64_t> free_bytes;
                    std::optional<std::int64_t> total_bytes;
                    if (!o.storage_dir.empty()) {
                        dir = o.storage_dir;
                        try {
                            const auto sp = storage::disk_space(o.storage_dir);
                            free_bytes = static_cast<std::int64_t>(sp.free_bytes);
                            total_bytes = static_cast<std::int64_t>(sp.total_bytes);
                        } catch (const storage::store_error&) {
                            // Not on this host, or not readable by this user: said in the output.
                        }
                    }
                    const core::pg::params p{o.alive_s,  o.slot,      dir,
                                             free_bytes, total_bytes, usage};
                    const auto json = conn.exec(kStatusSql, p).get<std::string>(0, 0);
                    if (o.watch_s > 0 && !ctx.json) std::cout << "\x1b[H\x1b[2J";
                    if (ctx.json) {
                        std::cout << json << "\n";
                    } else {
                        print_human(json);
                    }
                    std::cout.flush();
                    if (o.watch_s <= 0) return 0;
                    std::this_thread::sleep_for(
                        std::chrono::milliseconds(static_cast<long>(o.watch_s * 1000)));
                }
            }};
}

}  // namespace

AWPCTL_COMMAND(add_status);

}  // namespace awp::ctl
