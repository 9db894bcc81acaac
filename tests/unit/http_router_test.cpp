// awp::http::router: what handlers rely on - ":name" segments decoded, "*name" tails left
// encoded, 404 vs 405 with every allowed method, HEAD served by GET, bad escapes flagged.
#include <catch2/catch.hpp>

#include <boost/asio/awaitable.hpp>

#include "awp/http/server.hpp"

namespace http = awp::http;
namespace net = boost::asio;

namespace {

net::awaitable<http::response> answer_a(http::request) { co_return http::response::json(200, "a"); }
net::awaitable<http::response> answer_b(http::request) { co_return http::response::json(200, "b"); }

using handler_fn = net::awaitable<http::response> (*)(http::request);

/// Which handler a match picked: "a", "b" or "" (none).
std::string picked(const http::router::match_result& m) {
    if (!m.h) return "";
    const auto* fn = m.h->target<handler_fn>();
    if (fn && *fn == &answer_a) return "a";
    if (fn && *fn == &answer_b) return "b";
    return "?";
}

}  // namespace

TEST_CASE("router: literal paths, ':name' decoded once, per-route options", "[http][router]") {
    http::router r;
    http::route_options big;
    big.body_limit = 1234;
    r.add("GET", "/api/health", answer_a);
    r.add("POST", "/api/agents/:slug/skills", answer_b, big);

    auto m = r.match("GET", "/api/health");
    REQUIRE(m.h != nullptr);
    CHECK(m.options.body_limit == http::route_options{}.body_limit);
    CHECK(m.params.empty());

    m = r.match("POST", "/api/agents/my%20agent%2Fx/skills");
    REQUIRE(m.h != nullptr);
    CHECK(m.params.at("slug") == "my agent/x");  // decoded, %2F stays inside the segment
    CHECK(m.options.body_limit == 1234);
    CHECK_FALSE(m.bad_encoding);

    // An empty ":name" segment or an extra segment does not match.
    CHECK(r.match("POST", "/api/agents//skills").h == nullptr);
    CHECK(r.match("POST", "/api/agents/a/skills/extra").h == nullptr);
    CHECK(r.match("GET", "/api/healthz").h == nullptr);
    CHECK(r.match("GET", "/api").h == nullptr);
}

TEST_CASE("router: a malformed escape in ':name' is flagged, not decoded", "[http][router]") {
    http::router r;
    r.add("GET", "/a/:id", answer_a);
    for (const std::string p : {"/a/%zz", "/a/%4", "/a/x%"}) {
        INFO(p);
        auto m = r.match("GET", p);
        REQUIRE(m.h != nullptr);
        CHECK(m.bad_encoding);
        CHECK(m.params.count("id") == 0);
    }
}

TEST_CASE("router: '*name' takes one or more segments and leaves them encoded", "[http][router]") {
    http::router r;
    r.add("GET", "/files", answer_a);
    r.add("GET", "/files/*path", answer_b);

    auto tail = r.match("GET", "/files/docs/a%20b/..%2Fc.md");
    CHECK(picked(tail) == "b");
    CHECK(tail.params.at("path") == "docs/a%20b/..%2Fc.md");  // the handler decodes per segment

    auto one = r.match("GET", "/files/x");
    REQUIRE(one.h != nullptr);
    CHECK(one.params.at("path") == "x");

    auto bare = r.match("GET", "/files");
    CHECK(picked(bare) == "a");
    CHECK(bare.params.empty());

    // "/files/" has an empty tail: the wildcard needs a segment.
    CHECK(r.match("GET", "/files/").h == nullptr);
}

TEST_CASE("router: 404 has no Allow, 405 lists every method of the path once", "[http][router]") {
    http::router r;
    r.add("GET", "/api/workspaces", answer_a);
    r.add("POST", "/api/workspaces", answer_b);
    r.add(std::vector<std::string>{"GET", "POST"}, "/api/workspaces/switch", answer_a);
    r.add("DELETE", "/api/things/:id", answer_a);
    r.add("PUT", "/api/things/:id", answer_b);
    r.add("PUT", "/api/things/:id", answer_b);  // a duplicate must not repeat in Allow

    auto none = r.match("GET", "/api/nothing");
    CHECK(none.h == nullptr);
    CHECK(none.allow.empty());

    auto wrong = r.match("PATCH", "/api/workspaces");
    CHECK(wrong.h == nullptr);
    CHECK(wrong.allow == std::vector<std::string>{"GET", "POST"});

    auto things = r.match("GET", "/api/things/7");
    CHECK(things.h == nullptr);
    CHECK(things.allow == std::vector<std::string>{"DELETE", "PUT"});

    // The method list form registers each method; both resolve, DELETE is 405.
    CHECK(r.match("GET", "/api/workspaces/switch").h != nullptr);
    CHECK(r.match("POST", "/api/workspaces/switch").h != nullptr);
    CHECK(r.match("DELETE", "/api/workspaces/switch").allow ==
          std::vector<std::string>{"GET", "POST"});

    // A later route with the right method wins over an earlier one with another method, and
    // the result carries no Allow list then.
    auto post = r.match("POST", "/api/workspaces");
    CHECK(picked(post) == "b");
    CHECK(post.allow.empty());
}

TEST_CASE("router: HEAD is served by GET routes, never by other methods", "[http][router]") {
    http::router r;
    r.add("GET", "/page", answer_a);
    r.add("POST", "/form", answer_b);
    CHECK(r.match("HEAD", "/page").h != nullptr);
    auto form = r.match("HEAD", "/form");
    CHECK(form.h == nullptr);
    CHECK(form.allow == std::vector<std::string>{"POST"});
}

TEST_CASE("router: the first matching route wins", "[http][router]") {
    http::router r;
    r.add("GET", "/api/agents/templates", answer_a);
    r.add("GET", "/api/agents/:slug", answer_b);
    CHECK(picked(r.match("GET", "/api/agents/templates")) == "a");
    auto m = r.match("GET", "/api/agents/bob");
    CHECK(picked(m) == "b");
    CHECK(m.params.at("slug") == "bob");
}
