// The runtime's own lock discipline for the files it also writes, and the one edit awp makes
// to them itself (2026.6 auth_remove): see openclaw.hpp and docs/runtime.md.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "awp/core/json.hpp"
#include "awp/runtime/openclaw.hpp"

namespace awp::runtime {

namespace rj = rapidjson;
namespace fs = std::filesystem;

// ---- the runtime's lock ---------------------------------------------------------------------

namespace {

bool lock_is_stale(const std::string& lock, std::chrono::milliseconds stale) {
    struct stat st {};
    if (::lstat(lock.c_str(), &st) != 0) return false;
    const auto age = std::chrono::seconds(std::time(nullptr) - st.st_mtime);
    if (age > stale) return true;
    std::ifstream in(lock);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto d = core::json::try_parse(text, core::json::kDocument);
    if (!d || !d->IsObject() || !d->HasMember("pid") || !(*d)["pid"].IsInt()) return false;
    const pid_t pid = (*d)["pid"].GetInt();
    return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

void with_runtime_lock(const std::string& path, const std::function<void()>& fn,
                       std::chrono::milliseconds wait, std::chrono::milliseconds stale) {
    const std::string lock = path + ".lock";
    const auto until = std::chrono::steady_clock::now() + wait;
    int fd = -1;
    for (;;) {
        fd = ::open(lock.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) break;
        if (errno != EEXIST)
            throw core::error("cannot create the runtime's lock " + lock + ": " +
                              std::strerror(errno));
        if (lock_is_stale(lock, stale)) {
            ::unlink(lock.c_str());
            continue;
        }
        if (std::chrono::steady_clock::now() >= until)
            throw core::error("the runtime holds " + lock + " (still after " +
                              std::to_string(wait.count() / 1000) + " s); try again later");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    char when[64];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S.000Z", std::gmtime(&now));
    const std::string body =
        "{\n  \"pid\": " + std::to_string(::getpid()) + ",\n  \"createdAt\": \"" + when + "\"\n}\n";
    [[maybe_unused]] const auto n = ::write(fd, body.data(), body.size());
    ::close(fd);
    struct stat mine {};
    ::lstat(lock.c_str(), &mine);
    auto release = [&] {
        struct stat now_st {};
        // Only our own lock file (the runtime may have taken over a lock it judged stale).
        if (::lstat(lock.c_str(), &now_st) == 0 && now_st.st_ino == mine.st_ino &&
            now_st.st_dev == mine.st_dev)
            ::unlink(lock.c_str());
    };
    try {
        fn();
    } catch (...) {
        release();
        throw;
    }
    release();
}

int remove_auth_profile(const std::string& state_dir, const std::string& profile_id) {
    std::error_code ec;
    int removed = 0;
    for (const auto& entry : fs::directory_iterator(fs::path(state_dir) / "agents", ec)) {
        const fs::path f = entry.path() / "agent" / "auth-profiles.json";
        if (!fs::is_regular_file(fs::symlink_status(f, ec))) continue;  // no symlinks followed
        with_runtime_lock(f.string(), [&] {
            std::ifstream in(f);
            std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
            auto d = core::json::try_parse(text, core::json::kDocument);
            if (!d || !d->IsObject()) return;
            bool hit = false;
            for (const char* key : {"profiles", "usageStats", "lastGood"}) {
                auto m = d->FindMember(key);
                if (m != d->MemberEnd() && m->value.IsObject() &&
                    m->value.RemoveMember(profile_id.c_str()))
                    hit = hit || std::string(key) == "profiles";
            }
            if (!hit) return;
            rj::StringBuffer buf;
            rj::PrettyWriter<rj::StringBuffer> w(buf);
            w.SetIndent(' ', 2);
            d->Accept(w);
            const std::string tmp = f.string() + ".awp-tmp";
            {
                const int fd = ::open(tmp.c_str(),
                                      O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0) throw core::error("cannot write " + tmp + ": " + std::strerror(errno));
                const std::string body = std::string(buf.GetString(), buf.GetSize()) + "\n";
                const bool ok =
                    ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size()) &&
                    ::fsync(fd) == 0;
                ::close(fd);
                if (!ok) throw core::error("cannot write " + tmp);
            }
            fs::rename(tmp, f);
            ++removed;
        });
    }
    return removed;
}

}  // namespace awp::runtime
