// awp::http::router: what handlers rely on - every segment decoded once and checked, ":name"
// segments decoded, "*name" tails left encoded, 404 vs 405 with every allowed method, HEAD
// served by GET, a path that is not text refused before any route.
#include <catch2/catch.hpp>

#include <boost/asio/awaitable.hpp>

#include "awp/http/server.hpp"

namespace http_router_test {

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
    CHECK(m.bad_path.empty());

    // An empty ":name" segment or an extra segment does not match.
    CHECK(r.match("POST", "/api/agents//skills").h == nullptr);
    CHECK(r.match("POST", "/api/agents/a/skills/extra").h == nullptr);
    CHECK(r.match("GET", "/api/healthz").h == nullptr);
    CHECK(r.match("GET", "/api").h == nullptr);
}

TEST_CASE("router: a path that does not decode to text is refused whole, saying why",
          "[http][router]") {
    http::router r;
    r.add("GET", "/a/:id", answer_a);
    r.add("GET", "/files/*path", answer_b);
    struct bad {
        std::string path;
        std::string why;
    };
    const std::string too_long(http::router::kMaxSegmentBytes + 1, 'x');
    for (const auto& b : std::vector<bad>{
             {"/a/%zz", "path segment 2 has a malformed %-escape"},
             {"/a/%4", "path segment 2 has a malformed %-escape"},
             {"/a/x%", "path segment 2 has a malformed %-escape"},
             {"/a/%FF%FE", "path segment 2 is not UTF-8 once decoded"},
             {"/a/\xFF", "path segment 2 is not UTF-8 once decoded"},
             {"/a/%C0%AE%C0%AE", "path segment 2 is not UTF-8 once decoded"},  // overlong ".."
             {"/a/%ED%B0%80", "path segment 2 is not UTF-8 once decoded"},     // a surrogate
             {"/a/a%00b", "path segment 2 holds a NUL byte once decoded"},
             {"/a/" + too_long, "path segment 2 is longer than 1024 bytes once decoded"},
             // Tails are handed on encoded, but checked the same way.
             {"/files/ok/%FF", "path segment 3 is not UTF-8 once decoded"},
             {"/files/ok/%2e%2e/%C0%AF", "path segment 4 is not UTF-8 once decoded"},
             // And so is a path no route takes: it never reaches 404 or 405.
             {"/nowhere/%FF", "path segment 2 is not UTF-8 once decoded"},
             {"/%zz", "path segment 1 has a malformed %-escape"},
         }) {
        INFO(b.path.substr(0, 40));
        auto m = r.match("GET", b.path);
        CHECK(m.h == nullptr);
        CHECK(m.allow.empty());
        CHECK(m.params.empty());
        CHECK(m.bad_path == b.why);
    }
    // Exactly the limit, and multi-byte text at the limit, are fine.
    const std::string at_limit(http::router::kMaxSegmentBytes, 'y');
    auto edge = r.match("GET", "/a/" + at_limit);
    REQUIRE(edge.h != nullptr);
    CHECK(edge.params.at("id") == at_limit);
    std::string accents;
    for (std::size_t i = 0; i < http::router::kMaxSegmentBytes / 2; ++i) accents += "%C3%A9";
    auto text = r.match("GET", "/a/" + accents);
    REQUIRE(text.h != nullptr);
    CHECK(text.params.at("id").size() == http::router::kMaxSegmentBytes);
}

TEST_CASE("router: literals are compared decoded", "[http][router]") {
    http::router r;
    r.add("GET", "/api/agents/templates", answer_a);
    r.add("GET", "/api/agents/:slug", answer_b);
    CHECK(picked(r.match("GET", "/api/agents/%74emplates")) == "a");  // %74 is 't'
    auto m = r.match("GET", "/api/agents/%74%65%61%6D");
    CHECK(picked(m) == "b");
    CHECK(m.params.at("slug") == "team");
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

}  // namespace http_router_test
