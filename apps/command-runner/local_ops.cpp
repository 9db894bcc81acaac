// In-process actions on the agent runtime's files, each write atomic and locked.
#include "local_ops.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "awp/core/json.hpp"

#include "secrets.hpp"

namespace awp::runner {

namespace fs = std::filesystem;
namespace rj = rapidjson;

namespace {

class file_lock {
public:
    explicit file_lock(const std::string& path) {
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd_ >= 0) ::flock(fd_, LOCK_EX);
    }
    ~file_lock() {
        if (fd_ >= 0) ::close(fd_);
    }
    file_lock(const file_lock&) = delete;
    file_lock& operator=(const file_lock&) = delete;

private:
    int fd_ = -1;
};

rj::Document read_json(const fs::path& p) {
    std::ifstream in(p);
    if (!in) throw local_op_error("cannot read " + p.string());
    std::stringstream ss;
    ss << in.rdbuf();
    try {
        return core::json::parse_object(ss.str(), core::json::kDocument);
    } catch (const core::json::parse_error& e) {
        throw local_op_error(p.string() + " is not a JSON object: " + e.what());
    }
}

void write_json(const fs::path& p, const rj::Document& d) {
    rj::StringBuffer buf;
    rj::PrettyWriter<rj::StringBuffer> w(buf);
    w.SetIndent(' ', 2);
    d.Accept(w);
    write_file_atomic(p.string(), std::string(buf.GetString(), buf.GetSize()) + "\n", 0600);
}

}  // namespace

std::string set_agent_model(const std::string& home, const std::string& slug,
                            const std::string* model, const std::string* thinking) {
    const fs::path cfg = fs::path(home) / "openclaw.json";
    file_lock lock(cfg.string() + ".lock");
    rj::Document d = read_json(cfg);
    if (!d.HasMember("agents") || !d["agents"].IsObject() || !d["agents"].HasMember("list") ||
        !d["agents"]["list"].IsArray()) {
        throw local_op_error("agent \"" + slug +
                             "\" is not configured on this gateway (no agents.list)");
    }
    auto& al = d.GetAllocator();
    for (auto& e : d["agents"]["list"].GetArray()) {
        if (!e.IsObject() || !e.HasMember("id") || !e["id"].IsString()) continue;
        const std::string id = e["id"].GetString();
        if (id != slug &&
            !(id.size() > slug.size() &&
              id.compare(id.size() - slug.size() - 1, std::string::npos, "/" + slug) == 0)) {
            continue;
        }
        std::string summary = "Updated agent " + id + ":";
        auto apply = [&](const char* key, const std::string* v, const char* label) {
            if (!v) return;
            if (e.HasMember(key)) e.RemoveMember(key);
            if (!v->empty()) e.AddMember(rj::Value(key, al), rj::Value(v->c_str(), al), al);
            summary += std::string(" ") + label + "=" + (v->empty() ? "(default)" : *v);
        };
        apply("model", model, "model");
        apply("thinkingDefault", thinking, "thinking");
        write_json(cfg, d);
        return summary;
    }
    throw local_op_error("agent \"" + slug + "\" is not configured on this gateway");
}

std::string auth_remove(const std::string& home, const std::string& profile_id) {
    const fs::path agents = fs::path(home) / "agents";
    std::set<fs::path> seen;
    int removed = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(agents, ec)) {
        const fs::path f = entry.path() / "agent" / "auth-profiles.json";
        if (!fs::exists(f, ec)) continue;
        const fs::path real = fs::canonical(f, ec);
        if (ec || !seen.insert(real).second) continue;
        file_lock lock(real.string() + ".lock");
        rj::Document d;
        try {
            d = read_json(real);
        } catch (const local_op_error&) {
            continue;
        }
        if (!d.HasMember("profiles") || !d["profiles"].IsObject() ||
            !d["profiles"].HasMember(profile_id.c_str())) {
            continue;
        }
        d["profiles"].RemoveMember(profile_id.c_str());
        write_json(real, d);
        ++removed;
    }
    if (removed == 0)
        throw local_op_error("profile " + profile_id + " not found in any agent's auth store");
    return "Removed " + profile_id + " from " + std::to_string(removed) + " auth store(s)";
}

std::string upload_file(const std::string& dir, const std::string& path, const std::string& content,
                        const std::string& mode) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw local_op_error("the agent's workspace does not exist on this gateway");
    const fs::path target = fs::path(dir) / path;
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw local_op_error("cannot create the folder of " + path + ": " + ec.message());
    // No symlink may lead out of the workspace.
    const fs::path base = fs::canonical(dir);
    const fs::path parent = fs::canonical(target.parent_path(), ec);
    const auto rel = parent.lexically_relative(base);
    if (ec || rel.empty() || *rel.begin() == "..")
        throw local_op_error("path leaves the agent's workspace");
    if (fs::is_symlink(target, ec)) throw local_op_error("path is a symbolic link");
    write_file_atomic(target.string(), content,
                      static_cast<unsigned>(std::stoul(mode, nullptr, 8)));
    return "Wrote " + std::to_string(content.size()) + " bytes to " + path;
}

}  // namespace awp::runner
