// The api-gateway's browser routes against a real headless Chromium (the tab list, JPEG
// screenshots scaled to maxWidth, quality, query validation, browser down / silent, auth and
// tenant isolation), and the cross-gateway proxy: two api-gateways and a command runner on one
// database, files of an agent on the second gateway read and written through the first.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/net.hpp"
#include "support/test_db.hpp"

namespace api_browser_test {

namespace {

namespace fs = std::filesystem;
namespace http = awp::http;
using awp::test::free_port;
using awp::test::random_name;
using namespace std::chrono_literals;

constexpr const char* kSecret = "e2e-jwt-secret-that-is-long-enough-0123456789";

/// A loopback port that completes TCP handshakes (the kernel's backlog) but never answers.
struct silent_listener {
    silent_listener() {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd, 16) == 0);
        socklen_t len = sizeof a;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        port = ntohs(a.sin_port);
    }
    ~silent_listener() { ::close(fd); }
    /// Connections that reached the listener so far (taken off the backlog, then closed).
    int accepted() {
        int n = 0;
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        for (int c; (c = ::accept(fd, nullptr, nullptr)) >= 0; ++n) ::close(c);
        return n;
    }
    int fd = -1;
    unsigned short port = 0;
};

/// Headless Chromium in its own process group, showing one local page whose title carries the
/// page's own idea of its viewport ("AWP Browser Test 1600x1000"). Killed, group and all, on
/// destruction, also when a REQUIRE failed.
struct chromium_process {
    chromium_process() {
        dir = fs::temp_directory_path() / random_name("awp-chromium-");
        fs::create_directories(dir / "profile");
        page = dir / "page.html";
        {
            // Detailed content (gradients, many glyphs) so JPEG quality matters.
            std::ofstream out(page);
            out << "<!doctype html><html><head><title>AWP Browser Test</title><style>"
                   "body{margin:0;background:linear-gradient(135deg,#f06,#48f,#0c9);"
                   "font:13px "
                   "monospace;color:#fff;word-break:break-all}</style></head><body><script>"
                   "const t=()=>document.title='AWP Browser Test '+innerWidth+'x'+innerHeight;"
                   "t();onresize=t;"
                   "let s='';for(let i=0;i<4000;i++)s+=String.fromCharCode(33+(i*7919)%90);"
                   "document.body.append(s);</script></body></html>";
        }
        const std::string log = (dir / "chromium.log").string();
        std::vector<std::string> args = {"/usr/bin/chromium",
                                         "--headless=new",
                                         "--no-sandbox",
                                         "--disable-gpu",
                                         "--no-first-run",
                                         "--no-default-browser-check",
                                         "--hide-scrollbars",
                                         "--remote-debugging-address=127.0.0.1",
                                         "--remote-debugging-port=0",
                                         "--user-data-dir=" + (dir / "profile").string(),
                                         "--window-size=1600,1000",
                                         "file://" + page.string()};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        // Chromium's helpers outlive the browser process for a moment; as a subreaper this
        // process inherits and reaps them instead of leaving zombies behind.
        ::prctl(PR_SET_CHILD_SUBREAPER, 1);
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        std::string path_env = "PATH=/usr/bin:/bin";
        std::string home_env = "HOME=" + dir.string();
        char* envp[] = {path_env.data(), home_env.data(), nullptr};
        const int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        REQUIRE(rc == 0);
        // DevTools writes its port to <profile>/DevToolsActivePort once it listens.
        const auto deadline = std::chrono::steady_clock::now() + 30s;
        while (std::chrono::steady_clock::now() < deadline && port == 0) {
            std::ifstream in(dir / "profile" / "DevToolsActivePort");
            std::string line;
            if (in && std::getline(in, line) && !line.empty()) port = std::stoi(line);
            if (port == 0) std::this_thread::sleep_for(50ms);
        }
        REQUIRE(port != 0);
        // Wait until the page has run its script (the title carries the viewport) and the
        // window has settled (the same title twice, 300 ms apart).
        std::string last;
        while (std::chrono::steady_clock::now() < deadline) {
            if (read_page() && page_title == last) break;
            last = page_title;
            std::this_thread::sleep_for(300ms);
        }
        REQUIRE(viewport_width > 0);
        REQUIRE(page_title == last);
    }
    /// The test page's id, title and viewport as Chromium reports them now.
    bool read_page() {
        try {
            http::client_request q;
            q.url = url() + "/json/list";
            auto r = http::fetch_sync(q);
            rapidjson::Document d;
            d.Parse(r.body.c_str(), r.body.size());
            const std::string pre = "AWP Browser Test ";
            for (const auto& t : d.GetArray()) {
                const std::string title = t["title"].GetString();
                if (std::string(t["type"].GetString()) != "page" || title.rfind(pre, 0) != 0) {
                    continue;
                }
                const auto x = title.find('x', pre.size());
                viewport_width = std::stoi(title.substr(pre.size(), x - pre.size()));
                viewport_height = std::stoi(title.substr(x + 1));
                page_title = title;
                page_id = t["id"].GetString();
                return true;
            }
        } catch (const std::exception&) {
        }
        return false;
    }
    ~chromium_process() {
        stop();
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    void stop() {
        if (pid <= 0) return;
        ::kill(-pid, SIGKILL);  // the whole group: browser, zygotes, renderers
        // Reap the group (its orphans are ours: see the subreaper flag above).
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (std::chrono::steady_clock::now() < until) {
            int st = 0;
            const pid_t r = ::waitpid(-pid, &st, WNOHANG);
            if (r < 0) break;  // ECHILD: none left
            if (r == 0) std::this_thread::sleep_for(20ms);
        }
        pid = -1;
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }

    fs::path dir;
    fs::path page;
    pid_t pid = -1;
    int port = 0;
    int viewport_width = 0;
    int viewport_height = 0;
    std::string page_title;
    std::string page_id;
};

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
    return awp::core::crypto::jwt_sign_hs256(claims, kSecret);
}

struct error_body {
    std::string code;
    std::string message;
};

error_body error_of(const http::response& r) {
    rapidjson::Document d;
    d.Parse(r.body.c_str(), r.body.size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("error")) {
        return {"<no error body>", r.body.substr(0, 200)};
    }
    return {d["error"]["code"].GetString(), d["error"]["message"].GetString()};
}

std::string seed_tenant(awp::core::pg::connection& admin) {
    const auto slug = random_name("t");
    return std::string(
        admin.exec("INSERT INTO tenants (name, slug) VALUES ($1, $1) RETURNING id::text", {slug})
            .get<std::string>(0, 0));
}

void seed_agent(awp::core::pg::connection& admin, const std::string& tenant,
                const std::string& slug, const std::string& config = "{}") {
    admin.exec("INSERT INTO agents (tenant_id, name, slug, config) VALUES ($1, $2, $2, $3::jsonb)",
               {tenant, slug, config});
}

/// Width and height from a JPEG's first SOFn marker; {0, 0} when there is none.
std::pair<int, int> jpeg_size(const std::string& j) {
    std::size_t i = 2;
    while (i + 9 < j.size()) {
        if (static_cast<unsigned char>(j[i]) != 0xFF) return {0, 0};
        const auto marker = static_cast<unsigned char>(j[i + 1]);
        const auto len =
            (static_cast<unsigned char>(j[i + 2]) << 8) | static_cast<unsigned char>(j[i + 3]);
        const bool sof =
            marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
        if (sof) {
            const int h =
                (static_cast<unsigned char>(j[i + 5]) << 8) | static_cast<unsigned char>(j[i + 6]);
            const int w =
                (static_cast<unsigned char>(j[i + 7]) << 8) | static_cast<unsigned char>(j[i + 8]);
            return {w, h};
        }
        i += 2 + static_cast<std::size_t>(len);
    }
    return {0, 0};
}

bool is_jpeg(const std::string& b) {
    return b.size() > 4 && static_cast<unsigned char>(b[0]) == 0xFF &&
           static_cast<unsigned char>(b[1]) == 0xD8;
}

}  // namespace

TEST_CASE("browser state and screenshots come from the agent's real Chromium", "[api][browser]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t1 = seed_tenant(admin);
    const auto t2 = seed_tenant(admin);
    chromium_process chrome;
    // The gateway-wide endpoint is dead; bob's own config points at the running browser.
    const auto dead = "http://127.0.0.1:" + std::to_string(free_port());
    seed_agent(admin, t1, "bob", R"({"browser":{"cdpUrl":")" + chrome.url() + R"("}})");
    seed_agent(admin, t1, "dan");
    gateway_process gw(db.api_dsn(), {{"API_BROWSER_CDP_URL", dead}});
    const auto tok = bearer(user_token(t1));

    // State: the page, its real title and URL, marked active.
    REQUIRE(chrome.read_page());
    auto st = gw.get("/api/agents/bob/browser/state", tok);
    REQUIRE(st.status == 200);
    rapidjson::Document d;
    d.Parse(st.body.c_str(), st.body.size());
    REQUIRE(d.IsObject());
    CHECK(std::string(d["agent"].GetString()) == "bob");
    CHECK(std::string(d["activeTabId"].GetString()) == chrome.page_id);
    CHECK(std::string(d["title"].GetString()) == chrome.page_title);
    REQUIRE(d["tabs"].IsArray());
    bool found = false;
    for (const auto& t : d["tabs"].GetArray()) {
        CHECK(std::string(t["type"].GetString()) == "page");
        if (std::string(t["id"].GetString()) != chrome.page_id) continue;
        found = true;
        CHECK(std::string(t["title"].GetString()) == chrome.page_title);
        CHECK(std::string(t["url"].GetString()) == "file://" + chrome.page.string());
        CHECK(t["active"].GetBool());
    }
    CHECK(found);

    // Screenshots: JPEG, not cached, width = min(maxWidth, viewport width).
    INFO("viewport " << chrome.viewport_width << "x" << chrome.viewport_height);
    for (int max_width : {800, 333, 7680}) {
        auto shot =
            gw.get("/api/agents/bob/browser/screenshot?maxWidth=" + std::to_string(max_width), tok);
        INFO("maxWidth " << max_width << ": " << shot.body.substr(0, 200));
        REQUIRE(shot.status == 200);
        CHECK(shot.header.get("content-type") == "image/jpeg");
        CHECK(shot.header.get("cache-control") == "no-store");
        REQUIRE(is_jpeg(shot.body));
        const auto [w, h] = jpeg_size(shot.body);
        const int want = std::min(max_width, chrome.viewport_width);
        CHECK(w == want);
        const double want_h =
            static_cast<double>(chrome.viewport_height) * want / chrome.viewport_width;
        CHECK(std::abs(h - want_h) <= 1.5);
    }
    // The default maxWidth is 1280.
    auto def = gw.get("/api/agents/bob/browser/screenshot", tok);
    REQUIRE(def.status == 200);
    CHECK(jpeg_size(def.body).first == std::min(1280, chrome.viewport_width));

    // Quality: the same page at quality 10 is much smaller than at 95.
    auto low = gw.get("/api/agents/bob/browser/screenshot?quality=10&maxWidth=1000", tok);
    auto high = gw.get("/api/agents/bob/browser/screenshot?quality=95&maxWidth=1000", tok);
    REQUIRE(low.status == 200);
    REQUIRE(high.status == 200);
    INFO("quality 10: " << low.body.size() << " bytes, quality 95: " << high.body.size());
    CHECK(jpeg_size(low.body) == jpeg_size(high.body));
    CHECK(low.body.size() * 2 < high.body.size());

    // A second tab opens and scrolls past a plain top to a noisy region. It is the active tab
    // now, and its screenshot is what is on screen (noise: a large JPEG), not the page's top
    // (plain, or not painted at all: a few kilobytes).
    {
        // A data: URL without '#' or '%', which the URL would read as a fragment or escape.
        const std::string page =
            "data:text/html,<title>loading</title><body style='margin:0'>"
            "<div style='height:3000px;background:rgb(32,80,192)'></div>"
            "<div id=n style='height:3000px;overflow:hidden;word-break:break-all;"
            "font:13px monospace'></div><script>let s='';for(let i=0;i<60000;i++)"
            "s+=String.fromCharCode(33+i*7919-90*Math.floor(i*7919/90));n.append(s);"
            "setTimeout(()=>{scrollTo(0,4000);"
            "setTimeout(()=>document.title='scrolled '+scrollY,50)},50)</script>";
        http::client_request q;
        q.method = "PUT";
        q.url = chrome.url() + "/json/new?" + http::percent_encode(page);
        auto created = http::fetch_sync(q);
        REQUIRE(created.status == 200);
        rapidjson::Document nd;
        nd.Parse(created.body.c_str(), created.body.size());
        const std::string second_id = nd["id"].GetString();
        std::string active;
        std::string title;
        const auto until = std::chrono::steady_clock::now() + 15s;
        while (std::chrono::steady_clock::now() < until && title != "scrolled 4000") {
            auto s2 = gw.get("/api/agents/bob/browser/state", tok);
            rapidjson::Document sd;
            sd.Parse(s2.body.c_str(), s2.body.size());
            if (sd.IsObject() && sd["activeTabId"].IsString()) {
                active = sd["activeTabId"].GetString();
                title = sd["title"].GetString();
                CHECK(sd["tabs"].Size() == 2);
            }
            if (title != "scrolled 4000") std::this_thread::sleep_for(100ms);
        }
        CHECK(active == second_id);
        REQUIRE(title == "scrolled 4000");
        auto noisy = gw.get("/api/agents/bob/browser/screenshot?quality=90&maxWidth=800", tok);
        REQUIRE(noisy.status == 200);
        INFO("scrolled screenshot: " << noisy.body.size() << " bytes");
        CHECK(jpeg_size(noisy.body).first == 800);
        CHECK(noisy.body.size() > 40000);
    }

    // Bad query values: 422 naming the field.
    for (const auto& [query, field] :
         std::vector<std::pair<std::string, std::string>>{{"quality=0", "quality"},
                                                          {"quality=101", "quality"},
                                                          {"quality=abc", "quality"},
                                                          {"quality=5.5", "quality"},
                                                          {"quality=", "quality"},
                                                          {"maxWidth=0", "maxWidth"},
                                                          {"maxWidth=-5", "maxWidth"},
                                                          {"maxWidth=99999", "maxWidth"},
                                                          {"maxWidth=12px", "maxWidth"}}) {
        auto r = gw.get("/api/agents/bob/browser/screenshot?" + query, tok);
        INFO(query << " -> " << r.status << " " << r.body);
        CHECK(r.status == 422);
        const auto e = error_of(r);
        CHECK(e.code == "invalid_field");
        CHECK(e.message.find(field) != std::string::npos);
    }

    // No session: 401. Another tenant: the agent does not exist for it.
    CHECK(gw.get("/api/agents/bob/browser/state").status == 401);
    CHECK(gw.get("/api/agents/bob/browser/screenshot").status == 401);
    const auto other = bearer(user_token(t2));
    CHECK(gw.get("/api/agents/bob/browser/state", other).status == 404);
    CHECK(gw.get("/api/agents/bob/browser/screenshot", other).status == 404);
    CHECK(gw.get("/api/agents/nobody/browser/state", tok).status == 404);

    // dan has no browser config: the gateway's endpoint, which nobody serves → 502.
    auto down = gw.get("/api/agents/dan/browser/state", tok);
    CHECK(down.status == 502);
    CHECK(error_of(down).code == "browser_unreachable");

    // The browser goes away: 502 for both routes, no secrets or stack in the answer.
    chrome.stop();
    auto gone = gw.get("/api/agents/bob/browser/state", tok);
    CHECK(gone.status == 502);
    CHECK(error_of(gone).code == "browser_unreachable");
    auto gone_shot = gw.get("/api/agents/bob/browser/screenshot", tok);
    CHECK(gone_shot.status == 502);
    CHECK(error_of(gone_shot).code == "browser_unreachable");
}

TEST_CASE("browser routes answer 504 when DevTools accepts but never answers", "[api][browser]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t1 = seed_tenant(admin);
    silent_listener silent;
    seed_agent(admin, t1, "bob");
    gateway_process gw(db.api_dsn(),
                       {{"API_BROWSER_CDP_URL", "http://127.0.0.1:" + std::to_string(silent.port)},
                        {"API_BROWSER_TIMEOUT", "1"}});
    const auto tok = bearer(user_token(t1));
    const auto start = std::chrono::steady_clock::now();
    auto st = gw.get("/api/agents/bob/browser/state", tok);
    auto shot = gw.get("/api/agents/bob/browser/screenshot?quality=80", tok);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(st.status == 504);
    CHECK(error_of(st).code == "browser_timeout");
    CHECK(shot.status == 504);
    CHECK(took < 8s);
    // The gateway still serves other requests afterwards.
    CHECK(gw.get("/api/health").status == 200);
}

TEST_CASE("a bad browser endpoint is refused: at start-up (exit 78) and per agent (502)",
          "[api][browser]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t1 = seed_tenant(admin);
    seed_agent(admin, t1, "eve", R"({"browser":{"cdpUrl":"http://127.0.0.1/devtools"}})");
    gateway_process gw(db.api_dsn());
    auto r = gw.get("/api/agents/eve/browser/state", bearer(user_token(t1)));
    CHECK(r.status == 502);
    CHECK(error_of(r).code == "browser_misconfigured");

    for (const std::string bad : {"https://127.0.0.1:9222", "http://127.0.0.1", "ws://h:1",
                                  "http://127.0.0.1:9222/json", "http://127.0.0.1:99999"}) {
        INFO(bad);
        const std::string bin = std::string(AWP_BIN_DIR) + "/awp-api-gateway";
        std::vector<std::string> env = {"PATH=/usr/bin:/bin", std::string("JWT_SECRET=") + kSecret,
                                        "AWP_API_DATABASE_URL=" + db.api_dsn(),
                                        "API_BROWSER_CDP_URL=" + bad};
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
        bool ended = false;
        for (int i = 0; i < 200 && !ended; ++i) {
            ended = ::waitpid(pid, &st, WNOHANG) == pid;
            if (!ended) std::this_thread::sleep_for(50ms);
        }
        if (!ended) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &st, 0);
        }
        REQUIRE(ended);
        CHECK(WIFEXITED(st));
        CHECK(WEXITSTATUS(st) == 78);
    }
}

namespace {

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

/// A gateway row; with api_url, the heartbeat its command runner would write (the only place
/// the api-gateway takes another gateway's address from).
std::string seed_gateway(awp::core::pg::connection& admin, const std::string& tenant,
                         const std::string& slug, const std::string& api_url = "") {
    const auto id = std::string(admin
                                    .exec("INSERT INTO gateways (tenant_id, slug, label, status) "
                                          "VALUES ($1, $2, $2, 'ready') RETURNING id::text",
                                          {tenant, slug})
                                    .get<std::string>(0, 0));
    if (!api_url.empty()) {
        admin.exec(
            "INSERT INTO daemon_heartbeats (tenant_id, gateway_id, daemon, meta) "
            "VALUES ($1, $2, 'command-runner', jsonb_build_object('api_url', $3::text))",
            {tenant, id, api_url});
    }
    return id;
}

void seed_agent_on(awp::core::pg::connection& admin, const std::string& tenant,
                   const std::string& slug, const std::string& gateway_id) {
    admin.exec("INSERT INTO agents (tenant_id, name, slug, gateway_id) VALUES ($1, $2, $2, $3)",
               {tenant, slug, gateway_id});
}

/// awp-command-runner for one gateway, only here to register GATEWAY_API_URL.
struct runner_process {
    runner_process(const std::string& dsn, const std::string& gateway, const std::string& api_url,
                   const fs::path& root) {
        std::vector<std::string> env = {
            "PATH=/usr/bin:/bin",
            "DATABASE_URL=" + dsn,
            "GATEWAY_ID=" + gateway,
            "GATEWAY_API_URL=" + api_url,
            "AWP_INSTANCE=" + random_name("proxy-e2e-"),
            "AGENT_RUNTIME=" + std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime",
            "FAKE_RUNTIME_DIR=" + (root / "fake").string(),
            "AWP_CHILD_ENV_ALLOW=FAKE_*",
            "OPENCLAW_STATE_DIR=" + (root / "home").string(),
            "SECRETS_DIR=" + (root / "secrets").string(),
            "AWP_STATE_DIR=" + (root / "state").string(),
            "LOG_LEVEL=warn"};
        fs::create_directories(root / "fake");
        std::vector<char*> envp;
        for (auto& e : env) envp.push_back(e.data());
        envp.push_back(nullptr);
        std::string bin = std::string(AWP_BIN_DIR) + "/awp-command-runner";
        char* argv[] = {bin.data(), nullptr};
        REQUIRE(::posix_spawn(&pid, bin.c_str(), nullptr, nullptr, argv, envp.data()) == 0);
    }
    ~runner_process() {
        if (pid <= 0) return;
        ::kill(pid, SIGKILL);
        int st = 0;
        ::waitpid(pid, &st, 0);
    }
    pid_t pid = -1;
};

}  // namespace

TEST_CASE("files of an agent on another gateway are proxied to that gateway's api-gateway",
          "[api][proxy]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t1 = seed_tenant(admin);
    const auto t2 = seed_tenant(admin);
    const auto gw2 = random_name("gw");
    const auto gw2_id = seed_gateway(admin, t1, gw2);
    seed_agent_on(admin, t1, "remote-bob", gw2_id);
    seed_agent(admin, t1, "local-al");  // no gateway: served where the request lands

    // The second host: its own api-gateway and sandboxes, and a runner that registers its
    // api address in its heartbeat.
    const auto dead_cdp = "http://127.0.0.1:" + std::to_string(free_port());
    gateway_process second(db.api_dsn(), {{"GATEWAY_ID", gw2}, {"API_BROWSER_CDP_URL", dead_cdp}});
    {
        const auto root = second.dir / "runner";
        runner_process runner(db.daemon_dsn(), gw2, second.url() + "/", root);
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        std::string registered;
        while (std::chrono::steady_clock::now() < deadline && registered.empty()) {
            auto r = admin.exec(
                "SELECT max(meta->>'api_url') FROM daemon_heartbeats WHERE gateway_id = $1",
                {gw2_id});
            if (!r.is_null(0, 0)) registered = std::string(r.text(0, 0));
            if (registered.empty()) std::this_thread::sleep_for(50ms);
        }
        CHECK(registered == second.url());  // trailing '/' dropped
    }
    gateway_process first(db.api_dsn(), {{"API_PROXY_TIMEOUT", "2"}});
    const auto tok = user_token(t1);
    auto raw = bearer(tok);
    raw.add("Content-Type", "application/octet-stream");
    const auto remote_box = second.dir / "openclaw" / "workspace-remote-bob";

    // POST through the first gateway lands in the second's sandbox, and nowhere else.
    auto put = first.request("POST", "/api/agents/remote-bob/files?path=notes/x.md", raw, "# far");
    CHECK(put.status == 201);
    CHECK(put.body.find("\"path\":\"notes/x.md\"") != std::string::npos);
    CHECK(read_file(remote_box / "notes" / "x.md") == "# far");
    CHECK(!fs::exists(first.dir / "openclaw" / "workspace-remote-bob"));
    // GET through the first comes from there, with its type.
    auto got = first.get("/api/agents/remote-bob/files/notes/x.md", bearer(tok));
    CHECK(got.status == 200);
    CHECK(got.body == "# far");
    CHECK(got.header.get("content-type").value_or("").find("text/markdown") == 0);
    // Multipart and X-File-Path uploads, binary bytes intact.
    auto mp = bearer(tok);
    mp.add("Content-Type", "multipart/form-data; boundary=XyZ");
    const std::string bin("\x00\xff\x10zz\r\n", 7);
    const std::string body =
        "--XyZ\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\ndocs/b.bin\r\n"
        "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.bin\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n" +
        bin + "\r\n--XyZ--\r\n";
    CHECK(first.request("POST", "/api/agents/remote-bob/files", mp, body).status == 201);
    CHECK(read_file(remote_box / "docs" / "b.bin") == bin);
    auto hdr = raw;
    hdr.add("X-File-Path", "h.txt");
    CHECK(first.request("POST", "/api/agents/remote-bob/files", hdr, "via header").status == 201);
    CHECK(read_file(remote_box / "h.txt") == "via header");
    // Directory listing, and a session cookie instead of the Authorization header.
    http::headers cookie;
    cookie.add("Cookie", "awp-auth-token=" + tok);
    auto list = first.get("/api/agents/remote-bob/files", cookie);
    CHECK(list.status == 200);
    CHECK(list.body.find("\"name\":\"notes\"") != std::string::npos);
    // The second gateway's own checks still apply (and its errors come back as they are).
    auto trav = first.get("/api/agents/remote-bob/files/..%2F..%2Fsecret", bearer(tok));
    CHECK(trav.status == 400);
    CHECK(error_of(trav).code == "bad_path");
    CHECK(first.get("/api/agents/remote-bob/files/none.txt", bearer(tok)).status == 404);
    // Browser routes of a remote agent are the remote gateway's browser.
    auto browser = first.get("/api/agents/remote-bob/browser/state", bearer(tok));
    CHECK(browser.status == 502);
    CHECK(error_of(browser).code == "browser_unreachable");

    // A local agent stays local.
    CHECK(first.request("POST", "/api/agents/local-al/files?path=a.txt", raw, "here").status ==
          201);
    CHECK(read_file(first.dir / "openclaw" / "workspace-local-al" / "a.txt") == "here");
    CHECK(!fs::exists(second.dir / "openclaw" / "workspace-local-al"));

    // Tenancy: another tenant does not see the agent; no session is 401 before any proxying.
    CHECK(first.get("/api/agents/remote-bob/files/notes/x.md", bearer(user_token(t2))).status ==
          404);
    CHECK(first.get("/api/agents/remote-bob/files/notes/x.md").status == 401);
    CHECK(
        first
            .request("POST", "/api/agents/remote-bob/files?path=y.md", bearer(user_token(t2)), "no")
            .status == 404);
    CHECK(!fs::exists(remote_box / "y.md"));

    // Loops: a gateway that points back at the first one, or a request marked as proxied.
    const auto gw3 = seed_gateway(admin, t1, random_name("gw"), first.url());
    seed_agent_on(admin, t1, "loopy", gw3);
    auto loop = first.get("/api/agents/loopy/files", bearer(tok));
    CHECK(loop.status == 502);
    CHECK(error_of(loop).code == "proxy_loop");
    auto marked = bearer(tok);
    marked.add("X-Awp-Proxied", "1");
    auto spoofed = first.get("/api/agents/remote-bob/files", marked);
    CHECK(spoofed.status == 502);
    CHECK(error_of(spoofed).code == "proxy_loop");

    // No address registered → 502; an address that never answers → 504.
    const auto gw4 = seed_gateway(admin, t1, random_name("gw"));
    seed_agent_on(admin, t1, "lost", gw4);
    auto lost = first.get("/api/agents/lost/files", bearer(tok));
    CHECK(lost.status == 502);
    CHECK(error_of(lost).code == "gateway_unreachable");
    // A tenant user may edit gateways.meta, but an address written there is never used: the
    // caller's token must not be sent wherever a user points it.
    silent_listener trap;
    {
        auto user = db.api();
        awp::test::as_user(user, t1, awp::core::uuid::generate_v4().to_string());
        auto upd = user.exec(
            "UPDATE gateways SET meta = jsonb_build_object('api_url', $2::text) WHERE id = $1",
            {gw4, "http://127.0.0.1:" + std::to_string(trap.port)});
        REQUIRE(upd.affected() == 1);  // the user really could write it
    }
    auto still_lost = first.get("/api/agents/lost/files", bearer(tok));
    CHECK(still_lost.status == 502);
    CHECK(error_of(still_lost).code == "gateway_unreachable");
    CHECK(trap.accepted() == 0);
    silent_listener silent;
    const auto gw5 = seed_gateway(admin, t1, random_name("gw"),
                                  "http://127.0.0.1:" + std::to_string(silent.port));
    seed_agent_on(admin, t1, "slow", gw5);
    auto slow = first.get("/api/agents/slow/files", bearer(tok));
    CHECK(slow.status == 504);
    CHECK(error_of(slow).code == "gateway_timeout");

    // The second gateway goes down → 502, for reads and writes.
    second.stop();
    auto down = first.get("/api/agents/remote-bob/files/notes/x.md", bearer(tok));
    CHECK(down.status == 502);
    CHECK(error_of(down).code == "gateway_unreachable");
    CHECK(first.request("POST", "/api/agents/remote-bob/files?path=z.md", raw, "z").status == 502);
    CHECK(first.get("/api/health").status == 200);
}

}  // namespace api_browser_test
