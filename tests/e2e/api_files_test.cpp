// The agent files routes against what a sandbox may hold besides files: a FIFO, a device node,
// a socket and symbolic links are refused at once (and a FIFO does not stall the event loop);
// a file larger than memory should hold is streamed; active content is a sandboxed download;
// names that are not UTF-8, carry control characters or are too long are a 400.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/test_db.hpp"

namespace {

namespace fs = std::filesystem;
namespace http = awp::http;
using awp::test::random_name;
using namespace std::chrono_literals;

using gateway_process = awp::test::api_gateway_process;

http::headers bearer(const std::string& token) {
    http::headers h;
    h.add("Authorization", "Bearer " + token);
    return h;
}

std::string user_token(const std::string& tenant) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    std::string claims = R"({"sub":")" + awp::core::uuid::generate_v4().to_string() +
                         R"(","role":"authenticated","exp":)" + std::to_string(now + 3600) +
                         R"(,"app_metadata":{"tenant_id":")" + tenant + R"("}})";
    return awp::core::crypto::jwt_sign_hs256(claims, awp::test::kApiJwtSecret);
}

std::string error_code(const http::response& r) {
    rapidjson::Document d;
    d.Parse(r.body.c_str(), r.body.size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("error") || !d["error"].IsObject()) {
        return "<no error body: " + r.body.substr(0, 200) + ">";
    }
    return d["error"]["code"].GetString();
}

/// A tenant with one agent "bob"; returns the tenant id.
std::string seed(awp::core::pg::connection& admin) {
    const auto slug = random_name("t");
    const std::string t(
        admin.exec("INSERT INTO tenants (name, slug) VALUES ($1, $1) RETURNING id::text", {slug})
            .get<std::string>(0, 0));
    admin.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, 'bob', 'bob')", {t});
    return t;
}

/// A request with a short client deadline, on another thread (a stalled gateway must not
/// stall the test).
std::future<http::response> get_async(const gateway_process& gw, const std::string& target,
                                      http::headers h) {
    return std::async(std::launch::async, [&gw, target, h]() {
        http::client_request r;
        r.url = gw.url() + target;
        r.header = h;
        r.timeout = 10s;
        return http::fetch_sync(std::move(r));
    });
}

/// The daemon's memory from /proc: VmHWM (peak resident set) in KiB.
long peak_rss_kib(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
}

/// GET over a raw socket, counting the body's bytes without keeping them; the status line and
/// headers are returned.
std::string download_counting(unsigned short port, const std::string& target,
                              const std::string& token, std::uint64_t& body_bytes,
                              const std::string& method = "GET") {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    timeval tv{30, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const std::string req = method + " " + target +
                            " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                            "\r\nConnection: close\r\n\r\n";
    REQUIRE(::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size()));
    std::string head;
    body_bytes = 0;
    std::vector<char> buf(256 * 1024);
    bool in_body = false;
    for (;;) {
        const auto n = ::recv(fd, buf.data(), buf.size(), 0);
        if (n <= 0) break;
        if (in_body) {
            body_bytes += static_cast<std::uint64_t>(n);
            continue;
        }
        head.append(buf.data(), static_cast<std::size_t>(n));
        if (auto end = head.find("\r\n\r\n"); end != std::string::npos) {
            body_bytes = head.size() - end - 4;
            head.resize(end + 4);
            in_body = true;
        }
    }
    ::close(fd);
    return head;
}

}  // namespace

TEST_CASE(
    "agent files: a FIFO, device, socket or symlink is refused at once, other requests "
    "keep being served",
    "[api][files]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t = seed(admin);
    // One I/O thread: a handler that blocks it would stall every other request.
    gateway_process gw(db.api_dsn(), {{"API_THREADS", "1"}});
    const auto tok = user_token(t);
    auto raw = bearer(tok);
    raw.add("Content-Type", "application/octet-stream");
    REQUIRE(gw.request("POST", "/api/agents/bob/files?path=ok.txt", raw, "fine").status == 201);
    const auto box = gw.dir / "agents" / t / "bob";
    REQUIRE(::mkfifo((box / "pipe").c_str(), 0600) == 0);

    // The FIFO has no writer: opening it for reading would wait for one forever.
    auto fifo = get_async(gw, "/api/agents/bob/files/pipe", bearer(tok));
    // Meanwhile the gateway still answers (the health check and another file).
    auto health = get_async(gw, "/api/health", {});
    auto other = get_async(gw, "/api/agents/bob/files/ok.txt", bearer(tok));
    http::response f;
    REQUIRE_NOTHROW(f = fifo.get());
    CHECK(f.status == 403);
    CHECK(error_code(f) == "not_regular_file");
    CHECK(f.body.find("FIFO") != std::string::npos);
    http::response h;
    REQUIRE_NOTHROW(h = health.get());
    CHECK(h.status == 200);
    http::response o;
    REQUIRE_NOTHROW(o = other.get());
    CHECK(o.status == 200);
    CHECK(o.body == "fine");

    // A Unix socket.
    {
        const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        const auto p = (box / "sock").string();
        REQUIRE(p.size() < sizeof a.sun_path);
        std::memcpy(a.sun_path, p.c_str(), p.size() + 1);
        REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        auto r = gw.get("/api/agents/bob/files/sock", bearer(tok));
        CHECK(r.status == 403);
        CHECK(error_code(r) == "not_regular_file");
        ::close(s);
    }
    // A device node (needs CAP_MKNOD): /dev/zero's numbers would read forever.
    if (::mknod((box / "zero").c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0) {
        auto r = gw.get("/api/agents/bob/files/zero", bearer(tok));
        CHECK(r.status == 403);
        CHECK(error_code(r) == "not_regular_file");
        CHECK(r.body.find("device") != std::string::npos);
    } else {
        WARN("mknod refused here (" << std::strerror(errno) << "): device case not run");
    }
    // Symbolic links: out of the sandbox, and inside it (not followed either).
    const auto secret = gw.dir / "secret.txt";
    { std::ofstream(secret) << "TOP SECRET"; }
    fs::create_symlink(secret, box / "out");
    fs::create_symlink(box / "ok.txt", box / "in");
    fs::create_directories(box / "sub");
    fs::create_symlink("../../../../secret.txt", box / "sub" / "rel");
    for (const std::string p : {"out", "in", "sub/rel"}) {
        INFO(p);
        auto r = gw.get("/api/agents/bob/files/" + p, bearer(tok));
        CHECK(r.status >= 400);
        CHECK(r.status < 500);
        CHECK(r.body.find("TOP SECRET") == std::string::npos);
        CHECK(r.body.find("fine") == std::string::npos);
    }
    // The listing still works and names every kind.
    auto list = gw.get("/api/agents/bob/files", bearer(tok));
    CHECK(list.status == 200);
    CHECK(list.body.find(R"("name":"pipe","type":"other")") != std::string::npos);
    // A directory where a file is written: 409, the directory stays.
    CHECK(gw.request("POST", "/api/agents/bob/files?path=sub", raw, "x").status == 409);
    CHECK(fs::is_directory(box / "sub"));
    CHECK(gw.get("/api/health").status == 200);
}

TEST_CASE("agent files: a file larger than the gateway should hold is streamed in bounded memory",
          "[api][files]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t = seed(admin);
    gateway_process gw(db.api_dsn());
    const auto tok = user_token(t);
    auto raw = bearer(tok);
    raw.add("Content-Type", "application/octet-stream");
    REQUIRE(gw.request("POST", "/api/agents/bob/files?path=small.txt", raw, "s").status == 201);
    const auto box = gw.dir / "agents" / t / "bob";
    // 256 MiB, sparse: costs no disk, reads as zeros, and ends with a marker.
    constexpr std::uint64_t kSize = 256ULL * 1024 * 1024;
    {
        std::ofstream out(box / "big.bin", std::ios::binary);
        out.seekp(static_cast<std::streamoff>(kSize - 4));
        out.write("TAIL", 4);
    }
    REQUIRE(fs::file_size(box / "big.bin") == kSize);
    const auto before = peak_rss_kib(gw.pid);
    REQUIRE(before > 0);
    std::uint64_t got = 0;
    const auto head = download_counting(gw.port, "/api/agents/bob/files/big.bin", tok, got);
    INFO(head);
    CHECK(head.rfind("HTTP/1.1 200", 0) == 0);
    CHECK(head.find("Content-Length: " + std::to_string(kSize)) != std::string::npos);
    CHECK(got == kSize);
    const auto after = peak_rss_kib(gw.pid);
    INFO("VmHWM before " << before << " KiB, after " << after << " KiB");
    CHECK(after - before < 32 * 1024);
    // HEAD tells the size without a body; the gateway serves on.
    std::uint64_t head_body = 0;
    const auto h =
        download_counting(gw.port, "/api/agents/bob/files/big.bin", tok, head_body, "HEAD");
    CHECK(h.rfind("HTTP/1.1 200", 0) == 0);
    CHECK(h.find("Content-Length: " + std::to_string(kSize)) != std::string::npos);
    CHECK(head_body == 0);
    auto s = gw.get("/api/agents/bob/files/small.txt", bearer(tok));
    CHECK(s.status == 200);
    CHECK(s.body == "s");
}

TEST_CASE("agent files: HTML, SVG, XML and unknown types are sandboxed attachments",
          "[api][files]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t = seed(admin);
    gateway_process gw(db.api_dsn());
    const auto tok = user_token(t);
    auto raw = bearer(tok);
    raw.add("Content-Type", "application/octet-stream");
    const std::string script =
        "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(document."
        "cookie)</script></svg>";
    for (const std::string name : {"x.html", "x.svg", "x.xml", "x.js", "x.bin", "x.HTM", "noext"}) {
        INFO(name);
        REQUIRE(gw.request("POST", "/api/agents/bob/files?path=" + name, raw, script).status ==
                201);
        auto r = gw.get("/api/agents/bob/files/" + name, bearer(tok));
        CHECK(r.status == 200);
        CHECK(r.body == script);
        const auto cd = std::string(r.header.get("content-disposition").value_or(""));
        CHECK(cd.rfind("attachment;", 0) == 0);
        CHECK(cd.find(name) != std::string::npos);
        bool sandboxed = false;
        for (const auto& [k, v] : r.header.fields()) {
            std::string lower = k;
            for (auto& ch : lower)
                ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            if (lower == "content-security-policy" && v == "sandbox") {
                sandboxed = true;
            }
        }
        CHECK(sandboxed);
        CHECK(r.header.get("x-content-type-options") == "nosniff");
    }
    for (const std::string name : {"a.txt", "a.md", "a.png", "a.json", "a.pdf"}) {
        INFO(name);
        REQUIRE(gw.request("POST", "/api/agents/bob/files?path=" + name, raw, "data").status ==
                201);
        auto r = gw.get("/api/agents/bob/files/" + name, bearer(tok));
        CHECK(r.status == 200);
        CHECK(std::string(r.header.get("content-disposition").value_or("")).rfind("inline", 0) ==
              0);
        CHECK(r.header.get("x-content-type-options") == "nosniff");
    }
}

TEST_CASE(
    "agent files: names that are not UTF-8, hold control characters or are too long get "
    "400",
    "[api][files]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t = seed(admin);
    gateway_process gw(db.api_dsn());
    const auto tok = user_token(t);
    auto raw = bearer(tok);
    raw.add("Content-Type", "application/octet-stream");
    const std::string long_name(300, 'a');
    std::string long_path;
    for (int i = 0; i < 20; ++i) long_path += std::string(250, 'd') + "/";
    long_path += "f.txt";
    for (const std::string& p :
         std::vector<std::string>{"%FF%FE.txt", "bad%C0%AF.txt", "%ED%A0%80.txt", "a%01b.txt",
                                  "tab%09.txt", "del%7F.txt", long_name, long_path}) {
        INFO(p.substr(0, 40) << " (" << p.size() << " bytes)");
        auto up = gw.request("POST", "/api/agents/bob/files?path=" + p, raw, "x");
        CHECK(up.status == 400);
        CHECK(error_code(up) == "bad_path");
        auto down = gw.get("/api/agents/bob/files/" + p, bearer(tok));
        CHECK(down.status == 400);
        CHECK(error_code(down) == "bad_path");
    }
    // The reason is named.
    auto utf = gw.request("POST", "/api/agents/bob/files?path=%FF.txt", raw, "x");
    CHECK(utf.body.find("UTF-8") != std::string::npos);
    auto len = gw.request("POST", "/api/agents/bob/files?path=" + long_name, raw, "x");
    CHECK(len.body.find("255") != std::string::npos);
    // UTF-8 names are fine; a name of 255 bytes too.
    CHECK(gw.request("POST", "/api/agents/bob/files?path=%C3%A9t%C3%A9.txt", raw, "x").status ==
          201);
    CHECK(gw.request("POST", "/api/agents/bob/files?path=" + std::string(255, 'b'), raw, "x")
              .status == 201);
    // A name on disk that is not UTF-8 is left out of the listing, which stays valid JSON.
    { std::ofstream(gw.dir / "agents" / t / "bob" / "\xff\xfe.bin") << "x"; }
    auto list = gw.get("/api/agents/bob/files", bearer(tok));
    CHECK(list.status == 200);
    rapidjson::Document d;
    d.Parse<rapidjson::kParseValidateEncodingFlag>(list.body.c_str(), list.body.size());
    CHECK(!d.HasParseError());
    CHECK(list.body.find("\xc3\xa9t\xc3\xa9.txt") != std::string::npos);
}
