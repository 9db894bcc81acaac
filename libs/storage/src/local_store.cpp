// The local file system store (store.hpp): unnamed temporary files (O_TMPFILE) for bytes on
// their way in, hard links for staging and publishing, flock for telling a live process's
// staging folder from a dead one's.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <utility>

#include <openssl/evp.h>

#include "awp/core/crypto.hpp"
#include "awp/core/log.hpp"
#include "awp/storage/content.hpp"
#include "awp/storage/store.hpp"

namespace awp::storage {

store_error::store_error(const std::string& what, int err)
    : core::error(what + ": " + std::strerror(err)), err_(err) {}

bool is_version(std::string_view v) noexcept {
    if (v.size() != 32) return false;
    for (const char c : v) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
}

store_space disk_space(const std::string& dir) {
    struct statvfs st {};
    if (::statvfs(dir.c_str(), &st) != 0) throw store_error("statvfs " + dir, errno);
    store_space out;
    out.free_bytes = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
    out.total_bytes = static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
    return out;
}

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMarkerFile = ".awp-store";
constexpr std::string_view kMarkerText = "awp object store v1\n";
/// Bytes read or copied at a time: enough to keep the disk busy, small enough for the
/// gateway's memory goal (docs/storage.md, "Memory").
constexpr std::size_t kBuffer = 128 * 1024;
/// Written bytes after which their writeback is started (sync_file_range), so an object's
/// fsync overlaps its arrival and its hashing instead of following them.
constexpr std::uint64_t kWriteback = 8 * 1024 * 1024;

class fd_guard {
public:
    explicit fd_guard(int fd = -1) noexcept : fd_(fd) {}
    ~fd_guard() { reset(); }
    fd_guard(const fd_guard&) = delete;
    fd_guard& operator=(const fd_guard&) = delete;
    fd_guard(fd_guard&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    fd_guard& operator=(fd_guard&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = std::exchange(o.fd_, -1);
        }
        return *this;
    }
    [[nodiscard]] int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_;
};

/// MD5 as the bytes pass (an S3-style ETag); OpenSSL's EVP.
class md5_stream {
public:
    md5_stream() : ctx_(EVP_MD_CTX_new()) {
        if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr) != 1) {
            EVP_MD_CTX_free(ctx_);
            throw core::error("MD5 is not available");
        }
    }
    ~md5_stream() { EVP_MD_CTX_free(ctx_); }
    md5_stream(const md5_stream&) = delete;
    md5_stream& operator=(const md5_stream&) = delete;
    void update(std::string_view b) { EVP_DigestUpdate(ctx_, b.data(), b.size()); }
    std::string hex() {
        unsigned char out[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        EVP_DigestFinal_ex(ctx_, out, &n);
        return core::crypto::hex_encode(
            std::string_view(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n)));
    }

private:
    EVP_MD_CTX* ctx_;
};

void write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const auto n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw store_error("cannot write an object", errno);
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

std::string new_version() { return core::crypto::hex_encode(core::crypto::random_bytes(16)); }

/// "ab/abcdef..." relative to the objects folder.
std::string object_rel(std::string_view version) {
    return std::string(version.substr(0, 2)) + "/" + std::string(version);
}

void check_version(std::string_view v) {
    if (!is_version(v)) throw store_error("not a version id", EINVAL);
}

class local_store;

class local_writer : public object_writer {
public:
    local_writer(local_store& s, fd_guard fd, std::string temp_name)
        : store_(s), fd_(std::move(fd)), temp_name_(std::move(temp_name)) {}
    ~local_writer() override;
    void write(std::string_view bytes) override {
        if (head_.size() < kSniffBytes) {
            head_.append(bytes.substr(0, kSniffBytes - head_.size()));
        }
        md5_.update(bytes);
        write_all(fd_.get(), bytes);
        size_ += bytes.size();
        // The disk starts on what is written while more arrives: the fsync of stage() then has
        // little left to wait for. A hint only: its failure changes nothing.
        if (size_ - flushed_ >= kWriteback) {
            ::sync_file_range(fd_.get(), static_cast<off_t>(flushed_),
                              static_cast<off_t>(size_ - flushed_), SYNC_FILE_RANGE_WRITE);
            flushed_ = size_;
        }
    }
    staged_object stage() override;

private:
    local_store& store_;
    fd_guard fd_;
    std::string temp_name_;  // a named temporary file (no O_TMPFILE here), "" otherwise
    md5_stream md5_;
    std::string head_;
    std::uint64_t size_ = 0;
    std::uint64_t flushed_ = 0;  // bytes whose writeback was started
    bool staged_ = false;
};

class local_store : public object_store {
public:
    explicit local_store(const local_store_options& o) : dir_(o.dir), fsync_(o.fsync) {
        std::error_code ec;
        const bool existed = fs::exists(dir_, ec);
        fs::create_directories(dir_, ec);
        if (ec || !fs::is_directory(dir_)) {
            throw core::config_error("STORAGE_DIR \"" + dir_ + "\" cannot be made: " +
                                     (ec ? ec.message() : std::string("not a directory")));
        }
        const auto marker = fs::path(dir_) / kMarkerFile;
        if (!fs::exists(marker, ec)) {
            if (existed && !fs::is_empty(dir_, ec)) {
                throw core::config_error("STORAGE_DIR \"" + dir_ +
                                         "\" is a folder with other files in it, not an awp "
                                         "store (no " +
                                         std::string(kMarkerFile) +
                                         "): point it at an empty or new folder");
            }
            fs::permissions(dir_, fs::perms::owner_all, ec);
            fd_guard m(::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
            if (m.get() < 0)
                throw core::config_error("STORAGE_DIR \"" + dir_ + "\" is not writable");
            write_all(m.get(), kMarkerText);
        }
        fs::create_directories(fs::path(dir_) / "objects", ec);
        fs::create_directories(fs::path(dir_) / "staging", ec);
        static constexpr char kHex[] = "0123456789abcdef";
        for (int i = 0; i < 256; ++i) {
            const char sub[3] = {kHex[i >> 4], kHex[i & 15], 0};
            fs::create_directories(fs::path(dir_) / "objects" / sub, ec);
        }
        objects_ = fd_guard(
            ::open((fs::path(dir_) / "objects").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        staging_root_ = fd_guard(
            ::open((fs::path(dir_) / "staging").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (objects_.get() < 0 || staging_root_.get() < 0 || ec) {
            throw core::config_error("STORAGE_DIR \"" + dir_ + "\" cannot be used: " +
                                     (ec ? ec.message() : std::string(std::strerror(errno))));
        }
        // This process's staging folder, locked for its life: a folder whose lock can be taken
        // belongs to a process that is gone (abandoned()).
        holder_ = new_version().substr(0, 16);
        if (::mkdirat(staging_root_.get(), holder_.c_str(), 0700) != 0) {
            throw core::config_error("STORAGE_DIR: cannot make a staging folder: " +
                                     std::string(std::strerror(errno)));
        }
        staging_ = fd_guard(
            ::openat(staging_root_.get(), holder_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (staging_.get() < 0 || ::flock(staging_.get(), LOCK_EX | LOCK_NB) != 0) {
            throw core::config_error("STORAGE_DIR: cannot lock a staging folder");
        }
        staging_path_ = (fs::path(dir_) / "staging" / holder_).string();
        // An unnamed temporary file here can be linked in later: is O_TMPFILE available?
        fd_guard probe(::open(staging_path_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
        tmpfile_ = probe.get() >= 0;
    }

    ~local_store() override {
        // Nothing of ours is staged once the process ends cleanly: the folder goes.
        std::error_code ec;
        if (fs::is_empty(staging_path_, ec) && !ec)
            ::unlinkat(staging_root_.get(), holder_.c_str(), AT_REMOVEDIR);
    }

    std::string spool_dir() const override { return staging_path_; }

    std::unique_ptr<object_writer> create() override {
        if (tmpfile_) {
            fd_guard fd(::open(staging_path_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
            if (fd.get() < 0) throw store_error("cannot make a temporary file", errno);
            return std::make_unique<local_writer>(*this, std::move(fd), std::string());
        }
        auto name = ".tmp-" + new_version();
        fd_guard fd(::openat(staging_.get(), name.c_str(),
                             O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
        if (fd.get() < 0) throw store_error("cannot make a temporary file", errno);
        return std::make_unique<local_writer>(*this, std::move(fd), std::move(name));
    }

    staged_object adopt(int fd, std::uint64_t size) override {
        // Linked in as it is when it is an unnamed file of this file system; copied otherwise.
        const auto version = new_version();
        const auto proc = "/proc/self/fd/" + std::to_string(fd);
        if (::linkat(AT_FDCWD, proc.c_str(), staging_.get(), version.c_str(), AT_SYMLINK_FOLLOW) !=
            0) {
            auto w = create();
            std::string buf(kBuffer, '\0');
            std::uint64_t at = 0;
            while (at < size) {
                const auto want =
                    static_cast<std::size_t>(std::min<std::uint64_t>(kBuffer, size - at));
                const auto n = ::pread(fd, buf.data(), want, static_cast<off_t>(at));
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) throw store_error("cannot read an upload", errno);
                if (n == 0) throw store_error("the upload is shorter than its size", EIO);
                w->write(std::string_view(buf.data(), static_cast<std::size_t>(n)));
                at += static_cast<std::uint64_t>(n);
            }
            return w->stage();
        }
        staged_object out;
        out.version = version;
        try {
            // The disk writes the body while it is hashed: the fsync below then waits for less.
            if (fsync_) ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
            md5_stream md5;
            std::string buf(kBuffer, '\0');
            std::string head;
            std::uint64_t at = 0;
            while (at < size) {
                const auto want =
                    static_cast<std::size_t>(std::min<std::uint64_t>(kBuffer, size - at));
                const auto n = ::pread(fd, buf.data(), want, static_cast<off_t>(at));
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) throw store_error("cannot read an upload", errno);
                if (n == 0) throw store_error("the upload is shorter than its size", EIO);
                const std::string_view got(buf.data(), static_cast<std::size_t>(n));
                if (head.size() < kSniffBytes)
                    head.append(got.substr(0, kSniffBytes - head.size()));
                md5.update(got);
                at += static_cast<std::uint64_t>(n);
            }
            if (fsync_ && ::fsync(fd) != 0) throw store_error("cannot fsync an object", errno);
            out.size = size;
            out.md5_hex = md5.hex();
            out.sniffed = sniff(head);
            link_published(version);
        } catch (...) {
            discard(version);
            throw;
        }
        return out;
    }

    std::string copy(std::string_view version) override {
        check_version(version);
        const auto fresh = new_version();
        if (::linkat(objects_.get(), object_rel(version).c_str(), staging_.get(), fresh.c_str(),
                     0) != 0) {
            throw store_error("cannot copy an object", errno);
        }
        try {
            link_published(fresh);
        } catch (...) {
            discard(fresh);
            throw;
        }
        return fresh;
    }

    void publish(std::string_view version) override {
        check_version(version);
        const std::string v(version);
        if (::unlinkat(staging_.get(), v.c_str(), 0) != 0 && errno != ENOENT) {
            throw store_error("cannot publish an object", errno);
        }
    }

    void discard(std::string_view version) noexcept override {
        if (!is_version(version)) return;
        const std::string v(version);
        // The published name first: a crash between the two leaves a marker, which settles.
        ::unlinkat(objects_.get(), object_rel(v).c_str(), 0);
        ::unlinkat(staging_.get(), v.c_str(), 0);
    }

    int open(std::string_view version) override {
        if (!is_version(version)) {
            errno = ENOENT;
            return -1;
        }
        return ::openat(objects_.get(), object_rel(version).c_str(),
                        O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }

    void remove(std::string_view version) override {
        check_version(version);
        if (::unlinkat(objects_.get(), object_rel(version).c_str(), 0) != 0 && errno != ENOENT) {
            throw store_error("cannot remove an object", errno);
        }
    }

    std::vector<abandoned_version> abandoned() override {
        std::vector<abandoned_version> out;
        std::lock_guard lock(mu_);
        fd_guard root(::dup(staging_root_.get()));
        DIR* d = root.get() >= 0 ? ::fdopendir(root.release()) : nullptr;
        if (d == nullptr) return out;
        ::rewinddir(d);
        std::vector<std::string> holders;
        while (auto* e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (name == "." || name == ".." || name == holder_) continue;
            holders.push_back(name);
        }
        ::closedir(d);
        for (const auto& h : holders) {
            if (locked_.count(h) == 0) {
                fd_guard hd(::openat(staging_root_.get(), h.c_str(),
                                     O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
                if (hd.get() < 0) continue;
                if (::flock(hd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive
                locked_.emplace(h, std::move(hd));
            }
            const int hfd = locked_.at(h).get();
            fd_guard again(::dup(hfd));
            DIR* hdir = again.get() >= 0 ? ::fdopendir(again.release()) : nullptr;
            if (hdir == nullptr) continue;
            ::rewinddir(hdir);
            bool any = false;
            while (auto* e = ::readdir(hdir)) {
                const std::string name = e->d_name;
                if (name == "." || name == "..") continue;
                if (is_version(name)) {
                    out.push_back({h, name});
                    any = true;
                } else {
                    ::unlinkat(hfd, name.c_str(), 0);  // a named temporary file of that process
                }
            }
            ::closedir(hdir);
            if (!any) finish_holder(h);
        }
        return out;
    }

    void settle(const abandoned_version& v, bool has_row) override {
        check_version(v.version);
        std::lock_guard lock(mu_);
        auto it = locked_.find(v.holder);
        if (it == locked_.end()) return;
        const int hfd = it->second.get();
        if (has_row) {
            // A row names it: it is the object's. Its published name is made again should a
            // crash have come between the two links.
            if (::linkat(hfd, v.version.c_str(), objects_.get(), object_rel(v.version).c_str(),
                         0) != 0 &&
                errno != EEXIST) {
                throw store_error("cannot settle an object", errno);
            }
        } else {
            ::unlinkat(objects_.get(), object_rel(v.version).c_str(), 0);
        }
        ::unlinkat(hfd, v.version.c_str(), 0);
        if (is_empty(hfd)) finish_holder(v.holder);
    }

    store_space space() override { return disk_space(dir_); }

    /// Names a staged version: the marker (in this process's staging folder) is already made;
    /// the published name is linked to it and made durable.
    void link_published(const std::string& version) {
        if (::linkat(staging_.get(), version.c_str(), objects_.get(), object_rel(version).c_str(),
                     0) != 0) {
            throw store_error("cannot store an object", errno);
        }
        if (fsync_) {
            fd_guard sub(::openat(objects_.get(), version.substr(0, 2).c_str(),
                                  O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            if (sub.get() < 0 || ::fsync(sub.get()) != 0) {
                throw store_error("cannot fsync the objects folder", errno);
            }
        }
    }

    int staging_fd() const noexcept { return staging_.get(); }
    bool fsync_enabled() const noexcept { return fsync_; }

private:
    bool is_empty(int dirfd) {
        fd_guard again(::dup(dirfd));
        DIR* d = again.get() >= 0 ? ::fdopendir(again.release()) : nullptr;
        if (d == nullptr) return false;
        ::rewinddir(d);
        bool empty = true;
        while (auto* e = ::readdir(d)) {
            const std::string_view n = e->d_name;
            if (n != "." && n != "..") {
                empty = false;
                break;
            }
        }
        ::closedir(d);
        return empty;
    }

    /// A gone process's folder, now empty: removed, its lock dropped.
    void finish_holder(const std::string& h) {
        ::unlinkat(staging_root_.get(), h.c_str(), AT_REMOVEDIR);
        locked_.erase(h);
    }

    std::string dir_;
    bool fsync_;
    fd_guard objects_;
    fd_guard staging_root_;
    fd_guard staging_;
    std::string holder_;
    std::string staging_path_;
    bool tmpfile_ = false;
    std::mutex mu_;
    std::map<std::string, fd_guard> locked_;  // gone processes' folders being settled
};

local_writer::~local_writer() {
    if (!staged_ && !temp_name_.empty()) ::unlinkat(store_.staging_fd(), temp_name_.c_str(), 0);
}

staged_object local_writer::stage() {
    staged_object out;
    out.version = new_version();
    out.size = size_;
    out.md5_hex = md5_.hex();
    out.sniffed = sniff(head_);
    if (store_.fsync_enabled() && ::fsync(fd_.get()) != 0) {
        throw store_error("cannot fsync an object", errno);
    }
    // The marker: the staged name in this process's folder.
    if (temp_name_.empty()) {
        const auto proc = "/proc/self/fd/" + std::to_string(fd_.get());
        if (::linkat(AT_FDCWD, proc.c_str(), store_.staging_fd(), out.version.c_str(),
                     AT_SYMLINK_FOLLOW) != 0) {
            throw store_error("cannot stage an object", errno);
        }
    } else if (::renameat(store_.staging_fd(), temp_name_.c_str(), store_.staging_fd(),
                          out.version.c_str()) != 0) {
        throw store_error("cannot stage an object", errno);
    }
    staged_ = true;
    try {
        store_.link_published(out.version);
    } catch (...) {
        store_.discard(out.version);
        throw;
    }
    return out;
}

}  // namespace

std::unique_ptr<object_store> open_local_store(const local_store_options& o) {
    return std::make_unique<local_store>(o);
}

}  // namespace awp::storage
