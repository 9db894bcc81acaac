// awpctl realtime drop-slot: removes realtime's logical replication slots (one per api-gateway,
// <REALTIME_SLOT>_<instance>), so a database whose gateways no longer run realtime, or a
// deployment scaled down, stops holding WAL for them (docs/realtime-capture.md). A slot a
// gateway is reading is left alone: stop that gateway first (or it would make its slot anew).
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

// The slots of the prefix (named it, or <prefix>_...) in this database; each dropped only when
// inactive, in the same statement: a gateway taking a slot between a check and the drop makes
// pg_drop_replication_slot fail (55006), not succeed.
constexpr const char* kDropSql = R"SQL(
SELECT s.slot_name::text AS name, s.active, s.active_pid,
       CASE WHEN NOT s.active THEN pg_catalog.pg_drop_replication_slot(s.slot_name)::text IS NOT NULL
       END AS dropped
  FROM pg_catalog.pg_replication_slots s
 WHERE s.database = current_database()
   AND (s.slot_name = $1 OR left(s.slot_name::text, length($1) + 1) = $1 || '_')
 ORDER BY 1
)SQL";

command add_realtime(CLI::App& root, context& ctx) {
    static realtime_options o;
    auto* rt = root.add_subcommand("realtime", "Realtime's change capture (its replication slots)");
    auto* drop = rt->add_subcommand(
        "drop-slot",
        "Drop realtime's replication slots (as a superuser or a REPLICATION login) so they hold "
        "no more WAL; a slot a gateway reads is left alone");
    drop->add_option("--slot", o.slot,
                     "The slots' prefix (REALTIME_SLOT): it and every <prefix>_<instance>")
        ->envname("REALTIME_SLOT")
        ->capture_default_str();
    rt->require_subcommand(1);
    return {rt, [&ctx] {
                auto c = core::pg::connection::connect(ctx.database_url);
                const auto r = c.exec(kDropSql, {o.slot});
                if (r.empty()) {
                    std::cout << "awpctl realtime: no slot " << o.slot << " or " << o.slot
                              << "_* in this database\n";
                    return 0;
                }
                int busy = 0;
                for (int i = 0; i < r.size(); ++i) {
                    const auto name = r.get<std::string>(i, "name");
                    if (r.get<bool>(i, "active")) {
                        ++busy;
                        std::cerr << "awpctl realtime: slot " << name << " is being read (pid "
                                  << r.get_optional<long long>(i, "active_pid").value_or(0)
                                  << "): stop that gateway (or set REALTIME=off) first\n";
                    } else {
                        std::cout << "awpctl realtime: dropped slot " << name << "\n";
                    }
                }
                return busy ? 1 : 0;
            }};
}

}  // namespace

AWPCTL_COMMAND(add_realtime);

}  // namespace awp::ctl
