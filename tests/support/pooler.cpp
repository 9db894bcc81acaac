// Daemons under test through PgBouncer (AWP_TEST_PGBOUNCER=1).
#include "support/pooler.hpp"

#include "support/test_db.hpp"

#include <cstdlib>
#include <stdexcept>

extern char** environ;

namespace awp::test {

namespace {

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

// Replaces every `from` in s that `next` accepts after it.
template <class F>
void replace_all(std::string& s, const std::string& from, const std::string& to, F next) {
    for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at)) {
        const std::size_t end = at + from.size();
        if (next(end)) {
            s.replace(at, from.size(), to);
            at += to.size();
        } else {
            at = end;
        }
    }
}

}  // namespace

bool through_pgbouncer() {
    if (env_or_empty("AWP_TEST_PGBOUNCER") != "1") return false;
    if (env_or_empty("AWP_PGBOUNCER_PORT").empty())
        throw std::runtime_error(
            "AWP_TEST_PGBOUNCER=1 without AWP_PGBOUNCER_PORT: run scripts/test.sh pgbouncer, or "
            "source .awp/pgbouncer.env after scripts/pgbouncer.sh up");
    return true;
}

std::string via_pgbouncer(const std::string& dsn) {
    const std::string pg = env_or_empty("AWP_PG_PORT");
    const std::string bouncer = env_or_empty("AWP_PGBOUNCER_PORT");
    if (pg.empty() || bouncer.empty()) return dsn;
    std::string out = dsn;
    // URL form: host:port followed by the path or the end.
    for (const std::string host : {"127.0.0.1:", "localhost:"}) {
        replace_all(out, host + pg, host + bouncer, [&](std::size_t end) {
            return end == out.size() || out[end] == '/' || out[end] == '?';
        });
    }
    // Keyword form: port=N followed by a space or the end (only a TCP host is pooled).
    if (out.find("host=127.0.0.1") != std::string::npos ||
        out.find("host=localhost") != std::string::npos) {
        replace_all(out, "port=" + pg, "port=" + bouncer,
                    [&](std::size_t end) { return end == out.size() || out[end] == ' '; });
    }
    return out;
}

std::string as_given_to_daemons(const std::string& dsn) {
    return through_pgbouncer() ? via_pgbouncer(dsn) : dsn;
}

void route_through_pgbouncer(std::map<std::string, std::string>& env,
                             const std::vector<std::string>& argv) {
    if (!through_pgbouncer()) return;
    for (const auto& a : argv) {
        if (a == "migrate") return;  // awpctl migrate: a session advisory lock, direct
    }
    // The wake relay LISTENs on its DATABASE_URL: a direct session, never the pooler.
    if (!argv.empty() && (argv[0] == "awp-wake" || argv[0].ends_with("/awp-wake"))) return;
    auto db = env.find("DATABASE_URL");
    if (db != env.end()) {
        // A gateway's own login becomes the shared pool login with the gateway's key: the
        // hosted topology (docs/scale.md), where 1,000 hosts share one pool.
        if (auto host = pool_login_of(db->second); host && !env.count("GATEWAY_KEY")) {
            db->second = host->dsn;
            env["GATEWAY_KEY"] = host->key;
        }
        if (!env.count("WAKE_DATABASE_URL")) env["WAKE_DATABASE_URL"] = db->second;
        db->second = via_pgbouncer(db->second);
        // PgBouncer 1.18 in transaction mode cannot carry named prepared statements.
        if (!env.count("DATABASE_PREPARED")) env["DATABASE_PREPARED"] = "off";
    }
    auto api = env.find("AWP_API_DATABASE_URL");
    if (api != env.end()) {
        // The gateway's schema-cache LISTEN stays direct, as operations.md deploys it.
        if (!env.count("AWP_API_WAKE_DATABASE_URL")) env["AWP_API_WAKE_DATABASE_URL"] = api->second;
        api->second = via_pgbouncer(api->second);
    }
}

std::vector<std::string> child_environment(const std::map<std::string, std::string>& env,
                                           const std::vector<std::string>& argv) {
    std::map<std::string, std::string> all;
    for (char** e = environ; *e; ++e) {
        const std::string kv = *e;
        const auto eq = kv.find('=');
        if (eq == std::string::npos) continue;
        all.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
    for (const auto& [k, v] : env) all[k] = v;
    route_through_pgbouncer(all, argv);
    std::vector<std::string> out;
    out.reserve(all.size());
    for (const auto& [k, v] : all) out.push_back(k + "=" + v);
    return out;
}

}  // namespace awp::test
