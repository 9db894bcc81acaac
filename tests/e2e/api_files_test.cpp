// The agent files routes against what a sandbox may hold besides files: a FIFO, a device node,
// a socket and symbolic links are refused at once (and a FIFO does not stall the event loop);
// a file larger than memory should hold is streamed; active content is a sandboxed download;
// names that are not UTF-8, carry control characters or are too long are a 400; uploads of any
// size (raw, multipart, chunked) go to disk in bounded memory, byte for byte, and an upload
// over the limit is a 413 that leaves nothing behind.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <openssl/evp.h>
#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/test_db.hpp"

namespace api_files_test {

namespace {

namespace fs = std::filesystem;
namespace http = awp::http;
using awp::test::random_name;
using namespace std::chrono_literals;

using gateway_process = awp::test::api_gateway_process;

using awp::test::bearer;
using awp::test::user_token;

std::string error_code(const std::string& body) {
    rapidjson::Document d;
    d.Parse(body.c_str(), body.size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("error") || !d["error"].IsObject()) {
        return "<no error body: " + body.substr(0, 200) + ">";
    }
    return d["error"]["code"].GetString();
}

std::string error_code(const http::response& r) { return error_code(r.body); }

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

/// SHA-256, fed piece by piece.
class sha256 {
public:
    sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
        REQUIRE(EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1);
    }
    void add(const char* p, std::size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
    std::string hex() {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        EVP_DigestFinal_ex(ctx_.get(), md, &len);
        static constexpr char kHex[] = "0123456789abcdef";
        std::string out;
        for (unsigned i = 0; i < len; ++i) {
            out += kHex[md[i] >> 4];
            out += kHex[md[i] & 15];
        }
        return out;
    }

private:
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

std::string file_sha256(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    sha256 h;
    std::vector<char> buf(1 << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        h.add(buf.data(), static_cast<std::size_t>(in.gcount()));
    }
    return h.hex();
}

/// An upload made up as it is sent: `prefix`, `size` pseudo-random bytes (xorshift, never
/// "\r\n", so no multipart delimiter), `suffix`; never held whole by the test.
struct streamed_upload {
    std::string target;
    std::string token;
    std::string content_type = "application/octet-stream";
    std::string prefix;
    std::uint64_t size = 0;
    std::string suffix;
    bool chunked = false;
    std::uint64_t seed = 0x9e3779b97f4a7c15ULL;
};

struct upload_result {
    std::string head;  // status line and headers
    std::string body;
    std::string sent_sha256;  // of the generated bytes alone
};

/// Sends the upload over a raw socket on one thread while the answer is read on this one (a
/// 413 sent before the body is complete is read, not lost to a reset).
upload_result send_streamed(unsigned short port, const streamed_upload& u) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    timeval tv{120, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    upload_result out;
    std::string head = "POST " + u.target +
                       " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + u.token +
                       "\r\nContent-Type: " + u.content_type + "\r\nConnection: close\r\n";
    const auto total = u.prefix.size() + u.size + u.suffix.size();
    head += u.chunked ? std::string("Transfer-Encoding: chunked\r\n\r\n")
                      : "Content-Length: " + std::to_string(total) + "\r\n\r\n";
    std::thread sender([&] {
        auto send_all = [fd](const char* p, std::size_t n) {
            while (n > 0) {
                const auto k = ::send(fd, p, n, MSG_NOSIGNAL);
                if (k <= 0) return false;
                p += k;
                n -= static_cast<std::size_t>(k);
            }
            return true;
        };
        auto send_piece = [&](const char* p, std::size_t n) {
            if (n == 0) return true;
            if (!u.chunked) return send_all(p, n);
            char len[32];
            const int m = std::snprintf(len, sizeof len, "%zx\r\n", n);
            return send_all(len, static_cast<std::size_t>(m)) && send_all(p, n) &&
                   send_all("\r\n", 2);
        };
        sha256 h;
        bool ok =
            send_all(head.data(), head.size()) && send_piece(u.prefix.data(), u.prefix.size());
        std::vector<char> buf(256 * 1024);
        std::uint64_t x = u.seed;
        std::uint64_t left = u.size;
        while (ok && left > 0) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
            for (std::size_t i = 0; i < n; ++i) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Bytes 0x0e..0xff: random enough, and no CR or LF.
                buf[i] = static_cast<char>(0x0e + (x >> 56) % 0xf2);
            }
            h.add(buf.data(), n);
            ok = send_piece(buf.data(), n);
            left -= n;
        }
        ok = ok && send_piece(u.suffix.data(), u.suffix.size());
        if (ok && u.chunked) send_all("0\r\n\r\n", 5);
        if (left == 0) out.sent_sha256 = h.hex();
    });
    std::string answer;
    std::vector<char> buf(64 * 1024);
    for (;;) {
        const auto n = ::recv(fd, buf.data(), buf.size(), 0);
        if (n <= 0) break;
        answer.append(buf.data(), static_cast<std::size_t>(n));
    }
    ::shutdown(fd, SHUT_RDWR);  // a sender still writing stops
    sender.join();
    ::close(fd);
    const auto end = answer.find("\r\n\r\n");
    out.head = answer.substr(0, end);
    if (end != std::string::npos) out.body = answer.substr(end + 4);
    return out;
}

/// Files in `dir` and below, by relative name.
std::vector<std::string> files_under(const fs::path& dir) {
    std::vector<std::string> out;
    if (!fs::exists(dir)) return out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        out.push_back(fs::relative(e.path(), dir).string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// awp-api-gateway started with `extra` besides the minimum: its exit status once it ends on
/// its own within 10 s (-1 when it had to be killed).
int start_and_wait(const std::string& dsn, const std::vector<std::string>& extra) {
    const std::string bin = std::string(AWP_BIN_DIR) + "/awp-api-gateway";
    std::vector<std::string> env = {"PATH=/usr/bin:/bin",
                                    std::string("JWT_SECRET=") + awp::test::kApiJwtSecret,
                                    "AWP_API_DATABASE_URL=" + dsn, "API_PORT=0"};
    env.insert(env.end(), extra.begin(), extra.end());
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> argv{const_cast<char*>(bin.c_str()), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    REQUIRE(posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), envp.data()) == 0);
    posix_spawn_file_actions_destroy(&fa);
    int st = 0;
    for (int i = 0; i < 200; ++i) {
        if (::waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        std::this_thread::sleep_for(50ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
    return -1;
}

/// The gateway spools upload bodies into <scratch>/spool.
const auto kSpoolHere = [](const fs::path& dir, gateway_process::env_map& env) {
    fs::create_directories(dir / "spool");
    env["API_UPLOAD_SPOOL_DIR"] = (dir / "spool").string();
};

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
    const auto box = gw.dir / "openclaw" / "workspace-bob";
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
    const auto box = gw.dir / "openclaw" / "workspace-bob";
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
    const std::vector<std::string> not_utf8{"%FF%FE.txt", "bad%C0%AF.txt", "%ED%A0%80.txt"};
    for (const std::string& p :
         std::vector<std::string>{"%FF%FE.txt", "bad%C0%AF.txt", "%ED%A0%80.txt", "a%01b.txt",
                                  "tab%09.txt", "del%7F.txt", long_name, long_path}) {
        INFO(p.substr(0, 40) << " (" << p.size() << " bytes)");
        auto up = gw.request("POST", "/api/agents/bob/files?path=" + p, raw, "x");
        CHECK(up.status == 400);
        // Bytes that are not text never reach the handler: the server refuses the query (and
        // the path below) when it decodes it; the rest is the files route's own check.
        const bool text = std::find(not_utf8.begin(), not_utf8.end(), p) == not_utf8.end();
        CHECK(error_code(up) == (text ? "bad_path" : "bad_query"));
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
    { std::ofstream(gw.dir / "openclaw" / "workspace-bob" / "\xff\xfe.bin") << "x"; }
    auto list = gw.get("/api/agents/bob/files", bearer(tok));
    CHECK(list.status == 200);
    rapidjson::Document d;
    d.Parse<rapidjson::kParseValidateEncodingFlag>(list.body.c_str(), list.body.size());
    CHECK(!d.HasParseError());
    CHECK(list.body.find("\xc3\xa9t\xc3\xa9.txt") != std::string::npos);
}

TEST_CASE("agent files: uploads of 256 MiB, raw and multipart, go to disk in bounded memory",
          "[api][files]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t = seed(admin);
    constexpr std::uint64_t kMiB = 1024 * 1024;
    constexpr std::uint64_t kLimit = 300 * kMiB;
    gateway_process gw(db.api_dsn(), {{"API_UPLOAD_LIMIT", std::to_string(kLimit)}}, "awp-api-e2e-",
                       kSpoolHere);
    const auto tok = user_token(t);
    auto raw = bearer(tok);
    raw.add("Content-Type", "application/octet-stream");
    REQUIRE(gw.request("POST", "/api/agents/bob/files?path=small.txt", raw, "s").status == 201);
    const auto box = gw.dir / "openclaw" / "workspace-bob";
    const auto before = peak_rss_kib(gw.pid);
    REQUIRE(before > 0);
    constexpr std::uint64_t kSize = 256 * kMiB;

    // Raw body.
    streamed_upload up;
    up.target = "/api/agents/bob/files?path=big/raw.bin";
    up.token = tok;
    up.size = kSize;
    auto r = send_streamed(gw.port, up);
    INFO(r.head << "\n" << r.body);
    CHECK(r.head.rfind("HTTP/1.1 201", 0) == 0);
    CHECK(r.body.find("\"size\":" + std::to_string(kSize)) != std::string::npos);
    REQUIRE(fs::exists(box / "big" / "raw.bin"));
    CHECK(fs::file_size(box / "big" / "raw.bin") == kSize);
    CHECK(file_sha256(box / "big" / "raw.bin") == r.sent_sha256);
    fs::remove(box / "big" / "raw.bin");

    // multipart/form-data, the path field after the file part.
    const auto boundary = "awp-e2e-" + random_name("b");
    streamed_upload mp;
    mp.target = "/api/agents/bob/files";
    mp.token = tok;
    mp.content_type = "multipart/form-data; boundary=" + boundary;
    mp.prefix = "--" + boundary +
                "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"ignored.bin\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n";
    mp.size = kSize;
    mp.suffix = "\r\n--" + boundary +
                "\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\nbig/mp.bin\r\n--" +
                boundary + "--\r\n";
    mp.seed = 42;
    auto m = send_streamed(gw.port, mp);
    INFO(m.head << "\n" << m.body);
    CHECK(m.head.rfind("HTTP/1.1 201", 0) == 0);
    CHECK(m.body.find("\"path\":\"big/mp.bin\"") != std::string::npos);
    REQUIRE(fs::exists(box / "big" / "mp.bin"));
    CHECK(fs::file_size(box / "big" / "mp.bin") == kSize);
    CHECK(file_sha256(box / "big" / "mp.bin") == m.sent_sha256);
    CHECK(!fs::exists(box / "ignored.bin"));
    fs::remove(box / "big" / "mp.bin");

    // Chunked, beyond the limit: 413 once the limit is passed, nothing kept.
    streamed_upload over;
    over.target = "/api/agents/bob/files?path=big/over.bin";
    over.token = tok;
    over.size = kLimit + 128 * 1024;
    over.chunked = true;
    auto o = send_streamed(gw.port, over);
    INFO(o.head << "\n" << o.body);
    CHECK(o.head.rfind("HTTP/1.1 413", 0) == 0);
    CHECK(error_code(o.body) == "body_too_large");

    const auto after = peak_rss_kib(gw.pid);
    INFO("VmHWM before " << before << " KiB, after " << after << " KiB");
    CHECK(after - before < 32 * 1024);
    CHECK(files_under(box / "big").empty());
    CHECK(files_under(gw.dir / "spool").empty());
    CHECK(gw.get("/api/agents/bob/files/small.txt", bearer(tok)).body == "s");
}

TEST_CASE("agent files: a multipart delimiter or field cut by the gateway's read chunks",
          "[api][files]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t = seed(admin);
    gateway_process gw(db.api_dsn(), {}, "awp-api-e2e-", kSpoolHere);
    const auto tok = user_token(t);
    const auto box = gw.dir / "openclaw" / "workspace-bob";
    auto mp = bearer(tok);
    mp.add("Content-Type", "multipart/form-data; boundary=edge");
    // The gateway reads the body in 64 KiB pieces: the delimiter after the file's content, and
    // the one before the path field, are put across that edge at every offset.
    constexpr std::size_t kEdge = 64 * 1024;
    const std::string path_part =
        "--edge\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\nd/cut.txt\r\n";
    const std::string file_head =
        "--edge\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\n";
    const std::string tail = "\r\n--edge--\r\n";
    for (std::size_t edge : {kEdge, 2 * kEdge}) {
        for (std::size_t back = 0; back <= 12; ++back) {
            // 1. "\r\n--edge" after the content starts `back` bytes before the edge.
            const auto content_len = edge - back - path_part.size() - file_head.size();
            std::string content(content_len, 'x');
            for (std::size_t i = 0; i < content.size(); i += 7) content[i] = '-';
            const auto body = path_part + file_head + content + tail;
            INFO("content delimiter " << back << " bytes before offset " << edge);
            auto r = gw.request("POST", "/api/agents/bob/files", mp, body);
            INFO(r.body);
            CHECK(r.status == 201);
            CHECK(gw.get("/api/agents/bob/files/d/cut.txt", bearer(tok)).body == content);
            // 2. The path field's value across the edge (a preamble pushes it there).
            const std::string preamble(edge - back - path_part.size() + 10, 'p');
            const auto body2 = preamble + "\r\n" + path_part + file_head + "two" + tail;
            auto r2 = gw.request("POST", "/api/agents/bob/files", mp, body2);
            INFO(r2.body);
            CHECK(r2.status == 201);
            CHECK(r2.body.find("\"path\":\"d/cut.txt\"") != std::string::npos);
            CHECK(gw.get("/api/agents/bob/files/d/cut.txt", bearer(tok)).body == "two");
        }
    }
    // A body that ends inside the file part is still refused.
    auto bad = gw.request("POST", "/api/agents/bob/files", mp, file_head + std::string(kEdge, 'y'));
    CHECK(bad.status == 400);
    CHECK(error_code(bad) == "bad_multipart");
    CHECK(files_under(box) == std::vector<std::string>{"d", "d/cut.txt"});
    CHECK(files_under(gw.dir / "spool").empty());
}

TEST_CASE("agent files: an upload over the limit is a 413 and leaves no file", "[api][files]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t = seed(admin);
    constexpr std::uint64_t kLimit = 1024 * 1024;
    gateway_process gw(db.api_dsn(), {{"API_UPLOAD_LIMIT", std::to_string(kLimit)}}, "awp-api-e2e-",
                       kSpoolHere);
    const auto tok = user_token(t);
    const auto box = gw.dir / "openclaw" / "workspace-bob";
    // Raw, declared too long: refused before the body is read.
    streamed_upload raw;
    raw.target = "/api/agents/bob/files?path=raw.bin";
    raw.token = tok;
    raw.size = 2 * kLimit;
    auto r = send_streamed(gw.port, raw);
    CHECK(r.head.rfind("HTTP/1.1 413", 0) == 0);
    // Chunked: refused when the limit is passed.
    raw.chunked = true;
    auto c = send_streamed(gw.port, raw);
    CHECK(c.head.rfind("HTTP/1.1 413", 0) == 0);
    // multipart whose file is over the limit though the body is within the framing allowance.
    streamed_upload mp;
    mp.target = "/api/agents/bob/files";
    mp.token = tok;
    mp.content_type = "multipart/form-data; boundary=lim";
    mp.prefix =
        "--lim\r\nContent-Disposition: form-data; name=\"file\"; filename=\"m.bin\"\r\n\r\n";
    mp.size = kLimit + 1;
    mp.suffix = "\r\n--lim--\r\n";
    auto m = send_streamed(gw.port, mp);
    INFO(m.head << "\n" << m.body);
    CHECK(m.head.rfind("HTTP/1.1 413", 0) == 0);
    CHECK(error_code(m.body) == "body_too_large");
    // Nothing in the sandbox (no temporary file either) nor in the spool directory.
    CHECK(files_under(box).empty());
    CHECK(files_under(gw.dir / "spool").empty());
    // At the limit, chunked, the file arrives whole.
    mp.size = kLimit;
    mp.chunked = true;
    auto ok = send_streamed(gw.port, mp);
    INFO(ok.head << "\n" << ok.body);
    CHECK(ok.head.rfind("HTTP/1.1 201", 0) == 0);
    CHECK(file_sha256(box / "m.bin") == ok.sent_sha256);
    CHECK(files_under(box) == std::vector<std::string>{"m.bin"});

    // A spool directory that is missing is made for the daemon alone; one that is not a
    // writable directory is bad configuration.
    {
        const auto made = gw.dir / "made" / "spool";
        gateway_process other(db.api_dsn(), {{"API_UPLOAD_SPOOL_DIR", made.string()}});
        CHECK(fs::is_directory(made));
        CHECK((fs::status(made).permissions() & fs::perms::all) == fs::perms::owner_all);
    }
    { std::ofstream(gw.dir / "not-a-dir") << "x"; }
    CHECK(start_and_wait(db.api_dsn(),
                         {"API_UPLOAD_SPOOL_DIR=" + (gw.dir / "not-a-dir").string()}) == 78);
}

TEST_CASE(
    "agent files: with AWP_WORKSPACES_DIR the files are in that shared folder, made group "
    "read-write for the agent user's group",
    "[api][files]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t = seed(admin);
    const fs::path shared = fs::temp_directory_path() / random_name("awp-ws-");
    fs::create_directories(shared);
    gateway_process gw(db.api_dsn(), {{"AWP_WORKSPACES_DIR", shared.string()}});
    const auto tok = user_token(t);
    auto raw = bearer(tok);
    raw.add("Content-Type", "application/octet-stream");
    REQUIRE(gw.request("POST", "/api/agents/bob/files?path=notes/a.txt", raw, "shared").status ==
            201);
    const auto file = shared / "workspace-bob" / "notes" / "a.txt";
    REQUIRE(fs::is_regular_file(file));
    CHECK_FALSE(fs::exists(gw.dir / "openclaw" / "workspace-bob" / "notes"));
    struct stat st {};
    REQUIRE(::stat(file.c_str(), &st) == 0);
    const mode_t mask = ::umask(0);  // the gateway inherited this process's
    ::umask(mask);
    CHECK((st.st_mode & 0060) == (0060 & ~mask));  // group read-write unless the umask says no
    CHECK((st.st_mode & 0007) == 0);               // never the world's
    REQUIRE(::stat(file.parent_path().c_str(), &st) == 0);
    CHECK((st.st_mode & 0007) == 0);
    CHECK(gw.request("GET", "/api/agents/bob/files/notes/a.txt", bearer(tok), "").body == "shared");
    std::error_code ec;
    fs::remove_all(shared, ec);
}

}  // namespace api_files_test
