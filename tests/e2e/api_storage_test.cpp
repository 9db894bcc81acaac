// /storage/v1 attacked with raw requests against the real awp-api-gateway (docs/storage.md,
// docs/security.md "Storage"): hostile names (traversal, NUL, invalid UTF-8, overlong forms,
// look-alikes, decomposed Unicode) are 400s that write nothing; an oversized body is a 413
// before it is read; a slow body is cut at its deadline and its slot freed; concurrent uploads
// are bounded; downloads keep Range, ETag, 304 and the serving rules; and the kill -9 drill:
// the gateway killed while clients upload, at random points, then started again on the same
// store — every row has its bytes, every byte has its row, nothing staged is left.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "awp/core/pg.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/test_db.hpp"

namespace api_storage_test {

namespace {

namespace fs = std::filesystem;
namespace http = awp::http;
using awp::test::api_gateway_process;
using awp::test::kApiServiceKey;
using awp::test::random_name;
using namespace std::chrono_literals;

/// A folder that outlives the gateway processes of one test (the store they share).
struct store_dir {
    fs::path path;
    store_dir() : path(fs::temp_directory_path() / random_name("awp-store-e2e-")) {}
    ~store_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

api_gateway_process::env_map storage_env(const fs::path& dir,
                                         api_gateway_process::env_map extra = {}) {
    extra["STORAGE_DIR"] = dir.string();
    extra.emplace("STORAGE_DELETE_GRACE", "0");
    extra.emplace("STORAGE_REAPER_INTERVAL", "0.5");
    extra.emplace("STORAGE_MIN_FREE", "0");
    return extra;
}

http::headers service() {
    http::headers h;
    h.add("apikey", kApiServiceKey);
    h.add("Authorization", std::string("Bearer ") + kApiServiceKey);
    return h;
}

http::headers with(http::headers h, const std::string& name, const std::string& value) {
    h.add(name, value);
    return h;
}

std::string status_code(const http::response& r) {
    rapidjson::Document d;
    d.Parse(r.body.c_str(), r.body.size());
    if (d.HasParseError() || !d.IsObject()) return "<" + r.body.substr(0, 200) + ">";
    if (d.HasMember("statusCode") && d["statusCode"].IsString()) return d["statusCode"].GetString();
    if (d.HasMember("error") && d["error"].IsObject())
        return "awp:" + std::string(d["error"]["code"].GetString());
    return "<" + r.body.substr(0, 200) + ">";
}

/// One TCP connection with bounded blocking reads.
class raw_conn {
public:
    explicit raw_conn(unsigned short port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    }
    ~raw_conn() { close(); }
    raw_conn(const raw_conn&) = delete;
    raw_conn& operator=(const raw_conn&) = delete;
    bool send(std::string_view s) {
        while (!s.empty()) {
            const auto n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
            if (n <= 0) return false;
            s.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }
    /// What arrives within `timeout` up to `until` (or EOF); "" on nothing.
    std::string read_until(std::string_view until, std::chrono::milliseconds timeout) {
        const auto end = std::chrono::steady_clock::now() + timeout;
        while (buf_.find(until) == std::string::npos) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                end - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
            char b[8192];
            const auto n = ::recv(fd_, b, sizeof b, 0);
            if (n <= 0) {
                eof_ = true;
                break;
            }
            buf_.append(b, static_cast<std::size_t>(n));
        }
        return buf_;
    }
    [[nodiscard]] bool eof() const noexcept { return eof_; }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
    std::string buf_;
    bool eof_ = false;
};

std::string upload_head(const std::string& target, std::uint64_t length,
                        const std::string& extra = "") {
    return "POST " + target + " HTTP/1.1\r\nHost: t\r\napikey: " + kApiServiceKey +
           "\r\nAuthorization: Bearer " + kApiServiceKey +
           "\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
           std::to_string(length) + "\r\n" + extra + "\r\n";
}

int http_status(const std::string& answer) {
    if (answer.size() < 12 || answer.compare(0, 5, "HTTP/") != 0) return 0;
    return std::stoi(answer.substr(9, 3));
}

/// The store and the rows agree: every row's bytes are there with its size, every file is a
/// row's or queued for removal, and nothing is staged but by the live process (one folder).
struct agreement {
    std::size_t rows = 0;
    std::size_t files = 0;
    std::vector<std::string> problems;
};

agreement check_agreement(const fs::path& dir, awp::core::pg::connection& admin) {
    agreement out;
    std::map<std::string, std::uint64_t> files;
    for (const auto& sub : fs::directory_iterator(dir / "objects")) {
        for (const auto& f : fs::directory_iterator(sub.path())) {
            files[f.path().filename().string()] = fs::file_size(f.path());
        }
    }
    out.files = files.size();
    auto rows = admin.exec("SELECT version, size FROM storage.objects");
    out.rows = static_cast<std::size_t>(rows.size());
    std::set<std::string> named;
    for (int i = 0; i < rows.size(); ++i) {
        const auto v = rows.get<std::string>(i, 0);
        named.insert(v);
        auto it = files.find(v);
        if (it == files.end()) {
            out.problems.push_back("row without bytes: " + v);
        } else if (it->second != static_cast<std::uint64_t>(rows.get<std::int64_t>(i, 1))) {
            out.problems.push_back("bytes of another size: " + v);
        }
    }
    auto queued = admin.exec("SELECT version FROM storage.deleted_versions");
    for (int i = 0; i < queued.size(); ++i) named.insert(queued.get<std::string>(i, 0));
    for (const auto& [v, size] : files) {
        if (named.count(v) == 0) out.problems.push_back("bytes without a row: " + v);
    }
    std::size_t holders = 0;
    for (const auto& h : fs::directory_iterator(dir / "staging")) {
        ++holders;
        for (const auto& f : fs::directory_iterator(h.path())) {
            out.problems.push_back("still staged: " + f.path().string());
        }
    }
    if (holders != 1) out.problems.push_back(std::to_string(holders) + " staging folders");
    return out;
}

/// Waits until the store and the rows agree (housekeeping settles what a killed process left).
agreement settled(const fs::path& dir, awp::core::pg::connection& admin) {
    agreement a;
    for (int i = 0; i < 200; ++i) {
        a = check_agreement(dir, admin);
        if (a.problems.empty()) return a;
        std::this_thread::sleep_for(100ms);
    }
    return a;
}

}  // namespace

TEST_CASE("storage e2e: hostile names and paths are 400s that write nothing", "[storage][e2e]") {
    awp::test::scoped_database db;
    store_dir dir;
    api_gateway_process gw(db.api_dsn(), storage_env(dir.path));
    auto admin = db.admin();
    const std::vector<std::string> tails = {
        "..%2Fescape.txt",
        "%2e%2e/escape.txt",
        "a/%2E%2E/b",
        "a%00b",
        "a%0Ab",
        "%C0%AE%C0%AE/x",          // overlong "..": not UTF-8
        "%FF%FE",                  // not UTF-8
        "a%5C..%5Cb",              // backslashes
        "a%E2%80%AEgpj.exe",       // right-to-left override
        "a%E2%88%95b",             // division slash, a look-alike of '/'
        "a%EF%BC%8F..%EF%BC%8Fb",  // fullwidth solidus
        "e%CC%81.txt",             // decomposed é: not NFC
        "a%E2%80%8Bb",             // zero width space
        "a//b",
        "a/",
        "%20lead",
        std::string(1100, 'n'),
        std::string(300, 's') + "/x",
    };
    for (const auto& tail : tails) {
        INFO(tail.substr(0, 80));
        const auto r = gw.request("POST", "/storage/v1/object/assets/" + tail, service(), "bytes");
        CHECK(r.status == 400);
        CHECK((status_code(r) == "400" || status_code(r) == "awp:bad_path"));
    }
    // A traversal or a bad name in a JSON body: the same 400s.
    const auto move = gw.request(
        "POST", "/storage/v1/object/move", with(service(), "Content-Type", "application/json"),
        R"({"bucketId":"assets","sourceKey":"a","destinationKey":"../../x"})");
    CHECK(move.status == 400);
    const auto remove = gw.request("DELETE", "/storage/v1/object/assets",
                                   with(service(), "Content-Type", "application/json"),
                                   R"({"prefixes":["ok","a/../../etc/passwd"]})");
    CHECK(remove.status == 400);
    const auto bucket = gw.request("POST", "/storage/v1/bucket",
                                   with(service(), "Content-Type", "application/json"),
                                   R"({"name":"../../bucket"})");
    CHECK(bucket.status == 400);
    const auto list =
        gw.request("POST", "/storage/v1/object/list/assets",
                   with(service(), "Content-Type", "application/json"), R"({"prefix":"a\u0000b"})");
    CHECK(list.status == 400);
    // Nothing was written: no row, no byte, nothing staged.
    CHECK(admin.exec("SELECT count(*) FROM storage.objects").get<std::int64_t>(0, 0) == 0);
    const auto a = check_agreement(dir.path, admin);
    CHECK(a.files == 0);
    CHECK(a.problems.empty());
    // The same names that are fine arrive where they should, and nowhere else.
    const auto ok = gw.request("POST", "/storage/v1/object/assets/dir/%C3%A9t%C3%A9%20ok.txt",
                               with(service(), "Content-Type", "text/plain"), "hello");
    REQUIRE(ok.status == 200);
    CHECK(admin.exec("SELECT name FROM storage.objects").get<std::string>(0, 0) ==
          "dir/été ok.txt");
    CHECK_FALSE(fs::exists(dir.path / "dir"));  // names never reach the file system
}

TEST_CASE("storage e2e: an oversized body is refused (413) before it is read", "[storage][e2e]") {
    awp::test::scoped_database db;
    store_dir dir;
    api_gateway_process gw(db.api_dsn(),
                           storage_env(dir.path, {{"STORAGE_FILE_SIZE_LIMIT", "1000000"}}));
    auto admin = db.admin();
    admin.exec(
        "INSERT INTO storage.buckets (id, name, file_size_limit) VALUES ('tiny', 'tiny', 100)");
    for (const auto& [target, length] : std::vector<std::pair<std::string, std::uint64_t>>{
             {"/storage/v1/object/assets/big.bin", 50'000'000},
             {"/storage/v1/object/tiny/small.bin", 101}}) {
        INFO(target);
        raw_conn c(gw.port);
        // The header only: were the body awaited, no answer would come.
        REQUIRE(c.send(upload_head(target, length)));
        const auto answer = c.read_until("\r\n\r\n", 5000ms);
        CHECK(http_status(answer) == 413);
        CHECK(answer.find("\"statusCode\":\"413\"") != std::string::npos);
        c.read_until("never", 3000ms);
        CHECK(c.eof());  // the unread body is never taken for a request
    }
    // Chunked (no length): cut off when it passes the limit.
    raw_conn c(gw.port);
    std::string head = upload_head("/storage/v1/object/assets/chunked.bin", 0);
    head.replace(head.find("Content-Length: 0"), 17, "Transfer-Encoding: chunked");
    REQUIRE(c.send(head));
    const std::string piece(60'000, 'c');
    for (int i = 0; i < 40; ++i) {
        if (!c.send("ea60\r\n" + piece + "\r\n")) break;
    }
    CHECK(http_status(c.read_until("\r\n\r\n", 5000ms)) == 413);
    CHECK(admin.exec("SELECT count(*) FROM storage.objects").get<std::int64_t>(0, 0) == 0);
    const auto a = settled(dir.path, admin);
    CHECK(a.files == 0);
    CHECK(a.problems.empty());
}

TEST_CASE("storage e2e: a slow body is cut at its deadline, and uploads are bounded",
          "[storage][e2e]") {
    awp::test::scoped_database db;
    store_dir dir;
    SECTION("a body that stops coming: 408 at the deadline, the slot freed, nothing kept") {
        api_gateway_process gw(db.api_dsn(), storage_env(dir.path, {{"STORAGE_UPLOAD_TIMEOUT", "2"},
                                                                    {"STORAGE_MAX_UPLOADS", "1"}}));
        raw_conn c(gw.port);
        REQUIRE(c.send(upload_head("/storage/v1/object/assets/slow.bin", 100'000) + "ten bytes!"));
        const auto started = std::chrono::steady_clock::now();
        const auto answer = c.read_until("\r\n\r\n", 15000ms);
        CHECK(http_status(answer) == 408);
        CHECK(std::chrono::steady_clock::now() - started < 10s);
        // Its slot is free again (one at a time here): the next upload goes through.
        bool admitted = false;
        for (int i = 0; i < 50 && !admitted; ++i) {
            admitted =
                gw.request("POST", "/storage/v1/object/assets/next.bin", service(), "x").status ==
                200;
            if (!admitted) std::this_thread::sleep_for(100ms);
        }
        CHECK(admitted);
        auto admin = db.admin();
        CHECK(admin.exec("SELECT count(*) FROM storage.objects").get<std::int64_t>(0, 0) == 1);
        CHECK(settled(dir.path, admin).problems.empty());
    }
    SECTION("more uploads than slots: 503 SlowDown with Retry-After, then room again") {
        api_gateway_process gw(db.api_dsn(), storage_env(dir.path, {{"STORAGE_MAX_UPLOADS", "2"}}));
        std::vector<std::unique_ptr<raw_conn>> held;
        for (int i = 0; i < 2; ++i) {
            held.push_back(std::make_unique<raw_conn>(gw.port));
            // 100-continue: the server says so once the upload is admitted (its slot taken).
            REQUIRE(
                held.back()->send(upload_head("/storage/v1/object/assets/held" + std::to_string(i),
                                              1000, "Expect: 100-continue\r\n")));
            CHECK(http_status(held.back()->read_until("\r\n\r\n", 5000ms)) == 100);
        }
        const auto refused = gw.request("POST", "/storage/v1/object/assets/third", service(), "x");
        CHECK(refused.status == 503);
        CHECK(status_code(refused) == "503");
        CHECK(refused.header.get("retry-after") == std::optional<std::string_view>("1"));
        held.clear();  // the clients go: their slots are released
        bool admitted = false;
        for (int i = 0; i < 100 && !admitted; ++i) {
            admitted =
                gw.request("POST", "/storage/v1/object/assets/third", service(), "x").status == 200;
            if (!admitted) std::this_thread::sleep_for(100ms);
        }
        CHECK(admitted);
    }
    SECTION("one client address holds at most STORAGE_MAX_UPLOADS_PER_CLIENT") {
        api_gateway_process gw(db.api_dsn(),
                               storage_env(dir.path, {{"STORAGE_MAX_UPLOADS_PER_CLIENT", "1"}}));
        raw_conn first(gw.port);
        REQUIRE(first.send(
            upload_head("/storage/v1/object/assets/one", 1000, "Expect: 100-continue\r\n")));
        CHECK(http_status(first.read_until("\r\n\r\n", 5000ms)) == 100);
        const auto second = gw.request("POST", "/storage/v1/object/assets/two", service(), "x");
        CHECK(second.status == 503);
    }
}

TEST_CASE("storage e2e: downloads keep Range, ETag, 304, HEAD and the serving rules",
          "[storage][e2e]") {
    awp::test::scoped_database db;
    store_dir dir;
    api_gateway_process gw(db.api_dsn(), storage_env(dir.path));
    std::string body;
    for (int i = 0; i < 100'000; ++i) body.push_back(static_cast<char>('a' + i % 26));
    REQUIRE(gw.request("POST", "/storage/v1/object/assets/t/letters.txt",
                       with(service(), "Content-Type", "text/plain"), body)
                .status == 200);
    const auto whole = gw.get("/storage/v1/object/public/assets/t/letters.txt");
    REQUIRE(whole.status == 200);
    CHECK(whole.body == body);
    const auto etag = std::string(whole.header.get("etag").value_or(""));
    CHECK(etag.size() == 34);
    CHECK(whole.header.get("accept-ranges") == std::optional<std::string_view>("bytes"));
    CHECK(whole.header.get("content-disposition")->starts_with("inline"));
    http::headers range;
    range.add("Range", "bytes=99990-");
    const auto tail = gw.get("/storage/v1/object/public/assets/t/letters.txt", range);
    CHECK(tail.status == 206);
    CHECK(tail.body == body.substr(99990));
    CHECK(tail.header.get("content-range") ==
          std::optional<std::string_view>("bytes 99990-99999/100000"));
    http::headers past;
    past.add("Range", "bytes=100000-");
    const auto beyond = gw.get("/storage/v1/object/public/assets/t/letters.txt", past);
    CHECK(beyond.status == 416);
    CHECK(beyond.header.get("content-range") == std::optional<std::string_view>("bytes */100000"));
    http::headers inm;
    inm.add("If-None-Match", etag);
    const auto same = gw.get("/storage/v1/object/public/assets/t/letters.txt", inm);
    CHECK(same.status == 304);
    CHECK(same.body.empty());
    raw_conn head(gw.port);
    REQUIRE(head.send(
        std::string("HEAD /storage/v1/object/assets/t/letters.txt HTTP/1.1\r\nHost: t\r\n") +
        "Authorization: Bearer " + kApiServiceKey + "\r\n\r\n"));
    const auto head_answer = head.read_until("\r\n\r\n", 5000ms);
    CHECK(http_status(head_answer) == 200);
    CHECK(head_answer.find("Content-Length: 100000") != std::string::npos);
    // Active content: a sandboxed download, whatever the uploader called it.
    REQUIRE(gw.request("POST", "/storage/v1/object/assets/t/page.png",
                       with(service(), "Content-Type", "image/png"),
                       "<!DOCTYPE html><script>document.cookie</script>")
                .status == 200);
    const auto page = gw.get("/storage/v1/object/public/assets/t/page.png");
    CHECK(page.status == 200);
    CHECK(page.header.get("content-disposition")->starts_with("attachment"));
    CHECK(std::string(page.header.get("content-security-policy").value_or("")).find("sandbox") !=
          std::string::npos);
    CHECK(page.header.get("x-content-type-options") == std::optional<std::string_view>("nosniff"));
    // ?download= names the file.
    const auto dl = gw.get("/storage/v1/object/public/assets/t/letters.txt?download=abc.txt");
    CHECK(dl.header.get("content-disposition")->starts_with("attachment; filename=\"abc.txt\""));
    // Private buckets are not public, and a wrong key is no key.
    REQUIRE(gw.request("PUT", "/storage/v1/object/gateway-backups/h/state.tar.gz",
                       with(service(), "Content-Type", "application/gzip"), "tarball")
                .status == 200);
    CHECK(gw.get("/storage/v1/object/public/gateway-backups/h/state.tar.gz").status == 404);
    CHECK(gw.get("/storage/v1/object/gateway-backups/h/state.tar.gz").status == 404);
    http::headers forged;
    forged.add("Authorization", "Bearer not-a-token");
    CHECK(
        gw.get("/storage/v1/object/authenticated/gateway-backups/h/state.tar.gz", forged).status ==
        401);
    // CORS: the preflight, and the headers a reader needs exposed.
    http::headers pre;
    pre.add("Origin", "https://ui.example");
    pre.add("Access-Control-Request-Method", "POST");
    const auto options = gw.request("OPTIONS", "/storage/v1/object/assets/x", pre);
    CHECK(options.status == 200);
    CHECK(std::string(options.header.get("access-control-allow-headers").value_or(""))
              .find("x-upsert") != std::string::npos);
}

TEST_CASE(
    "storage e2e: kill -9 at any point of uploads leaves no half file and no row without "
    "bytes",
    "[storage][e2e][drill]") {
    awp::test::scoped_database db;
    store_dir dir;
    auto admin = db.admin();
    std::mt19937 rng(std::random_device{}());
    std::size_t committed_total = 0;
    for (int round = 0; round < 4; ++round) {
        INFO("round " << round);
        api_gateway_process gw(db.api_dsn(), storage_env(dir.path));
        // Before anything: the last round's killed process is settled.
        const auto before = settled(dir.path, admin);
        INFO("problems: " << (before.problems.empty() ? "" : before.problems.front()));
        CHECK(before.problems.empty());
        std::atomic<bool> stop{false};
        std::atomic<int> ok{0};
        // Uploads back to back, each committing a row (256 KiB raw bodies, some upserts).
        auto uploader = [&](int id) {
            std::string body(256 * 1024, static_cast<char>('A' + id));
            for (int i = 0; !stop; ++i) {
                http::client_request r;
                r.method = "POST";
                r.url = gw.url() + "/storage/v1/object/assets/drill/r" + std::to_string(round) +
                        "-u" + std::to_string(id) + "-" + std::to_string(i % 8);
                r.header = service();
                r.header.add("Content-Type", "application/octet-stream");
                r.header.add("x-upsert", "true");
                r.body = body;
                r.timeout = 10s;
                try {
                    if (http::fetch_sync(std::move(r)).status == 200) ++ok;
                } catch (const std::exception&) {
                    if (stop) break;
                }
            }
        };
        // And one body that is still arriving when the process dies.
        raw_conn streaming(gw.port);
        REQUIRE(streaming.send(upload_head(
            "/storage/v1/object/assets/drill/streaming-" + std::to_string(round), 20'000'000)));
        std::thread sender([&] {
            const std::string piece(64 * 1024, 's');
            // About 3 MB/s: 20 MB take longer than any round lives before its kill.
            while (!stop && streaming.send(piece)) std::this_thread::sleep_for(20ms);
        });
        std::vector<std::thread> clients;
        for (int i = 0; i < 3; ++i) clients.emplace_back(uploader, i);
        std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 1500));
        gw.kill();  // kill -9, wherever each request is
        stop = true;
        for (auto& t : clients) t.join();
        streaming.close();
        sender.join();
        committed_total += static_cast<std::size_t>(ok.load());
        // The half-sent body never became an object.
        CHECK(admin.exec("SELECT count(*) FROM storage.objects WHERE name LIKE 'drill/streaming-%'")
                  .get<std::int64_t>(0, 0) == 0);
    }
    // A last start settles the last kill; then every row has its bytes and every byte its row.
    api_gateway_process gw(db.api_dsn(), storage_env(dir.path));
    const auto end = settled(dir.path, admin);
    INFO("problems: " << (end.problems.empty() ? "" : end.problems.front()));
    CHECK(end.problems.empty());
    CHECK(end.rows > 0);
    CHECK(committed_total > 0);
    // And every row reads back whole.
    auto rows = admin.exec("SELECT name, size FROM storage.objects");
    for (int i = 0; i < rows.size(); ++i) {
        const auto r = gw.request("GET", "/storage/v1/object/assets/" + rows.get<std::string>(i, 0),
                                  service());
        CHECK(r.status == 200);
        CHECK(r.body.size() == static_cast<std::size_t>(rows.get<std::int64_t>(i, 1)));
    }
}

}  // namespace api_storage_test
