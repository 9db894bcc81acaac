// The local object store (libs/storage store.hpp): bytes staged before any row names them,
// published or discarded after, copies that share bytes, request bodies adopted without a copy,
// and what a process killed with its bytes staged leaves behind — found (its lock is free) and
// settled by another process — while a live process's staging is left alone.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "awp/core/error.hpp"
#include "awp/storage/store.hpp"

namespace storage_store_test {

namespace {

namespace fs = std::filesystem;
using awp::storage::object_store;

struct temp_dir {
    fs::path path;
    temp_dir() {
        char t[] = "/tmp/awp-store-test-XXXXXX";
        REQUIRE(::mkdtemp(t) != nullptr);
        path = t;
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::unique_ptr<object_store> open_store(const fs::path& dir) {
    awp::storage::local_store_options o;
    o.dir = (dir / "store").string();
    return awp::storage::open_local_store(o);
}

std::string read_all(int fd) {
    std::string out;
    char buf[4096];
    off_t at = 0;
    for (;;) {
        const auto n = ::pread(fd, buf, sizeof buf, at);
        if (n <= 0) break;
        out.append(buf, static_cast<std::size_t>(n));
        at += n;
    }
    ::close(fd);
    return out;
}

std::size_t files_under(const fs::path& p) {
    std::size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(p)) n += e.is_regular_file() ? 1 : 0;
    return n;
}

std::string stage_bytes(object_store& s, std::string_view bytes) {
    auto w = s.create();
    w->write(bytes.substr(0, bytes.size() / 2));
    w->write(bytes.substr(bytes.size() / 2));
    return w->stage().version;
}

}  // namespace

TEST_CASE("storage store: staged bytes are hashed, durable, then published or discarded",
          "[storage][store]") {
    temp_dir d;
    auto s = open_store(d.path);
    const auto root = d.path / "store";
    CHECK(fs::exists(root / ".awp-store"));
    auto w = s->create();
    w->write("hel");
    w->write("lo");
    const auto staged = w->stage();
    CHECK(awp::storage::is_version(staged.version));
    CHECK(staged.size == 5);
    CHECK(staged.md5_hex == "5d41402abc4b2a76b9719d911017c592");
    CHECK(staged.sniffed == "text/plain");
    // Staged: its bytes readable under the version, its marker in this process's folder.
    CHECK(read_all(s->open(staged.version)) == "hello");
    CHECK(fs::exists(fs::path(s->spool_dir()) / staged.version));
    s->publish(staged.version);
    CHECK_FALSE(fs::exists(fs::path(s->spool_dir()) / staged.version));
    CHECK(read_all(s->open(staged.version)) == "hello");

    const auto gone = stage_bytes(*s, "discard me");
    s->discard(gone);
    CHECK(s->open(gone) == -1);
    CHECK(errno == ENOENT);
    CHECK_FALSE(fs::exists(fs::path(s->spool_dir()) / gone));

    // A writer dropped before stage() leaves nothing.
    {
        auto dropped = s->create();
        dropped->write("half a file");
    }
    CHECK(files_under(root / "objects") == 1);
    CHECK(fs::is_empty(s->spool_dir()));
}

TEST_CASE("storage store: a copy shares the bytes, and removing one leaves the other",
          "[storage][store]") {
    temp_dir d;
    auto s = open_store(d.path);
    const auto a = stage_bytes(*s, "shared bytes");
    s->publish(a);
    const auto b = s->copy(a);
    s->publish(b);
    CHECK(a != b);
    s->remove(a);
    s->remove(a);  // again: not an error
    CHECK(s->open(a) == -1);
    CHECK(read_all(s->open(b)) == "shared bytes");
}

TEST_CASE("storage store: a spooled body is adopted without a copy, any other file copied",
          "[storage][store]") {
    temp_dir d;
    auto s = open_store(d.path);
    const std::string body(300'000, 'z');
    // As the HTTP server spools a body: an unnamed file in the store's spool folder.
    const int fd = ::open(s->spool_dir().c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size()));
    const auto staged = s->adopt(fd, body.size());
    struct stat spool {
    }, stored{};
    REQUIRE(::fstat(fd, &spool) == 0);
    const int got = s->open(staged.version);
    REQUIRE(::fstat(got, &stored) == 0);
    CHECK(spool.st_ino == stored.st_ino);  // the same file, linked in
    CHECK(read_all(got) == body);
    CHECK(staged.size == body.size());
    ::close(fd);

    // An unlinked named file cannot be linked in: copied (same bytes, same hash).
    const auto other = d.path / "elsewhere";
    const int fd2 = ::open(other.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    REQUIRE(::write(fd2, body.data(), body.size()) == static_cast<ssize_t>(body.size()));
    ::unlink(other.c_str());
    const auto copied = s->adopt(fd2, body.size());
    ::close(fd2);
    CHECK(copied.md5_hex == staged.md5_hex);
    CHECK(read_all(s->open(copied.version)) == body);
}

TEST_CASE("storage store: a version id never leaves the objects folder", "[storage][store]") {
    temp_dir d;
    auto s = open_store(d.path);
    std::ofstream(d.path / "secret") << "secret";
    for (const char* v : {"../../secret", "..", "", "ABCDEF0123456789ABCDEF0123456789",
                          "0123456789abcdef0123456789abcde/", "/etc/passwd"}) {
        INFO(v);
        CHECK(s->open(v) == -1);
        CHECK_THROWS(s->remove(v));
    }
}

TEST_CASE("storage store: a folder that is not a store is refused", "[storage][store]") {
    temp_dir d;
    fs::create_directories(d.path / "store");
    std::ofstream(d.path / "store" / "someone-elses.txt") << "x";
    CHECK_THROWS_AS(open_store(d.path), awp::core::config_error);
}

TEST_CASE(
    "storage store: what a killed process left staged is found and settled, a live one's "
    "is not",
    "[storage][store]") {
    temp_dir d;
    auto s = open_store(d.path);
    // Another process on the same folder stages two versions, says which, then waits.
    int to_parent[2];
    int to_child[2];
    REQUIRE(::pipe(to_parent) == 0);
    REQUIRE(::pipe(to_child) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        auto mine = open_store(d.path);
        const auto keep = stage_bytes(*mine, "its row committed");
        const auto drop = stage_bytes(*mine, "its row never came");
        const auto line = keep + drop;
        if (::write(to_parent[1], line.data(), line.size()) < 0) ::_exit(1);
        char c;
        if (::read(to_child[0], &c, 1) < 0) ::_exit(1);  // killed while waiting
        ::_exit(0);
    }
    char buf[64];
    std::size_t got = 0;
    while (got < 64) {
        const auto n = ::read(to_parent[0], buf + got, 64 - got);
        REQUIRE(n > 0);
        got += static_cast<std::size_t>(n);
    }
    const std::string keep(buf, 32);
    const std::string drop(buf + 32, 32);
    // Alive: its staging is its own.
    CHECK(s->abandoned().empty());
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    auto found = s->abandoned();
    REQUIRE(found.size() == 2);
    for (const auto& a : found) s->settle(a, a.version == keep);
    CHECK(read_all(s->open(keep)) == "its row committed");
    CHECK(s->open(drop) == -1);
    // The gone process's folder is gone; nothing is found twice.
    std::size_t folders = 0;
    for (const auto& e : fs::directory_iterator(d.path / "store" / "staging"))
        folders += e.is_directory();
    CHECK(folders == 1);  // this process's own
    CHECK(s->abandoned().empty());
    ::close(to_parent[0]);
    ::close(to_parent[1]);
    ::close(to_child[0]);
    ::close(to_child[1]);
}

TEST_CASE("storage store: space is the file system's", "[storage][store]") {
    temp_dir d;
    auto s = open_store(d.path);
    const auto sp = s->space();
    CHECK(sp.total_bytes > 0);
    CHECK(sp.free_bytes <= sp.total_bytes);
}

}  // namespace storage_store_test
