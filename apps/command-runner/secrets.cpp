// Secrets sync: decrypt, write env files atomically, record the outcome on the rows.
#include "secrets.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "awp/core/secrets.hpp"

namespace awp::runner {

namespace fs = std::filesystem;
namespace log = core::log;

std::string format_env_file(const std::vector<std::pair<std::string, std::string>>& vars) {
    auto sorted = vars;
    std::sort(sorted.begin(), sorted.end());
    std::string out = "# Written by awp-command-runner from the secrets table; do not edit.\n";
    for (const auto& [k, v] : sorted) {
        out += k + "='";
        for (char ch : v) {
            if (ch == '\'') {
                out += "'\\''";
            } else {
                out.push_back(ch);
            }
        }
        out += "'\n";
    }
    return out;
}

void write_file_atomic(const std::string& path, const std::string& content, unsigned mode) {
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) throw core::error("cannot create " + tmp + ": " + std::strerror(errno));
    ::fchmod(fd, static_cast<mode_t>(mode));
    std::size_t done = 0;
    while (done < content.size()) {
        const auto n = ::write(fd, content.data() + done, content.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            const std::string err = std::strerror(errno);
            ::close(fd);
            ::unlink(tmp.c_str());
            throw core::error("cannot write " + tmp + ": " + err);
        }
        done += static_cast<std::size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string err = std::strerror(errno);
        ::unlink(tmp.c_str());
        throw core::error("cannot replace " + path + ": " + err);
    }
}

namespace {
void ensure_dir(const fs::path& p) {
    fs::create_directories(p);
    fs::permissions(p, fs::perms::owner_all, fs::perm_options::replace);
}
}  // namespace

sync_result write_secret_files(const std::string& dir, const std::string& key,
                               const std::vector<secret_row>& rows) {
    sync_result out;
    std::map<std::string, std::string> gateway_vars;
    std::map<std::string, std::map<std::string, std::string>> agent_vars;
    for (const auto& r : rows) {
        std::string plain;
        // The files hold `NAME='value'` lines: a name the SQL would refuse is never written.
        if (!core::secrets::is_valid_name(r.key)) {
            out.failed_ids.push_back(r.id);
            continue;
        }
        try {
            plain = core::crypto::decrypt_secret_with_key(r.encrypted_value, key);
        } catch (const std::exception&) {
            out.failed_ids.push_back(r.id);
            continue;
        }
        out.synced_ids.push_back(r.id);
        out.values.push_back(plain);
        if (r.agent_slug) {
            agent_vars[*r.agent_slug][r.key] = std::move(plain);
        } else {
            gateway_vars[r.key] = std::move(plain);
        }
    }
    const fs::path root(dir);
    ensure_dir(root);
    ensure_dir(root / core::secrets::kAgentsDir);
    std::vector<std::pair<std::string, std::string>> gw(gateway_vars.begin(), gateway_vars.end());
    write_file_atomic((root / core::secrets::kGatewayEnvFile).string(), format_env_file(gw));
    for (const auto& [slug, vars] : agent_vars) {
        // Only an agent slug names a file, so the file stays in agents/.
        const auto file = core::secrets::agent_env_file(slug);
        if (!file) continue;
        std::map<std::string, std::string> merged = gateway_vars;
        for (const auto& [k, v] : vars) merged[k] = v;
        std::vector<std::pair<std::string, std::string>> list(merged.begin(), merged.end());
        write_file_atomic((root / *file).string(), format_env_file(list));
        ++out.agent_files;
    }
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root / core::secrets::kAgentsDir, ec)) {
        const auto name = entry.path().filename().string();
        if (name.size() < 4 || name.compare(name.size() - 4, 4, ".env") != 0) continue;
        if (!agent_vars.count(name.substr(0, name.size() - 4))) fs::remove(entry.path(), ec);
    }
    return out;
}

boost::asio::awaitable<sync_result> sync_secrets(core::pg::connection& c, std::string gateway_id,
                                                 std::string dir, std::string key) {
    auto r = co_await c.async_query(
        "SELECT s.id::text, a.slug, s.key, s.encrypted_value FROM public.secrets s "
        "LEFT JOIN public.agents a ON a.id = s.agent_id AND a.tenant_id = s.tenant_id "
        "WHERE s.gateway_id = $1 ORDER BY s.key, s.id",
        gateway_id);
    std::vector<secret_row> rows;
    for (int i = 0; i < r.size(); ++i) {
        secret_row s;
        s.id = r.get<std::string>(i, 0);
        s.agent_slug = r.get_optional<std::string>(i, 1);
        s.key = r.get<std::string>(i, 2);
        s.encrypted_value = r.get<std::string>(i, 3);
        rows.push_back(std::move(s));
    }
    sync_result out;
    std::string write_failure;
    try {
        out = write_secret_files(dir, key, rows);
    } catch (const std::exception& e) {
        write_failure = e.what();
    }
    if (!write_failure.empty()) {
        // The UI shows sync_status / sync_error per secret: say why nothing reached the host.
        co_await c.async_query(
            "UPDATE public.secrets SET sync_status = 'error', sync_error = $2 "
            "WHERE gateway_id = $1::uuid AND sync_error IS DISTINCT FROM $2",
            gateway_id, "cannot write the secrets files: " + write_failure);
        throw core::error(write_failure);
    }
    std::string ok = "{", bad = "{";
    for (std::size_t i = 0; i < out.synced_ids.size(); ++i)
        ok += (i ? "," : "") + out.synced_ids[i];
    for (std::size_t i = 0; i < out.failed_ids.size(); ++i)
        bad += (i ? "," : "") + out.failed_ids[i];
    ok += "}";
    bad += "}";
    co_await c.async_query(
        "UPDATE public.secrets SET sync_status = 'active', sync_error = NULL, last_synced_at = "
        "now() "
        "WHERE id = ANY($1::uuid[]) AND (sync_status <> 'active' OR last_synced_at IS NULL "
        "OR sync_error IS NOT NULL)",
        ok);
    co_await c.async_query(
        "UPDATE public.secrets SET sync_status = 'error', "
        "sync_error = 'cannot decrypt: wrong key (was the service-role key rotated?) or altered "
        "value' "
        "WHERE id = ANY($1::uuid[]) AND sync_status <> 'error'",
        bad);
    log::info("secrets synced", {{"secrets", out.synced_ids.size()},
                                 {"undecryptable", out.failed_ids.size()},
                                 {"agent_files", out.agent_files}});
    co_return out;
}

std::string secrets_key(const std::string& hosted_key, const std::string& service_role_key) {
    return core::secrets::encryption_key(hosted_key, service_role_key);
}

}  // namespace awp::runner
