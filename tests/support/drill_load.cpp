// The fault-drill stack: five daemons over one database, a steady load, and the accounting of
// lost, duplicated and interrupted work (see drill_load.hpp).
#include "support/drill_load.hpp"
#include "support/net.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "awp/core/crypto.hpp"

namespace awp::test::drill {

namespace fs = std::filesystem;
namespace pg = core::pg;
using namespace std::chrono_literals;

namespace {

constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";
constexpr const char* kJwtSecret = "drill-jwt-secret-that-is-long-enough-0123456789";
constexpr const char* kServiceKey = "drill-service-role-key-0123456789abcdef";

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    if (r.empty() || r.is_null(0, 0)) return {};
    return std::string(r.text(0, 0));
}

long count(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    const auto v = one(c, sql, p);
    return v.empty() ? 0 : std::stol(v);
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// "2024-05-01T12:00:00.123Z" (the logs' ts) as epoch seconds; NaN when it does not parse.
double parse_ts(const std::string& ts) {
    std::tm tm{};
    int ms = 0;
    if (std::sscanf(ts.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7) {
        return std::nan("");
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<double>(::timegm(&tm)) + ms / 1000.0;
}

/// Times (epoch seconds) of the log lines whose msg is `msg`.
std::vector<double> times_of(const std::string& log, const std::string& msg) {
    std::vector<double> out;
    std::istringstream in(log);
    const std::string needle = "\"msg\":\"" + msg + "\"";
    static const std::regex kTs(R"re("ts":"([^"]+)")re");
    for (std::string line; std::getline(in, line);) {
        if (line.find(needle) == std::string::npos) continue;
        std::smatch m;
        if (std::regex_search(line, m, kTs)) out.push_back(parse_ts(m[1].str()));
    }
    return out;
}

}  // namespace

std::string name_of(daemon d) {
    switch (d) {
        case daemon::api_gateway:
            return "api-gateway";
        case daemon::runner:
            return "command-runner";
        case daemon::dispatcher:
            return "inbox-dispatcher";
        case daemon::embedder:
            return "embedder";
        case daemon::scheduler:
            return "scheduler";
    }
    return "?";
}

double epoch_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string report::line() const {
    std::ostringstream s;
    s << "drill " << drill << ": lost=" << lost << " duplicates=" << duplicates
      << " recovery_ms=" << recovery_ms << " (interrupted=" << interrupted << ")"
      << " commands=" << commands << " inbox=" << inbox << " knowledge=" << knowledge
      << " routine_items=" << routine_items << " redelivered=" << redelivered
      << " health_failures=" << health_failures << "/" << health_probes
      << " settle_ms=" << settle_ms;
    if (!extra.empty()) s << " " << extra;
    return s.str();
}

// ---- set-up -------------------------------------------------------------------------------

stack::stack(options o) : opt_(std::move(o)) {
    dir_ = fs::temp_directory_path() / random_name("awp-drill-");
    runtime_dir_ = dir_ / "runtime";
    wake_dir_ = dir_ / "wake";
    fs::create_directories(runtime_dir_);
    fs::create_directories(wake_dir_ / "argv");
    fs::create_directories(wake_dir_ / "control");
    std::ofstream(runtime_dir_ / "sleep") << opt_.run_seconds << "\n";
    if (opt_.private_postgres) {
        cluster_ = std::make_unique<private_cluster>(true);
    } else {
        db_ = std::make_unique<scoped_database>();
    }
    api_port_ = free_port();

    auto c = admin();
    gateway_slug_ = random_name("drill-gw-");
    gateway_id_ = one(c,
                      "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, "
                      "'ready') RETURNING id",
                      {kTenant, gateway_slug_});
    for (const char* slug : {"drill-a", "drill-b"}) {
        agent_slugs_.push_back(slug);
        agent_ids_.push_back(
            one(c,
                "INSERT INTO agents (tenant_id, name, slug, gateway_id, status) VALUES ($1, $2, "
                "$2, $3, 'ready') RETURNING id",
                {kTenant, std::string(slug), gateway_id_}));
    }
    // A routine due every minute: the scheduler fires it once per slot, never twice.
    routine_id_ = one(c,
                      "INSERT INTO routines (tenant_id, agent_id, name, trigger_type, "
                      "cadence_type, interval_n, next_run_at) VALUES ($1, $2, 'drill routine', "
                      "'schedule', 'every_n_minutes', 1, now()) RETURNING id",
                      {kTenant, agent_ids_.front()});
}

stack::~stack() {
    load_on_ = false;
    health_on_ = false;
    if (load_thread_.joinable()) load_thread_.join();
    if (health_thread_.joinable()) health_thread_.join();
    // SIGCONT first: a stopped process ignores SIGKILL until it runs again.
    for (auto& [d, list] : procs_) {
        for (auto& p : list) {
            if (p->running()) p->signal(SIGCONT);
        }
    }
    procs_.clear();  // SIGKILLs what still runs
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

core::pg::connection stack::admin() const { return pg::connection::connect(admin_dsn()); }

std::string stack::admin_dsn() const { return cluster_ ? cluster_->dsn() : db_->admin_dsn(); }

std::string stack::daemon_dsn() const { return cluster_ ? cluster_->dsn() : db_->daemon_dsn(); }

// ---- processes ----------------------------------------------------------------------------

std::map<std::string, std::string> stack::env_of(daemon d) const {
    std::map<std::string, std::string> env = {
        {"DATABASE_URL", daemon_dsn()}, {"LOG_LEVEL", "info"}, {"DRAIN_TIMEOUT", "10"}};
    switch (d) {
        case daemon::api_gateway:
            env.erase("DATABASE_URL");
            env["AWP_API_DATABASE_URL"] = cluster_ ? cluster_->dsn() : db_->api_dsn();
            env["JWT_SECRET"] = kJwtSecret;
            env["SERVICE_ROLE_KEY"] = kServiceKey;
            env["API_PORT"] = std::to_string(api_port_);
            env["API_THREADS"] = "1";
            env["API_DB_POOL"] = "2";
            env["API_ACCESS_LOG"] = "false";
            env["AWP_CONFIG_DIR"] = (dir_ / "api-config").string();
            env["OPENCLAW_STATE_DIR"] = (dir_ / "api-openclaw").string();
            env["API_TEMPLATES_DIR"] = std::string(AWP_SOURCE_DIR) + "/deploy/templates";
            env["EMBEDDER_URL"] = "http://127.0.0.1:9";
            break;
        case daemon::runner:
            env["GATEWAY_ID"] = gateway_slug_;
            env["AGENT_RUNTIME"] = std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime";
            env["FAKE_RUNTIME_DIR"] = runtime_dir_.string();
            env["AWP_CHILD_ENV_ALLOW"] = "FAKE_*";
            env["OPENCLAW_STATE_DIR"] = (dir_ / "home").string();
            env["SECRETS_DIR"] = (dir_ / "secrets").string();
            env["AWP_STATE_DIR"] = (dir_ / "runner-state").string();
            env["AWP_RUNTIME_SCRIPTS"] = std::string(AWP_SOURCE_DIR) + "/deploy/runtime";
            env["COMMAND_TIMEOUT"] = "20";
            env["SAFETY_POLL"] = "1";
            break;
        case daemon::dispatcher:
            env["GATEWAY_ID"] = gateway_slug_;
            env["AGENT_RUNTIME"] = std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-agent-wake";
            env["FAKE_WAKE_LOG"] = (wake_dir_ / "log").string();
            env["AWP_CHILD_ENV_ALLOW"] = "FAKE_*";
            env["FAKE_WAKE_ARGV_DIR"] = (wake_dir_ / "argv").string();
            env["FAKE_WAKE_CONTROL"] = (wake_dir_ / "control").string();
            env["FAKE_WAKE_PIDS"] = (wake_dir_ / "pids").string();
            env["FAKE_WAKE_SLEEP"] = opt_.run_seconds;
            env["SAFETY_POLL"] = "1";
            env["HEARTBEAT_INTERVAL"] = "1";
            env["WAKE_TIMEOUT"] = "2";
            env["WAKE_KILL_GRACE"] = "1";
            env["LEASE_SECONDS"] = "8";
            env["MAX_CONCURRENT"] = "2";
            break;
        case daemon::embedder:
            env["EMBEDDING_MODEL_DIR"] = "";
            env["EMBEDDER_THREADS"] = "1";
            env["EMBEDDER_LEASE_SECONDS"] = "5";
            env["EMBEDDER_BATCH_SIZE"] = "4";
            env["EMBEDDER_INFERENCE_DELAY_MS"] = "50";
            env["LOG_LEVEL"] = "debug";  // one "indexed" line per item: duplicates are counted
            break;
        case daemon::scheduler:
            env["GATEWAY_ID"] = gateway_slug_;
            env["TICK_INTERVAL"] = "1";  // a second stands for a minute (docs/scheduler.md)
            env["HEARTBEAT_INTERVAL"] = "1";
            break;
    }
    if (auto it = opt_.env.find(d); it != opt_.env.end()) {
        for (const auto& [k, v] : it->second) env[k] = v;
    }
    return env;
}

std::vector<std::string> stack::argv_of(daemon d) const {
    const std::string bin = std::string(AWP_BIN_DIR) + "/awp-" + name_of(d);
    if (d == daemon::embedder) return {bin, "--port", "0", "--safety-poll", "0.5"};
    return {bin};
}

void stack::wait_ready(daemon d, child& c) {
    const auto until = std::chrono::steady_clock::now() + 20s;
    if (d == daemon::api_gateway) {
        while (std::chrono::steady_clock::now() < until) {
            if (api_get("/api/health") == 200) return;
            if (!c.running()) break;
            std::this_thread::sleep_for(20ms);
        }
    } else if (c.wait_for_log("\"msg\":\"ready\"", 20s)) {
        return;
    }
    throw std::runtime_error("awp-" + name_of(d) + " did not become ready; its log:\n" + c.log());
}

void stack::start(daemon d) {
    auto p = std::make_unique<child>(argv_of(d), env_of(d));
    child& c = *p;
    procs_[d].push_back(std::move(p));
    wait_ready(d, c);
}

void stack::start_all() {
    // The gateway first, so the health poller watches it through everything that follows.
    start(daemon::api_gateway);
    health_expected_ = true;
    if (!health_thread_.joinable()) health_thread_ = std::thread([this] { health_loop(); });
    for (daemon d : {daemon::scheduler, daemon::embedder, daemon::dispatcher, daemon::runner})
        start(d);
}

std::optional<int> stack::stop(daemon d, int sig, std::chrono::milliseconds limit) {
    child& c = current(d);
    c.signal(sig);
    return c.wait(limit);
}

child& stack::current(daemon d) {
    auto it = procs_.find(d);
    if (it == procs_.end() || it->second.empty())
        throw std::logic_error("awp-" + name_of(d) + " was never started");
    return *it->second.back();
}

std::string stack::logs(daemon d) const {
    std::string out;
    if (auto it = procs_.find(d); it != procs_.end()) {
        for (const auto& p : it->second) out += p->log();
    }
    return out;
}

// ---- load ---------------------------------------------------------------------------------

void stack::start_load() {
    if (load_on_.exchange(true)) return;
    load_thread_ = std::thread([this] { load_loop(); });
}

void stack::stop_load() {
    load_on_ = false;
    if (load_thread_.joinable()) load_thread_.join();
}

void stack::load_loop() {
    std::optional<pg::connection> c;
    const auto step = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(1.0 / opt_.rate));
    auto next = std::chrono::steady_clock::now();
    long seq = 0;
    const std::string run = random_name("");
    while (load_on_) {
        std::this_thread::sleep_until(next);
        next += step;
        ++seq;
        if (!c) {
            try {
                c = pg::connection::connect(admin_dsn() + " connect_timeout=2");
            } catch (const std::exception&) {
                insert_failures_ += 3;
                continue;
            }
        }
        const std::string n = std::to_string(seq);
        const std::string& agent_id = agent_ids_[static_cast<std::size_t>(seq) % agent_ids_.size()];
        struct statement {
            const char* sql;
            pg::params params;
        };
        const statement statements[] = {
            // The prompt carries the command's own id: the fake runtime's call log is the ledger.
            {"INSERT INTO agent_commands (id, tenant_id, gateway_id, agent_id, agent_slug, action, "
             "payload, meta) SELECT u, $1, $2, $3, $4, 'execute_prompt', "
             "jsonb_build_object('prompt', 'drill-cmd ' || u), '{\"drill\":\"load\"}' "
             "FROM gen_random_uuid() u",
             {kTenant, gateway_id_, agent_ids_.front(), agent_slugs_.front()}},
            {"SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', 'load-' || $3::text, 'drill', "
             "'load item ' || $3::text, '{\"drill\":\"load\"}')",
             {kTenant, agent_id, run + "-" + n}},
            {"INSERT INTO knowledge_items (tenant_id, title, plain_text, tags) VALUES ($1, "
             "'Drill note ' || $2::text, 'Drill note number ' || $2::text || ' about restarts, "
             "leases and the queues that must lose nothing.', '{drill-load}')",
             {kTenant, n}},
        };
        for (const auto& st : statements) {
            try {
                c->exec(st.sql, st.params);
            } catch (const pg::connection_error&) {
                ++insert_failures_;
                c.reset();
                break;
            } catch (const std::exception&) {
                ++insert_failures_;
            }
        }
    }
}

// ---- observation --------------------------------------------------------------------------

std::string stack::enqueue_probe_command(const std::string& action,
                                         const std::string& payload_json) {
    auto c = admin();
    return one(
        c,
        "INSERT INTO agent_commands (tenant_id, gateway_id, agent_id, agent_slug, action, "
        "payload, meta) VALUES ($1, $2, $3, $4, $5::command_action, $6::jsonb, "
        "'{\"drill\":\"probe\"}') RETURNING id",
        {kTenant, gateway_id_, agent_ids_.front(), agent_slugs_.front(), action, payload_json});
}

void stack::expect_failed(const std::string& command_id) { expected_failures_.insert(command_id); }

std::optional<double> stack::first_work_after(daemon d, double since) {
    if (d == daemon::scheduler) {
        auto t = times_of(current(d).log(), "tick");
        for (double x : t) {
            if (x > since) return x;
        }
        return std::nullopt;
    }
    const char* sql = nullptr;
    switch (d) {
        case daemon::runner:
            sql =
                "SELECT extract(epoch FROM min(finished_at)) FROM agent_commands "
                "WHERE status = 'done' AND finished_at > to_timestamp($1)";
            break;
        case daemon::dispatcher:
            sql =
                "SELECT extract(epoch FROM min(completed_at)) FROM agent_inbox_items "
                "WHERE status = 'done' AND completed_at > to_timestamp($1)";
            break;
        case daemon::embedder:
            sql =
                "SELECT extract(epoch FROM min(embedding_updated_at)) FROM knowledge_items "
                "WHERE embedding_status = 'indexed' AND embedding_updated_at > to_timestamp($1)";
            break;
        default:
            throw std::logic_error("first_work_after: not for the api-gateway");
    }
    auto c = admin();
    const auto v = one(c, sql, {since});
    if (v.empty()) return std::nullopt;
    return std::stod(v);
}

long stack::work_between(daemon d, double from, double to) {
    if (d == daemon::scheduler) {
        long n = 0;
        for (double x : times_of(logs(d), "tick")) n += x >= from && x <= to;
        return n;
    }
    const char* sql = nullptr;
    switch (d) {
        case daemon::runner:
            sql =
                "SELECT count(*) FROM agent_commands WHERE status = 'done' AND finished_at "
                "BETWEEN to_timestamp($1) AND to_timestamp($2)";
            break;
        case daemon::dispatcher:
            sql =
                "SELECT count(*) FROM agent_inbox_items WHERE status = 'done' AND completed_at "
                "BETWEEN to_timestamp($1) AND to_timestamp($2)";
            break;
        case daemon::embedder:
            sql =
                "SELECT count(*) FROM knowledge_items WHERE embedding_status = 'indexed' AND "
                "embedding_updated_at BETWEEN to_timestamp($1) AND to_timestamp($2)";
            break;
        default:
            throw std::logic_error("work_between: not for the api-gateway");
    }
    auto c = admin();
    return count(c, sql, {from, to});
}

bool stack::wait_in_flight(daemon d, std::chrono::milliseconds limit) {
    const char* sql = nullptr;
    switch (d) {
        case daemon::runner:
            sql = "SELECT count(*) FROM agent_commands WHERE status = 'running'";
            break;
        case daemon::dispatcher:
            sql = "SELECT count(*) FROM agent_inbox_items WHERE status = 'leased'";
            break;
        case daemon::embedder:
            sql =
                "SELECT count(*) FROM knowledge_items WHERE embedding_status = 'pending' AND "
                "embedding_lease_expires_at > now()";
            break;
        default:
            return true;
    }
    auto c = admin();
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (count(c, sql) > 0) return true;
        std::this_thread::sleep_for(5ms);
    }
    return false;
}

int stack::api_get(const std::string& path, bool service_role, std::string* why) const {
    const auto fail = [&](const std::string& what) {
        if (why) *why = what + ": " + std::strerror(errno);
        return 0;
    };
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return fail("socket");
    struct closer {
        int fd;
        ~closer() { ::close(fd); }
    } guard{s};
    timeval tv{3, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(api_port_));
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return fail("connect");
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (service_role) req += std::string("Authorization: Bearer ") + kServiceKey + "\r\n";
    req += "\r\n";
    if (::send(s, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
        return fail("send");
    std::string head;
    char buf[512];
    while (head.find("\r\n") == std::string::npos) {
        const auto n = ::recv(s, buf, sizeof buf, 0);
        if (n < 0) return fail("recv after " + std::to_string(head.size()) + " bytes");
        if (n == 0) {
            if (why) *why = "closed after " + std::to_string(head.size()) + " bytes";
            return 0;
        }
        head.append(buf, static_cast<std::size_t>(n));
    }
    // "HTTP/1.1 200 OK"
    if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12) {
        if (why) *why = "not HTTP: " + head.substr(0, 40);
        return 0;
    }
    const int status = std::atoi(head.substr(9, 3).c_str());
    if (why && status != 200) *why = "HTTP " + std::to_string(status);
    return status;
}

void stack::health_loop() {
    while (health_on_) {
        std::string why;
        const auto t = epoch_now();
        const int status = api_get("/api/health", false, &why);
        ++health_probes_;
        if (status != 200 && health_expected_) {
            ++health_failures_;
            std::lock_guard<std::mutex> lock(health_mutex_);
            health_problems_.push_back(
                "/api/health at " + std::to_string(t) + " failed (" + why + ") after " +
                std::to_string(std::lround((epoch_now() - t) * 1000)) + " ms");
        }
        std::this_thread::sleep_for(100ms);
    }
}

// ---- settling and accounting --------------------------------------------------------------

bool stack::settled(pg::connection& c) {
    return count(c,
                 "SELECT (SELECT count(*) FROM agent_commands WHERE status IN ('pending', "
                 "'leased', 'running')) + (SELECT count(*) FROM agent_inbox_items WHERE status "
                 "IN ('pending', 'leased', 'failed')) + (SELECT count(*) FROM knowledge_items "
                 "WHERE embedding_status <> 'indexed')") == 0;
}

report stack::settle(const std::string& drill, std::chrono::seconds limit) {
    stop_load();
    report r;
    r.drill = drill;
    const auto t0 = std::chrono::steady_clock::now();
    {
        std::optional<pg::connection> c;
        while (std::chrono::steady_clock::now() - t0 < limit) {
            try {
                if (!c) c = admin();
                if (settled(*c)) break;
                if (std::getenv("AWP_DRILL_DEBUG")) {
                    auto w = c->exec(
                        "SELECT 'commands ' || status || ' ' || count(*) FROM agent_commands "
                        "WHERE status IN ('pending','leased','running') GROUP BY status UNION ALL "
                        "SELECT 'inbox ' || status || ' ' || count(*) FROM agent_inbox_items "
                        "WHERE status IN ('pending','leased','failed') GROUP BY status UNION ALL "
                        "SELECT 'knowledge ' || embedding_status || ' ' || count(*) FROM "
                        "knowledge_items WHERE embedding_status <> 'indexed' GROUP BY "
                        "embedding_status");
                    for (int i = 0; i < w.size(); ++i)
                        std::fprintf(stderr, "%s; ", std::string(w.text(i, 0)).c_str());
                    std::fprintf(stderr, "\n");
                }
            } catch (const pg::connection_error&) {
                c.reset();
            }
            std::this_thread::sleep_for(100ms);
        }
    }
    r.settle_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    r.health_failures = health_failures_.load();
    r.health_probes = health_probes_.load();
    {
        std::lock_guard<std::mutex> lock(health_mutex_);
        r.problems.insert(r.problems.end(), health_problems_.begin(), health_problems_.end());
    }
    auto c = admin();

    // Commands: the fake runtime's call log says how often each one ran.
    std::map<std::string, int> runs;
    {
        std::ifstream in(runtime_dir_ / "calls");
        static const std::regex kId("^drill-cmd ([0-9a-f-]{36})$");
        for (std::string line; std::getline(in, line);) {
            std::istringstream words(line);
            std::vector<std::string> argv;
            for (std::string w; words >> w;) {
                try {
                    argv.push_back(core::crypto::base64_decode(w));
                } catch (const std::exception&) {
                    argv.push_back("");
                }
            }
            for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
                std::smatch m;
                if (argv[i] == "--message" && std::regex_match(argv[i + 1], m, kId))
                    ++runs[m[1].str()];
            }
        }
    }
    auto cmds = c.exec(
        "SELECT id::text, status::text, coalesce(error_message, ''), "
        "coalesce(meta->>'drill', '') FROM agent_commands ORDER BY created_at");
    for (int i = 0; i < cmds.size(); ++i) {
        const std::string id(cmds.text(i, 0)), status(cmds.text(i, 1)), error(cmds.text(i, 2)),
            kind(cmds.text(i, 3));
        const bool load = kind == "load";
        r.commands += load;
        const int n = runs.count(id) ? runs[id] : 0;
        if (n > 1) {
            ++r.duplicates;
            r.problems.push_back("command " + id + " ran " + std::to_string(n) + " times");
        }
        const bool runner_died =
            error.find("stopped while the command was running") != std::string::npos ||
            error.find("lease expired at") != std::string::npos;
        if (status == "failed" && (runner_died || expected_failures_.count(id))) {
            ++r.interrupted;
        } else if (status != "done") {
            ++r.lost;
            r.problems.push_back("command " + id + " (" + kind + ") ended " + status + ": " +
                                 error);
        } else if (load && n == 0) {
            ++r.lost;
            r.problems.push_back("command " + id + " is done but the runtime never ran it");
        }
    }

    // Inbox items: each wake's message names the item and its attempt.
    std::map<std::string, std::vector<int>> wakes;
    {
        static const std::regex kItem(R"(Item: ([0-9a-f-]{36}) \(attempt (\d+) of)");
        std::error_code ec;
        for (const auto& f : fs::directory_iterator(wake_dir_ / "argv", ec)) {
            const std::string argv = slurp(f.path());
            std::smatch m;
            if (std::regex_search(argv, m, kItem))
                wakes[m[1].str()].push_back(std::stoi(m[2].str()));
        }
    }
    auto items = c.exec(
        "SELECT id::text, status::text, attempts, event_type::text, "
        "extract(epoch FROM created_at)::float8 FROM agent_inbox_items ORDER BY created_at");
    std::vector<double> routine_times;
    for (int i = 0; i < items.size(); ++i) {
        const std::string id(items.text(i, 0)), status(items.text(i, 1)), type(items.text(i, 3));
        const int attempts = items.get<int>(i, 2);
        if (type == "routine_schedule") {
            ++r.routine_items;
            routine_times.push_back(items.get<double>(i, 4));
        } else {
            ++r.inbox;
        }
        auto w = wakes[id];
        std::sort(w.begin(), w.end());
        const bool same_attempt_twice = std::adjacent_find(w.begin(), w.end()) != w.end();
        if (same_attempt_twice || static_cast<int>(w.size()) > attempts) {
            ++r.duplicates;
            r.problems.push_back("inbox item " + id + " woken " + std::to_string(w.size()) +
                                 " times in " + std::to_string(attempts) + " attempts");
        }
        if (w.size() > 1) ++r.redelivered;
        if (status != "done" || w.empty()) {
            ++r.lost;
            r.problems.push_back("inbox item " + id + " ended " + status + " after " +
                                 std::to_string(w.size()) + " wakes");
        }
    }
    // The routine fires once per minute slot; two items close together are a double fire.
    if (routine_times.empty()) {
        ++r.lost;
        r.problems.push_back("the routine never fired");
    }
    for (std::size_t i = 1; i < routine_times.size(); ++i) {
        if (routine_times[i] - routine_times[i - 1] < 20) {
            ++r.duplicates;
            r.problems.push_back("the routine fired twice within 20 s");
        }
    }

    // Knowledge items: indexed, and indexed once (one "indexed" line per item over every
    // embedder process).
    std::map<std::string, int> indexed;
    {
        static const std::regex kIndexed(R"re("msg":"indexed","item_id":"([0-9a-f-]{36})")re");
        const std::string log = logs(daemon::embedder);
        for (auto it = std::sregex_iterator(log.begin(), log.end(), kIndexed);
             it != std::sregex_iterator(); ++it) {
            ++indexed[(*it)[1].str()];
        }
    }
    auto know = c.exec("SELECT id::text, embedding_status FROM knowledge_items");
    for (int i = 0; i < know.size(); ++i) {
        const std::string id(know.text(i, 0)), status(know.text(i, 1));
        ++r.knowledge;
        if (status != "indexed") {
            ++r.lost;
            r.problems.push_back("knowledge item " + id + " is " + status);
        }
        if (indexed[id] > 1) {
            ++r.duplicates;
            r.problems.push_back("knowledge item " + id + " indexed " +
                                 std::to_string(indexed[id]) + " times");
        }
    }
    return r;
}

}  // namespace awp::test::drill
