// Reads before a run, retried through an outage (pre_run.hpp).
#include "pre_run.hpp"

#include "awp/core/log.hpp"

namespace awp::runner {

using namespace std::chrono_literals;
namespace pg = core::pg;
namespace log = core::log;

core::retry_policy command_retry() {
    core::retry_policy p;
    p.first = 250ms;
    p.cap = 3s;
    p.finish_for = 80s;
    return p;
}

net::awaitable<std::optional<pg::result>> read_before_run(pg::session& db, const command_row& cmd,
                                                          std::string what, std::string sql,
                                                          pg::params params) {
    const auto policy = command_retry();
    const auto give_up = std::chrono::steady_clock::now() + policy.finish_for;
    pg::backoff backoff(policy.first, policy.cap);
    for (int attempt = 1;; ++attempt) {
        std::string failure;
        try {
            co_return co_await db.exec(sql, params);
        } catch (const pg::connection_error& e) {
            failure = e.what();
        }
        // The next exec reconnects: a connection that broke mid-statement is not reused.
        db.reset();
        if (std::chrono::steady_clock::now() >= give_up) {
            log::error("the database stayed away before the command ran; it did not run",
                       {{"command_id", cmd.id}, {"read", what}, {"error", failure}});
            co_return std::nullopt;
        }
        const auto wait = backoff.next();
        log::warn("a read before the command ran lost its connection; retrying on a new one",
                  {{"command_id", cmd.id},
                   {"read", what},
                   {"attempt", attempt},
                   {"error", failure},
                   {"retry_ms", wait.count()}});
        co_await sleep_ms(wait);
    }
}

}  // namespace awp::runner
