// rest_statement: prints the statements awp-api-gateway runs for one data-API request as a
// pgbench script (the setup and the main statement in one pipeline, as the gateway sends them),
// and the values of their parameters as pgbench -D definitions, one per line, in a file.
// Usage: rest_statement DSN ROLE CLAIMS_JSON METHOD PATH QUERY DEFINES_FILE [SCHEMAS]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "awp/core/pg.hpp"
#include "awp/rest/query.hpp"
#include "awp/rest/request.hpp"

namespace {

/// $n placeholders as pgbench variables :pfx_n.
std::string with_vars(const std::string& sql, const std::string& pfx) {
    std::string out;
    for (std::size_t i = 0; i < sql.size(); ++i) {
        if (sql[i] == '$' && i + 1 < sql.size() &&
            std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
            std::size_t j = i + 1;
            while (j < sql.size() && std::isdigit(static_cast<unsigned char>(sql[j]))) ++j;
            out += ":" + pfx + sql.substr(i + 1, j - i - 1);
            i = j - 1;
        } else {
            out += sql[i];
        }
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 8) {
        std::cerr << "usage: rest_statement DSN ROLE CLAIMS METHOD PATH QUERY DEFINES [SCHEMAS]\n";
        return 2;
    }
    const std::string dsn = argv[1], role = argv[2], claims = argv[3], method = argv[4],
                      path = argv[5], query = argv[6], defines = argv[7];
    std::vector<std::string> schemas{argc > 8 ? argv[8] : "public"};
    try {
        auto c = awp::core::pg::connection::connect(dsn);
        c.exec("SELECT set_config('search_path', '', false), set_config('jit', 'off', false)");
        auto r = c.exec(std::string(awp::rest::catalog_query()), {"{" + schemas[0] + "}"});
        auto cache = awp::rest::decode(r.text(0, 0), schemas);
        awp::rest::raw_request in;
        in.method = method;
        in.path = path;
        in.query = query;
        awp::rest::options o;
        auto p = awp::rest::prepare(awp::rest::parse(in, cache->schemas), *cache, o);
        awp::rest::session_facts f;
        f.role = role;
        f.claims_json = claims;
        f.method = method;
        f.path = "/rest/v1" + path;
        f.headers_json = "{}";
        f.search_path = awp::rest::search_path(p.req.schema, {"public", "extensions"});
        f.default_statement_timeout = "30s";
        f.read_only = p.req.read_only;
        const auto setup = awp::rest::setup_statement(f);
        std::ofstream d(defines);
        auto define = [&](const std::string& pfx, const awp::rest::statement& st) {
            for (std::size_t i = 0; i < st.params.size(); ++i) {
                d << pfx << (i + 1) << "=" << st.params[i].value_or("") << "\n";
            }
        };
        define("s", setup);
        define("m", p.main);
        std::cout << "\\startpipeline\n"
                  << with_vars(setup.sql, "s") << ";\n"
                  << with_vars(p.main.sql, "m") << ";\n"
                  << "\\endpipeline\n";
    } catch (const std::exception& e) {
        std::cerr << "rest_statement: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
