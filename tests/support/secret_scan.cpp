#include "support/secret_scan.hpp"

#include <fstream>
#include <sstream>

#include "support/pooler.hpp"
#include "support/test_db.hpp"

namespace awp::test {

std::map<std::string, std::string> daemon_secrets() {
    const auto tag = random_name("s");
    return {
        {"JWT_SECRET", "jwt-secret-" + tag + "-0123456789abcdef0123"},
        {"SERVICE_ROLE_KEY", "service-role-" + tag + "-0123456789"},
        {"HOSTED_SECRETS_KEY", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
        {"GATEWAY_TOKEN", "gateway-token-" + tag},
        {"MY_API_KEY", "api-key-" + tag},
        {"UPSTREAM_SECRET", "upstream-secret-" + tag},
        {"SMTP_PASSWORD", "smtp-password-" + tag},
        {"GITHUB_TOKEN", "github-token-" + tag},
        {"PGPASSFILE", "/nonexistent/pgpass-" + tag}};
}

std::vector<std::string> leaked_secrets(const std::filesystem::path& dir,
                                        const std::vector<std::string>& patterns,
                                        const std::map<std::string, std::string>& secrets,
                                        const std::string& dsn, int* scanned) {
    std::vector<std::string> values;
    for (const auto& [k, v] : secrets) values.push_back(v);
    // The password of a postgresql://user:password@host DSN.
    if (auto at = dsn.find('@'), colon = dsn.find(':', dsn.find("://") + 3);
        at != std::string::npos && colon != std::string::npos && colon < at) {
        values.push_back(dsn.substr(colon + 1, at - colon - 1));
    }
    // Through PgBouncer the daemon was given its gateway's key instead (support/pooler.hpp).
    if (through_pgbouncer()) {
        if (auto host = pool_login_of(dsn)) values.push_back(host->key);
    }
    std::vector<std::string> out;
    int n = 0;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
        const auto name = f.path().filename().string();
        bool wanted = false;
        for (const auto& s : patterns) wanted = wanted || name.find(s) != std::string::npos;
        if (!wanted || !f.is_regular_file()) continue;
        ++n;
        std::ifstream in(f.path(), std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        const auto text = ss.str();
        for (const auto& v : values) {
            if (!v.empty() && text.find(v) != std::string::npos) out.push_back(name + ": " + v);
        }
    }
    if (scanned) *scanned = n;
    return out;
}

}  // namespace awp::test
