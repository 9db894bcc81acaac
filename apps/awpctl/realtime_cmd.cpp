// awpctl realtime drop-slot: removes realtime's logical replication slot, so a database whose
// gateways no longer run realtime stops holding WAL for it (docs/realtime-capture.md). A slot a
// gateway is reading is left alone: stop that gateway first (or it would make the slot anew).
#include <iostream>
#include <string>

#include "awp/core/error.hpp"
#include "awp/core/pg.hpp"
#include "commands.hpp"

namespace awp::ctl {
namespace {

struct realtime_options {
    std::string slot = "awp_realtime";
};

// Dropped only when present, inactive and of this database, in one statement: a gateway taking
// the slot between a check and the drop makes pg_drop_replication_slot fail (55006), not succeed.
constexpr const char* kDropSql = R"SQL(
SELECT s.active, s.active_pid, s.database = current_database() AS here,
       CASE WHEN NOT s.active AND s.database = current_database()
            THEN pg_catalog.pg_drop_replication_slot(s.slot_name)::text IS NOT NULL
       END AS dropped
  FROM pg_catalog.pg_replication_slots s
 WHERE s.slot_name = $1
)SQL";

command add_realtime(CLI::App& root, context& ctx) {
    static realtime_options o;
    auto* rt = root.add_subcommand("realtime", "Realtime's change capture (its replication slot)");
    auto* drop = rt->add_subcommand(
        "drop-slot",
        "Drop realtime's replication slot (as a superuser or a REPLICATION login) so it holds no "
        "more WAL; refused while a gateway reads it");
    drop->add_option("--slot", o.slot, "The slot's name (REALTIME_SLOT)")
        ->envname("REALTIME_SLOT")
        ->capture_default_str();
    rt->require_subcommand(1);
    return {rt, [&ctx] {
                auto c = core::pg::connection::connect(ctx.database_url);
                const auto r = c.exec(kDropSql, {o.slot});
                if (r.empty()) {
                    std::cout << "awpctl realtime: no slot " << o.slot << "\n";
                    return 0;
                }
                if (!r.get<bool>(0, "here")) {
                    std::cerr << "awpctl realtime: slot " << o.slot
                              << " belongs to another database: not dropped\n";
                    return 1;
                }
                if (r.get<bool>(0, "active")) {
                    std::cerr << "awpctl realtime: slot " << o.slot << " is being read (pid "
                              << r.get_optional<long long>(0, "active_pid").value_or(0)
                              << "): stop that gateway (or set REALTIME=off) first\n";
                    return 1;
                }
                std::cout << "awpctl realtime: dropped slot " << o.slot << "\n";
                return 0;
            }};
}

}  // namespace

AWPCTL_COMMAND(add_realtime);

}  // namespace awp::ctl
