// Connection strings (awp/core/pg.hpp): the ports a DSN reaches, its login, the same DSN with
// another login or with TCP keepalives. libpq parses every form; nothing here connects.
#include <charconv>
#include <cstdlib>
#include <string>
#include <vector>

#include "awp/core/error.hpp"
#include "awp/core/pg.hpp"

namespace awp::core::pg {

std::vector<std::uint16_t> dsn_ports(const std::string& dsn) {
    std::vector<std::uint16_t> out;
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
    if (err) PQfreemem(err);
    if (!opts) return out;
    std::string ports;
    for (PQconninfoOption* o = opts; o->keyword; ++o) {
        if (std::string_view(o->keyword) == "port" && o->val) ports = o->val;
    }
    PQconninfoFree(opts);
    if (ports.empty()) {
        const char* env = std::getenv("PGPORT");
        ports = env && *env ? env : "5432";
    }
    std::size_t start = 0;
    while (start <= ports.size()) {
        auto comma = ports.find(',', start);
        if (comma == std::string::npos) comma = ports.size();
        const auto item = std::string_view(ports).substr(start, comma - start);
        unsigned v = 0;
        auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty()) {
            v = 5432;  // an empty entry of a list means the default
        } else if (ec != std::errc() || end != item.data() + item.size() || v == 0 || v > 65535) {
            v = 0;
        }
        if (v != 0) out.push_back(static_cast<std::uint16_t>(v));
        start = comma + 1;
    }
    return out;
}

namespace {

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

// libpq's conninfo value quoting: single quotes, backslash before ' and \.
std::string conninfo_quote(std::string_view v) {
    std::string out = "'";
    for (const char c : v) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
    }
    out += '\'';
    return out;
}

}  // namespace

login dsn_login(const std::string& dsn) {
    login l;
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
    if (err) PQfreemem(err);
    if (opts) {
        for (PQconninfoOption* o = opts; o->keyword; ++o) {
            if (!o->val) continue;
            const std::string_view k(o->keyword);
            if (k == "user") l.user = o->val;
            if (k == "password") l.password = o->val;
        }
        PQconninfoFree(opts);
    }
    if (l.user.empty()) l.user = env_or_empty("PGUSER");
    if (l.password.empty()) l.password = env_or_empty("PGPASSWORD");
    return l;
}

namespace {

// `dsn` as a key=value string: `over` replaces what the DSN says, `under` fills what it leaves
// unset.
std::string rewrite_dsn(const std::string& dsn,
                        const std::vector<std::pair<std::string, std::string>>& over,
                        const std::vector<std::pair<std::string, std::string>>& under) {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
    if (!opts) {
        std::string why = err ? err : "cannot parse";
        if (err) PQfreemem(err);
        throw config_error("bad database connection string: " + why);
    }
    auto named = [](const auto& list, std::string_view k) {
        for (const auto& kv : list)
            if (kv.first == k) return true;
        return false;
    };
    std::string out;
    std::vector<std::string> set;
    for (PQconninfoOption* o = opts; o->keyword; ++o) {
        const std::string_view k(o->keyword);
        if (!o->val || named(over, k)) continue;
        out += std::string(k) + "=" + conninfo_quote(o->val) + " ";
        set.emplace_back(k);
    }
    PQconninfoFree(opts);
    for (const auto& [k, v] : under) {
        if (std::find(set.begin(), set.end(), k) == set.end() && !named(over, k)) {
            out += k + "=" + conninfo_quote(v) + " ";
        }
    }
    for (const auto& [k, v] : over) out += k + "=" + conninfo_quote(v) + " ";
    if (!out.empty()) out.pop_back();
    return out;
}

bool dsn_parses(const std::string& dsn) {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
    if (err) PQfreemem(err);
    if (!opts) return false;
    PQconninfoFree(opts);
    return true;
}

}  // namespace

std::string dsn_with_login(const std::string& dsn, const login& l) {
    return rewrite_dsn(dsn, {{"user", l.user}, {"password", l.password}}, {});
}

std::string dsn_with_keepalives(const std::string& dsn) {
    if (!dsn_parses(dsn)) return dsn;  // libpq says what is wrong with it, as it did before
    return rewrite_dsn(dsn, {},
                       {{"keepalives", "1"},
                        {"keepalives_idle", "30"},
                        {"keepalives_interval", "10"},
                        {"keepalives_count", "3"}});
}

std::string dsn_for_replication(const std::string& dsn) {
    return rewrite_dsn(dsn, {{"replication", "database"}},
                       {{"keepalives", "1"},
                        {"keepalives_idle", "30"},
                        {"keepalives_interval", "10"},
                        {"keepalives_count", "3"}});
}

}  // namespace awp::core::pg
