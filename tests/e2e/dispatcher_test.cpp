// awp-inbox-dispatcher as a real process against a real database and the fake runtime
// (tests/fakes/fake-agent-wake): wakes, retries and dead letters, fairness and bounds, paused
// agents, gateway isolation, timeouts, drain, kill -9 and a Postgres restart.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "awp/core/pg.hpp"
#include "support/child.hpp"
#include "support/net.hpp"
#include "support/private_cluster.hpp"
#include "support/secret_scan.hpp"
#include "support/test_db.hpp"

namespace dispatcher_test {

namespace pg = awp::core::pg;
namespace fs = std::filesystem;
using awp::test::child;
using namespace std::chrono_literals;

namespace {

const std::string kDispatcher = std::string(AWP_BIN_DIR) + "/awp-inbox-dispatcher";
const std::string kFake = std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-agent-wake";
constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    REQUIRE(r.size() == 1);
    return r.is_null(0, 0) ? std::string("<null>") : std::string(r.text(0, 0));
}
long count(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    return std::stol(one(c, sql, p));
}

template <class P>
bool eventually(P pred, std::chrono::milliseconds timeout, std::chrono::milliseconds step = 50ms) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) return true;
        std::this_thread::sleep_for(step);
    }
    return pred();
}

// A scratch folder for the fake runtime: its log, argv files, per-agent control files.
struct fake_runtime {
    fs::path dir;
    fake_runtime() {
        dir = fs::temp_directory_path() / awp::test::random_name("awp-wake-");
        fs::create_directories(dir / "argv");
        fs::create_directories(dir / "control");
    }
    ~fake_runtime() {
        // Whatever a hanging wake left behind (kill -9 tests).
        std::ifstream pids(dir / "pids");
        for (long a, b; pids >> a >> b;) {
            ::kill(static_cast<pid_t>(-a), SIGKILL);
            ::kill(static_cast<pid_t>(a), SIGKILL);
            ::kill(static_cast<pid_t>(b), SIGKILL);
        }
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    std::map<std::string, std::string> env() const {
        return {{"AGENT_RUNTIME", kFake},
                {"FAKE_WAKE_LOG", (dir / "log").string()},
                {"FAKE_WAKE_ARGV_DIR", (dir / "argv").string()},
                {"FAKE_WAKE_CONTROL", (dir / "control").string()},
                {"FAKE_WAKE_PIDS", (dir / "pids").string()},
                {"AWP_CHILD_ENV_ALLOW", "FAKE_*"}};
    }
    void set(const std::string& agent, const std::string& what, const std::string& value) const {
        std::ofstream(dir / "control" / (agent + "." + what)) << value;
    }
    void clear(const std::string& agent, const std::string& what) const {
        fs::remove(dir / "control" / (agent + "." + what));
    }
    struct event {
        std::string kind;
        long long ns = 0;
        long pid = 0;
        std::string agent;
    };
    std::vector<event> events() const {
        std::vector<event> out;
        std::ifstream in(dir / "log");
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream s(line);
            event e;
            s >> e.kind >> e.ns >> e.pid >> e.agent;
            if (!e.kind.empty()) out.push_back(e);
        }
        return out;
    }
    int starts(const std::string& agent = "") const {
        int n = 0;
        for (const auto& e : events())
            n += e.kind == "start" && (agent.empty() || e.agent == agent);
        return n;
    }
    // argv of every wake of an agent, in order.
    std::vector<std::vector<std::string>> argvs(const std::string& agent) const {
        std::vector<fs::path> files;
        for (const auto& f : fs::directory_iterator(dir / "argv")) {
            if (f.path().filename().string().rfind(agent + ".", 0) == 0 &&
                f.path().extension() == ".argv") {
                files.push_back(f.path());
            }
        }
        std::sort(files.begin(), files.end());
        std::vector<std::vector<std::string>> out;
        for (const auto& f : files) {
            std::ifstream in(f, std::ios::binary);
            std::vector<std::string> argv;
            std::string a;
            while (std::getline(in, a, '\0')) argv.push_back(a);
            out.push_back(argv);
        }
        return out;
    }
};

struct world {
    awp::test::scoped_database db;
    pg::connection admin = db.admin();
    std::string gateway_slug = "gw-a";
    std::string gateway_id;
    world() {
        gateway_id =
            one(admin,
                "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, "
                "'ready') RETURNING id",
                {kTenant, gateway_slug});
    }
    std::string gateway(const std::string& slug) {
        return one(admin,
                   "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, "
                   "'ready') RETURNING id",
                   {kTenant, slug});
    }
    std::string agent(const std::string& slug, std::optional<std::string> gw = std::nullopt,
                      const std::string& status = "ready") {
        return one(
            admin,
            "INSERT INTO agents (tenant_id, name, slug, gateway_id, status, model, thinking) "
            "VALUES ($1, $2, $2, $3, $4::agent_status, 'prov/model-1', 'medium') RETURNING id",
            {kTenant, slug, gw ? *gw : gateway_id, status});
    }
    std::string item(const std::string& agent_id, const std::string& key,
                     const std::string& summary = "hello") {
        return one(admin,
                   "SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', $3, 'title', $4, "
                   "'{\"k\":\"v\"}')",
                   {kTenant, agent_id, key, summary});
    }
    std::string status(const std::string& item_id) {
        return one(admin, "SELECT status::text FROM agent_inbox_items WHERE id = $1", {item_id});
    }
    std::unique_ptr<child> dispatcher(const fake_runtime& rt,
                                      std::map<std::string, std::string> extra = {}) {
        auto env = rt.env();
        env["DATABASE_URL"] = db.gateway_dsn(gateway_slug);
        env["GATEWAY_ID"] = gateway_slug;
        env["SAFETY_POLL"] = "0.5";
        env["HEARTBEAT_INTERVAL"] = "0.5";
        for (auto& [k, v] : extra) env[k] = v;
        auto d = std::make_unique<child>(std::vector<std::string>{kDispatcher}, env);
        REQUIRE(d->wait_for_log("\"msg\":\"ready\"", 10s));
        return d;
    }
};

bool contains(const std::vector<std::string>& argv, const std::string& s) {
    return std::find(argv.begin(), argv.end(), s) != argv.end();
}

}  // namespace

TEST_CASE("a woken agent holds none of the dispatcher's secrets", "[dispatcher][e2e][security]") {
    world w;
    fake_runtime rt;
    const auto ada = w.agent("ada");
    const auto secrets = awp::test::daemon_secrets();
    auto d = w.dispatcher(rt, secrets);
    const auto item = w.item(ada, "env-check");
    REQUIRE(eventually([&] { return w.status(item) == "done"; }, 10s));
    int scanned = 0;
    const auto leaks = awp::test::leaked_secrets(rt.dir / "argv", {".environ", ".status"}, secrets,
                                                 w.db.gateway_dsn(w.gateway_slug), &scanned);
    CHECK(scanned >= 2);
    INFO((leaks.empty() ? std::string() : leaks.front()));
    CHECK(leaks.empty());
}

TEST_CASE("an assigned task wakes its agent once, with its blockers, and completes the item",
          "[dispatcher][e2e]") {
    world w;
    fake_runtime rt;
    const auto ada = w.agent("ada");
    auto d = w.dispatcher(rt);
    const auto blocker = one(
        w.admin, "INSERT INTO tasks (tenant_id, title) VALUES ($1, 'Get the data') RETURNING id",
        {kTenant});
    const auto done_blocker = one(
        w.admin,
        "INSERT INTO tasks (tenant_id, title, status) VALUES ($1, 'Old work', 'done') RETURNING id",
        {kTenant});
    const auto task = one(w.admin,
                          "INSERT INTO tasks (tenant_id, title, thinking_override) VALUES ($1, "
                          "'Write the report', 'high') RETURNING id",
                          {kTenant});
    w.admin.exec(
        "INSERT INTO task_relations (tenant_id, source_task_id, target_task_id, relation_type) "
        "VALUES ($1, $2, $3, 'blocked_by'), ($1, $2, $4, 'blocked_by')",
        {kTenant, task, blocker, done_blocker});
    w.admin.exec("UPDATE tasks SET assignee_agent_id = $1 WHERE id = $2", {ada, task});
    const auto item = one(w.admin, "SELECT id FROM agent_inbox_items WHERE task_id = $1", {task});

    REQUIRE(eventually([&] { return w.status(item) == "done"; }, 10s));
    std::this_thread::sleep_for(700ms);  // a second wake would show up by now
    CHECK(rt.starts("ada") == 1);
    CHECK(count(w.admin, "SELECT attempts FROM agent_inbox_items WHERE id = $1", {item}) == 1);
    const auto argvs = rt.argvs("ada");
    REQUIRE(argvs.size() == 1);
    const auto& a = argvs[0];
    REQUIRE(a.size() >= 6);
    CHECK(a[1] == "agent");
    CHECK(a[2] == "--agent");
    CHECK(a[3] == "ada");
    CHECK(a[4] == "--message");
    CHECK(a[5].find("Task assigned: Write the report") != std::string::npos);
    CHECK(a[5].find("1 unresolved blocker(s): \"Get the data\" (todo)") != std::string::npos);
    CHECK(a[5].find("Old work") == std::string::npos);
    CHECK(contains(a, "--model"));
    CHECK(contains(a, "prov/model-1"));
    CHECK(contains(a, "--thinking"));
    CHECK(contains(a, "high"));  // the task's override beats the agent's "medium"
    CHECK(d->log().find("\"msg\":\"item completed\"") != std::string::npos);
    d->signal(SIGTERM);
    CHECK(d->wait(10s) == std::optional<int>(0));
}

TEST_CASE("a failing wake is retried after its back-off and ends dead_letter after 3 attempts",
          "[dispatcher][e2e]") {
    world w;
    fake_runtime rt;
    const auto bob = w.agent("bob");
    rt.set("bob", "exit", "7");
    rt.set("bob", "stderr", "model refused; api_key=sk-live-abcdefghijkl");
    auto d = w.dispatcher(rt, {{"SAFETY_POLL", "60"}});
    const auto item = w.item(bob, "fail-1");

    REQUIRE(eventually([&] { return w.status(item) == "failed"; }, 10s));
    // The back-off comes from the schema (30 s after the first failure): no second wake yet.
    CHECK(count(w.admin,
                "SELECT round(extract(epoch FROM not_before - failed_at))::int FROM "
                "agent_inbox_items WHERE id = $1",
                {item}) == 30);
    const auto err = one(w.admin, "SELECT last_error FROM agent_inbox_items WHERE id = $1", {item});
    CHECK(err.find("wake exited with code 7") != std::string::npos);
    CHECK(err.find("model refused") != std::string::npos);
    CHECK(err.find("abcdefghijkl") == std::string::npos);
    std::this_thread::sleep_for(1500ms);
    CHECK(rt.starts("bob") == 1);

    // The back-off is moved closer (as if time had passed) and the dispatcher hears of the
    // gateway once (an empty NOTIFY: nothing leasable yet). From then on only its own timer for
    // the end of the back-off can wake it: the safety poll is 60 s here.
    w.admin.exec(
        "UPDATE agent_inbox_items SET not_before = now() + interval '1.5 seconds' WHERE id = $1",
        {item});
    std::string channel = "awp_inbox_" + w.gateway_id;
    channel.erase(std::remove(channel.begin(), channel.end(), '-'), channel.end());
    w.admin.exec("SELECT pg_notify($1, '')", {channel});
    std::this_thread::sleep_for(500ms);
    CHECK(rt.starts("bob") == 1);
    REQUIRE(eventually([&] { return rt.starts("bob") == 2; }, 8s));
    REQUIRE(eventually([&] { return w.status(item) == "failed"; }, 5s));
    CHECK(count(w.admin, "SELECT attempts FROM agent_inbox_items WHERE id = $1", {item}) == 2);

    // Back-off moved to now: the update's NOTIFY wakes it at once.
    w.admin.exec("UPDATE agent_inbox_items SET not_before = now() WHERE id = $1", {item});
    REQUIRE(eventually([&] { return w.status(item) == "dead_letter"; }, 8s));
    CHECK(count(w.admin, "SELECT attempts FROM agent_inbox_items WHERE id = $1", {item}) == 3);
    std::this_thread::sleep_for(1s);
    CHECK(rt.starts("bob") == 3);
}

TEST_CASE("a failed wake's retry comes when its back-off ends, with no NOTIFY and no safety poll",
          "[dispatcher][e2e][slow]") {
    world w;
    fake_runtime rt;
    const auto cy = w.agent("cy");
    rt.set("cy", "exit", "3");
    auto d = w.dispatcher(rt, {{"SAFETY_POLL", "120"}});
    const auto item = w.item(cy, "late-1");
    REQUIRE(eventually([&] { return w.status(item) == "failed"; }, 10s));
    rt.clear("cy", "exit");
    // The schema's first back-off is 30 s and nothing is notified when it ends; the safety poll
    // is 120 s away. Only the dispatcher's own timer, set by a scan after the failure, brings the
    // retry on time.
    REQUIRE(eventually([&] { return w.status(item) == "done"; }, 45s, 200ms));
    CHECK(rt.starts("cy") == 2);
    CHECK(count(w.admin, "SELECT attempts FROM agent_inbox_items WHERE id = $1", {item}) == 2);
}

TEST_CASE("200 items for 20 agents: one wake per agent at a time, MAX_CONCURRENT at most, fair",
          "[dispatcher][e2e]") {
    world w;
    fake_runtime rt;
    std::vector<std::string> agents;
    for (int i = 0; i < 20; ++i) agents.push_back(w.agent("agent-" + std::to_string(i)));
    auto d = w.dispatcher(rt, {{"MAX_CONCURRENT", "4"}, {"FAKE_WAKE_SLEEP", "0.03"}});
    // Agent 0 gets its ten items first, so "oldest first" alone would serve it ten times in a
    // row; fairness means the first twenty wakes reach all twenty agents.
    w.admin.exec(
        "SELECT awp_enqueue_inbox_item($1, a.id, 'heartbeat', 'k-' || a.slug || '-' || n, 't', "
        "'s') "
        "FROM agents a, generate_series(1, 10) n WHERE a.gateway_id = $2 ORDER BY a.slug = "
        "'agent-0' DESC, n, a.slug",
        {kTenant, w.gateway_id});
    REQUIRE(count(w.admin, "SELECT count(*) FROM agent_inbox_items") == 200);

    REQUIRE(eventually(
        [&] {
            return count(w.admin, "SELECT count(*) FROM agent_inbox_items WHERE status = 'done'") ==
                   200;
        },
        90s, 200ms));
    const auto ev = rt.events();
    std::map<std::string, long long> open_since;
    int live = 0, max_live = 0, starts = 0;
    bool overlap = false;
    std::vector<std::pair<long long, int>> edges;
    for (const auto& e : ev) {
        if (e.kind == "start") {
            ++starts;
            edges.push_back({e.ns, +1});
        } else if (e.kind == "end") {
            edges.push_back({e.ns, -1});
        }
    }
    std::sort(edges.begin(), edges.end());  // at equal times, ends (-1) before starts
    for (const auto& [t, delta] : edges) {
        live += delta;
        max_live = std::max(max_live, live);
    }
    // Per agent: its wakes never overlap.
    std::map<std::string, std::vector<std::pair<long long, long long>>> spans;
    std::map<long, long long> start_of;
    for (const auto& e : ev) {
        if (e.kind == "start") start_of[e.pid] = e.ns;
        if (e.kind == "end") spans[e.agent].push_back({start_of[e.pid], e.ns});
    }
    for (auto& [agent, s] : spans) {
        std::sort(s.begin(), s.end());
        for (std::size_t i = 1; i < s.size(); ++i)
            overlap = overlap || s[i].first < s[i - 1].second;
    }
    CHECK(starts == 200);
    CHECK(max_live <= 4);
    CHECK(max_live >= 2);  // it did run in parallel
    CHECK_FALSE(overlap);
    std::set<std::string> first20;
    for (const auto& e : ev) {
        if (e.kind == "start" && first20.size() < 20) first20.insert(e.agent);
        if (e.kind == "start" && --starts < 180) break;
    }
    CHECK(first20.size() == 20);
}

TEST_CASE("an agent's items are leased once each, and a later item still wakes it",
          "[dispatcher][e2e]") {
    world w;
    fake_runtime rt;
    // Every call of lease_inbox_item, from whichever session: the database's function statistics.
    w.admin.exec(
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET track_functions = ''pl''', "
        "current_database()); END $$");
    const auto leases = [&] {
        return count(w.admin,
                     "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions "
                     "WHERE funcname = 'lease_inbox_item'");
    };
    // Each backend reports its counts once it has been idle a second: wait for `n`, then long
    // enough for any further call to show.
    const auto settled_leases = [&](long n) {
        eventually([&] { return leases() >= n; }, 10s, 100ms);
        std::this_thread::sleep_for(2500ms);  // five safety polls: they scan, none may lease
        return leases();
    };
    const auto ann = w.agent("ann");
    w.admin.exec(
        "SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', 'once-' || n, 't', 's') "
        "FROM generate_series(1, 3) n",
        {kTenant, ann});
    auto d = w.dispatcher(rt, {{"FAKE_WAKE_SLEEP", "0.2"}});
    REQUIRE(eventually(
        [&] {
            return count(w.admin, "SELECT count(*) FROM agent_inbox_items WHERE status = 'done'") ==
                   3;
        },
        20s));
    // One lease per item, one at a time for the agent; none after the last (the scan counted
    // three), where it used to look once more and find nothing.
    CHECK(rt.starts("ann") == 3);
    CHECK(settled_leases(3) == 3);

    // An item that arrives while the agent's wake runs is leased when it ends: its wake-up
    // makes the dispatcher scan again.
    const auto first = w.item(ann, "later-1");
    REQUIRE(eventually([&] { return rt.starts("ann") == 4; }, 10s, 20ms));
    const auto second = w.item(ann, "later-2");
    REQUIRE(eventually([&] { return w.status(second) == "done"; }, 10s));
    CHECK(w.status(first) == "done");
    CHECK(rt.starts("ann") == 5);
    CHECK(settled_leases(5) == 5);
}

TEST_CASE("a paused agent is not woken until it is ready, its items wait", "[dispatcher][e2e]") {
    world w;
    fake_runtime rt;
    const auto cat = w.agent("cat", std::nullopt, "paused");
    const auto dog = w.agent("dog", std::nullopt, "hibernating");
    const auto eel = w.agent("eel", std::nullopt, "error");
    auto d = w.dispatcher(rt);
    const auto i1 = w.item(cat, "p-1");
    const auto i2 = w.item(dog, "p-2");
    const auto i3 = w.item(eel, "p-3");
    std::this_thread::sleep_for(2500ms);  // five safety polls
    CHECK(rt.starts() == 0);
    CHECK(w.status(i1) == "pending");
    CHECK(w.status(i2) == "pending");
    CHECK(w.status(i3) == "pending");
    w.admin.exec("UPDATE agents SET status = 'ready' WHERE id = $1", {cat});
    REQUIRE(eventually([&] { return w.status(i1) == "done"; }, 5s));
    CHECK(rt.starts("cat") == 1);
    CHECK(rt.starts("dog") == 0);
    CHECK(w.status(i2) == "pending");
}

TEST_CASE("an item for another gateway's agent is never touched", "[dispatcher][e2e]") {
    world w;
    fake_runtime rt;
    const auto other_gw = w.gateway("gw-b");
    const auto mine = w.agent("mine");
    const auto theirs = w.agent("theirs", other_gw);
    auto d = w.dispatcher(rt);
    const auto t_item = w.item(theirs, "o-1");
    const auto m_item = w.item(mine, "o-2");
    REQUIRE(eventually([&] { return w.status(m_item) == "done"; }, 10s));
    std::this_thread::sleep_for(1500ms);
    CHECK(w.status(t_item) == "pending");
    CHECK(count(w.admin, "SELECT attempts FROM agent_inbox_items WHERE id = $1", {t_item}) == 0);
    CHECK(rt.starts("theirs") == 0);
}

TEST_CASE("a wake past its timeout is killed with its whole process group and failed",
          "[dispatcher][e2e]") {
    world w;
    fake_runtime rt;
    const auto hal = w.agent("hal");
    rt.set("hal", "hang", "1");
    auto d = w.dispatcher(rt, {{"WAKE_TIMEOUT", "1"}, {"WAKE_KILL_GRACE", "0.5"}});
    const auto item = w.item(hal, "t-1");
    REQUIRE(eventually([&] { return w.status(item) == "failed"; }, 10s));
    CHECK(one(w.admin, "SELECT last_error FROM agent_inbox_items WHERE id = $1", {item})
              .find("timed out after 1 s") != std::string::npos);
    std::ifstream pids(rt.dir / "pids");
    long p = 0, grandchild = 0;
    REQUIRE(pids >> p >> grandchild);
    CHECK(eventually([&] { return ::kill(static_cast<pid_t>(grandchild), 0) != 0; }, 3s));
}

TEST_CASE("SIGTERM lets the wake in flight finish and records it", "[dispatcher][e2e]") {
    world w;
    fake_runtime rt;
    const auto ida = w.agent("ida");
    rt.set("ida", "sleep", "1");
    auto d = w.dispatcher(rt, {{"DRAIN_TIMEOUT", "10"}});
    const auto item = w.item(ida, "s-1");
    REQUIRE(d->wait_for_log("wake started", 5s));
    d->signal(SIGTERM);
    const auto code = d->wait(10s);
    REQUIRE(code.has_value());
    CHECK(*code == 0);
    CHECK(w.status(item) == "done");
}

TEST_CASE("kill -9 mid-wake: the lease expires, the attempt counts, a restart retries the item",
          "[dispatcher][e2e]") {
    world w;
    fake_runtime rt;
    const auto kim = w.agent("kim");
    rt.set("kim", "hang", "1");
    const std::map<std::string, std::string> fast{
        {"WAKE_TIMEOUT", "2"}, {"WAKE_KILL_GRACE", "0.5"}, {"LEASE_SECONDS", "8"}};
    auto d = w.dispatcher(rt, fast);
    const auto item = w.item(kim, "k-1");
    REQUIRE(eventually([&] { return rt.events().size() >= 2; }, 5s));  // start + hang
    REQUIRE(w.status(item) == "leased");
    d->signal(SIGKILL);
    d->wait(5s);
    d.reset();
    rt.clear("kim", "hang");

    auto d2 = w.dispatcher(rt, fast);
    // The lease (8 s) runs out; the restarted dispatcher's timer reaps it: a failed attempt.
    REQUIRE(eventually([&] { return w.status(item) == "failed"; }, 15s));
    CHECK(count(w.admin, "SELECT attempts FROM agent_inbox_items WHERE id = $1", {item}) == 1);
    CHECK(one(w.admin, "SELECT last_error FROM agent_inbox_items WHERE id = $1", {item})
              .find("lease expired") != std::string::npos);
    // Back-off over: retried once more and done.
    w.admin.exec("UPDATE agent_inbox_items SET not_before = now() WHERE id = $1", {item});
    REQUIRE(eventually([&] { return w.status(item) == "done"; }, 10s));
    CHECK(count(w.admin, "SELECT attempts FROM agent_inbox_items WHERE id = $1", {item}) == 2);
    CHECK(rt.starts("kim") == 2);
}

TEST_CASE("a Postgres restart under load: every item still ends done",
          "[dispatcher][e2e][restart]") {
    awp::test::private_cluster pgc(true);
    auto admin = pg::connection::connect(pgc.dsn());
    const auto gw = one(admin,
                        "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, 'gw-r', "
                        "'r', 'ready') RETURNING id",
                        {kTenant});
    admin.exec(
        "INSERT INTO agents (tenant_id, name, slug, gateway_id) SELECT $1, 'r' || n, 'r' || n, $2 "
        "FROM generate_series(1, 10) n",
        {kTenant, gw});
    fake_runtime rt;
    auto env = rt.env();
    env["DATABASE_URL"] = pgc.dsn();
    env["GATEWAY_ID"] = "gw-r";
    env["SAFETY_POLL"] = "0.5";
    env["MAX_CONCURRENT"] = "4";
    env["FAKE_WAKE_SLEEP"] = "0.1";
    env["WAKE_TIMEOUT"] = "2";
    env["WAKE_KILL_GRACE"] = "0.5";
    env["LEASE_SECONDS"] = "8";
    child d({kDispatcher}, env);
    REQUIRE(d.wait_for_log("\"msg\":\"ready\"", 10s));
    admin.exec(
        "SELECT awp_enqueue_inbox_item($1, a.id, 'heartbeat', 'r-' || a.slug || '-' || n, 't', "
        "'s') "
        "FROM agents a, generate_series(1, 10) n WHERE a.gateway_id = $2",
        {kTenant, gw});
    REQUIRE(eventually(
        [&] {
            return count(admin, "SELECT count(*) FROM agent_inbox_items WHERE status = 'done'") >=
                   20;
        },
        20s));
    pgc.restart();
    admin = pg::connection::connect(pgc.dsn());
    // Items whose lease or outcome got lost in the restart come back after their lease and a
    // back-off; the back-off is shortened here as time passing would.
    const bool all_done = eventually(
        [&] {
            try {
                admin.exec(
                    "UPDATE agent_inbox_items SET not_before = now() WHERE status = 'failed' AND "
                    "not_before > now()");
                return count(admin,
                             "SELECT count(*) FROM agent_inbox_items WHERE status = 'done'") == 100;
            } catch (const std::exception&) {
                admin = pg::connection::connect(pgc.dsn());
                return false;
            }
        },
        60s, 250ms);
    CHECK(all_done);
    CHECK(count(admin, "SELECT count(*) FROM agent_inbox_items WHERE status = 'dead_letter'") == 0);
    CHECK(d.running());
    d.signal(SIGTERM);
    CHECK(d.wait(10s) == std::optional<int>(0));
}

TEST_CASE("bad dispatcher configuration exits 78", "[dispatcher][e2e]") {
    {
        child d({kDispatcher}, {{"GATEWAY_ID", ""}, {"DATABASE_URL", "host=/nonexistent"}});
        CHECK(d.wait(5s) == std::optional<int>(78));
    }
    {
        child d({kDispatcher},
                {{"GATEWAY_ID", "x"}, {"WAKE_TIMEOUT", "100"}, {"LEASE_SECONDS", "50"}});
        CHECK(d.wait(5s) == std::optional<int>(78));
    }
    {
        world w;
        child d({kDispatcher},
                {{"GATEWAY_ID", "no-such-gateway"}, {"DATABASE_URL", w.db.daemon_dsn()}});
        CHECK(d.wait(10s) == std::optional<int>(78));
        CHECK(d.log().find("not found") != std::string::npos);
    }
}

TEST_CASE(
    "hostile inbox items (payloads, titles, overrides, agent slugs) never stop the dispatcher",
    "[dispatcher][e2e][security]") {
    world w;
    fake_runtime rt;
    // Agents whose slugs the runtime cannot take as ids ("MAIN" is its own default agent).
    const auto ada = w.agent("ada");
    const auto main_like = w.agent("MAIN");
    std::string deep = "{\"k\":";
    for (int i = 0; i < 60; ++i) deep += "[";
    for (int i = 0; i < 60; ++i) deep += "]";
    deep += "}";
    const std::vector<std::string> payloads{
        deep,
        R"({"model_override":123,"thinking_override":["high"]})",
        R"j({"model_override":"$(id)","thinking_override":"ultra"})j",
        R"({"thinking_override":"none","api_key":"sk-should-not-reach-the-agent-0000"})",
        "{\"k\":\"" + std::string(200000, 'x') + "\"}",
        R"({"k":"\u001b[31m\r\nline","n":1e308,"a":[null,true,{}]})",
    };
    auto d = w.dispatcher(rt);
    std::vector<std::string> items;
    int n = 0;
    for (const auto& p : payloads) {
        for (const auto& agent : {ada, main_like}) {
            items.push_back(one(w.admin,
                                "SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', $3, $4, $5, "
                                "$6::jsonb)",
                                {kTenant, agent, "hostile-" + std::to_string(n++),
                                 std::string("title \x01\x7f ") + std::string(3000, 'T'),
                                 std::string(50000, 'S'), p}));
        }
    }
    for (const auto& item : items) {
        std::string st, err;
        REQUIRE(eventually(
            [&] {
                auto r = w.admin.exec(
                    "SELECT status::text, coalesce(last_error, '') FROM agent_inbox_items WHERE id "
                    "= $1",
                    {item});
                st = r.text(0, 0);
                err = r.text(0, 1);
                return st == "done" || st == "dead_letter" || (st == "failed" && !err.empty());
            },
            30s));
        INFO(item << ": " << st << " / " << err);
        CHECK(err.size() <= 2100);
        CHECK(err.find("sk-should-not-reach") == std::string::npos);
    }
    // The runtime's reserved id is never woken as that agent: failed with the reason.
    CHECK(one(w.admin,
              "SELECT count(*) FROM agent_inbox_items WHERE agent_id = $1 AND last_error LIKE "
              "'%reserves for its default agent%'",
              {main_like}) != "0");
    CHECK(d->running());
    // Still serving: a plain item wakes its agent.
    const auto plain = w.item(ada, "after-the-flood");
    CHECK(eventually([&] { return w.status(plain) == "done"; }, 20s));
}

TEST_CASE(
    "the dispatcher woken through awp-wake: items are picked up by the relay's wake-ups, not "
    "the safety poll",
    "[dispatcher][e2e][wake][relay]") {
    world w;
    fake_runtime rt;
    const auto ada = w.agent("ada");
    const unsigned short port = awp::test::free_port();
    child relay({std::string(AWP_BIN_DIR) + "/awp-wake"},
                {{"DATABASE_URL", w.db.daemon_dsn()}, {"WAKE_PORT", std::to_string(port)}});
    REQUIRE(relay.wait_for_log("\"listening\"", 10s));
    auto d = w.dispatcher(rt, {{"SAFETY_POLL", "600"},
                               {"WAKE_URL", "http://127.0.0.1:" + std::to_string(port)},
                               {"LOG_LEVEL", "info"}});
    REQUIRE(d->wait_for_log("\"relay\":true", 10s));
    for (int i = 0; i < 3; ++i) {
        const auto item = w.item(ada, "relay-" + std::to_string(i));
        REQUIRE(eventually([&] { return w.status(item) == "done"; }, 5s));
    }
    CHECK(rt.starts("ada") == 3);
    // The dispatcher holds no LISTEN session: the relay's is the database's only one.
    CHECK(count(w.admin,
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
                "query ILIKE 'LISTEN%'",
                {}) == 1);
    d->signal(SIGTERM);
    CHECK(d->wait(10s) == std::optional<int>(0));
    relay.signal(SIGTERM);
    CHECK(relay.wait(10s) == std::optional<int>(0));
}

}  // namespace dispatcher_test
