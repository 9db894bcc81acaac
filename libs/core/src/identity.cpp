// The agent user (see identity.hpp).
#include "awp/core/identity.hpp"

#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "awp/core/error.hpp"

namespace awp::core::identity {

user lookup(const std::string& name_or_uid) {
    if (name_or_uid.empty()) throw config_error("AGENT_USER is empty");
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    uid_t uid = 0;
    const auto* end = name_or_uid.data() + name_or_uid.size();
    const auto [ptr, ec] = std::from_chars(name_or_uid.data(), end, uid);
    const int rc = ec == std::errc() && ptr == end
                       ? ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found)
                       : ::getpwnam_r(name_or_uid.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc != 0 || found == nullptr) {
        throw config_error("AGENT_USER \"" + name_or_uid +
                           "\": no such user (create it: useradd --system awp-agent)");
    }
    if (pw.pw_uid == 0) {
        throw config_error("AGENT_USER \"" + name_or_uid +
                           "\" is root: agents must run as an unprivileged user");
    }
    return {pw.pw_uid, pw.pw_gid, pw.pw_name, pw.pw_dir ? pw.pw_dir : "/"};
}

bool can_switch() noexcept {
    // CapEff of /proc/self/status, hexadecimal: CAP_SETGID is bit 6, CAP_SETUID bit 7.
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("CapEff:", 0) != 0) continue;
        std::uint64_t caps = 0;
        const auto first = line.find_first_not_of(" \t", 7);
        if (first == std::string::npos) return false;
        const auto [ptr, ec] =
            std::from_chars(line.data() + first, line.data() + line.size(), caps, 16);
        (void)ptr;
        if (ec != std::errc()) return false;
        return (caps & (std::uint64_t{1} << 6)) != 0 && (caps & (std::uint64_t{1} << 7)) != 0;
    }
    return false;
}

std::optional<user> agent_user(const std::string& setting) {
    if (setting.empty()) return std::nullopt;
    auto u = lookup(setting);
    if (u.uid == ::geteuid()) {
        throw config_error("AGENT_USER \"" + setting +
                           "\" is the daemon's own user: give agents a user of their own");
    }
    if (!can_switch()) {
        throw config_error("AGENT_USER \"" + setting +
                           "\": this daemon cannot start processes as another user; run it as "
                           "root or grant CAP_SETUID and CAP_SETGID (systemd: "
                           "AmbientCapabilities=CAP_SETUID CAP_SETGID; compose: cap_add)");
    }
    return u;
}

void check_layout(const user& u, const std::string& agent_setting, const std::string& agent_dir,
                  const std::vector<std::pair<std::string, std::string>>& own) {
    namespace fs = std::filesystem;
    struct stat st {};
    if (::lstat(agent_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != u.uid) {
        throw config_error(agent_setting + " " + agent_dir + " must be a folder of AGENT_USER " +
                           u.name + " (the runtime and the agents write there): mkdir -p " +
                           agent_dir + " && chown -R " + u.name + ": " + agent_dir);
    }
    std::error_code ec;
    const auto base = fs::weakly_canonical(agent_dir, ec);
    for (const auto& [setting, dir] : own) {
        const auto path = fs::weakly_canonical(dir, ec);
        const auto rel = path.lexically_relative(base);
        if (!rel.empty() && *rel.begin() != "..") {
            throw config_error(setting + " " + dir + " is inside " + agent_setting + " " +
                               agent_dir + ", which AGENT_USER " + u.name +
                               " owns: put it outside (a folder of the daemon's own user)");
        }
    }
}

as_user_files::as_user_files(const std::optional<user>& u) noexcept {
    if (!u) return;
    // setfsuid returns the previous value whether or not the change took.
    old_gid_ = static_cast<gid_t>(::setfsgid(u->gid));
    old_uid_ = static_cast<uid_t>(::setfsuid(u->uid));
    active_ = true;
}

as_user_files::~as_user_files() {
    if (!active_) return;
    ::setfsuid(old_uid_);
    ::setfsgid(old_gid_);
}

}  // namespace awp::core::identity
