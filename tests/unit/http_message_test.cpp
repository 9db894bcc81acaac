// awp::http message helpers: cookies, query decoding, escapes, the JSON error body, Set-Cookie,
// case-insensitive headers - the parsing every handler's input goes through.
#include <catch2/catch.hpp>

#include <rapidjson/document.h>

#include "awp/http/message.hpp"

namespace http_message_test {

namespace http = awp::http;

namespace {

http::request with_cookies(std::initializer_list<std::string> values) {
    http::request r;
    for (const auto& v : values) r.header.add("Cookie", v);
    return r;
}

}  // namespace

TEST_CASE("cookies: pairs split on semicolons, trimmed, quotes removed, first one wins",
          "[http][message]") {
    auto r = with_cookies({"a=1; b = two ;c=\"quoted value\"; =nameless; flag; a=second",
                           "b=later; awp-auth-token=tok.en.sig"});
    auto jar = r.cookies();
    CHECK(jar.at("a") == "1");  // the first a, not "second"
    CHECK(jar.at("b") == "two");
    CHECK(jar.at("c") == "quoted value");
    CHECK(jar.at("awp-auth-token") == "tok.en.sig");
    CHECK(jar.count("flag") == 0);  // no '=': not a cookie
    CHECK(jar.count("") == 0);
    CHECK(r.cookie("b") == "two");
    CHECK_FALSE(r.cookie("missing").has_value());
    // Values are taken as sent: no percent-decoding (the session parser decides).
    CHECK(with_cookies({"x=a%20b"}).cookie("x") == "a%20b");
    // The header name is case-insensitive.
    http::request lower;
    lower.header.add("cookie", "k=v");
    CHECK(lower.cookie("k") == "v");
    CHECK(http::request{}.cookies().empty());
}

TEST_CASE("form bodies: percent-decoded, '+' is a space, bad escapes dropped", "[http][message]") {
    auto q = http::parse_query("a=1&b=x+y%2Bz&&c&a=2&bad=%zz&d=%E2%9C%93&e=");
    std::vector<std::pair<std::string, std::string>> expect = {
        {"a", "1"}, {"b", "x y+z"}, {"c", ""}, {"a", "2"}, {"d", "\xE2\x9C\x93"}, {"e", ""}};
    CHECK(q == expect);
}

TEST_CASE("query: decoded once and strictly, first wins, the refusal names the parameter",
          "[http][message]") {
    auto q = http::decode_query("a=1&b=x+y%2Bz&&c&a=2&d=%E2%9C%93&e=");
    CHECK(q.error.empty());
    std::vector<std::pair<std::string, std::string>> expect = {
        {"a", "1"}, {"b", "x y+z"}, {"c", ""}, {"a", "2"}, {"d", "\xE2\x9C\x93"}, {"e", ""}};
    CHECK(q.params == expect);

    http::request r;
    r.query_params =
        http::decode_query("workspaceId=abc%2Ddef&workspaceId=other&path=a%2Fb").params;
    CHECK(r.query_param("workspaceId") == "abc-def");
    CHECK(r.query_param("path") == "a/b");
    CHECK_FALSE(r.query_param("nope").has_value());
    CHECK_FALSE(http::request{}.query_param("a").has_value());

    // What a handler could not use is refused, never dropped or passed on.
    struct bad {
        const char* query;
        const char* error;
    };
    for (const auto& b : std::vector<bad>{
             {"a=1&bad=%zz", "query parameter 2 has a malformed %-escape"},
             {"x=%4", "query parameter 1 has a malformed %-escape"},
             {"%zz=1", "query parameter 1 has a malformed %-escape"},
             {"a=1&x=%FF%FE", "query parameter 2 (x) is not UTF-8"},
             {"x=\xff", "query parameter 1 (x) is not UTF-8"},
             {"x=%C0%AE", "query parameter 1 (x) is not UTF-8"},        // overlong '.'
             {"x=%ED%A0%80", "query parameter 1 (x) is not UTF-8"},     // a surrogate
             {"x=%F4%90%80%80", "query parameter 1 (x) is not UTF-8"},  // above U+10FFFF
             {"x=a%00b", "query parameter 1 (x) holds a NUL byte"},
             {"%FF=1", "query parameter 1's name is not UTF-8"},
         }) {
        INFO(b.query);
        auto d = http::decode_query(b.query);
        CHECK(d.error == b.error);
    }
    // A long name is not repeated back.
    auto long_name = http::decode_query(std::string(100, 'n') + "=%FF");
    CHECK(long_name.error == "query parameter 1 is not UTF-8");
}

TEST_CASE("text_problem: UTF-8 without NUL is text", "[http][message]") {
    CHECK(http::text_problem("").empty());
    CHECK(http::text_problem("caf\xC3\xA9 \xF0\x9F\x98\x80").empty());
    CHECK(http::text_problem("\xFF") == "is not UTF-8");
    CHECK(http::text_problem("\xC0\xAF") == "is not UTF-8");  // overlong '/'
    CHECK(http::text_problem(std::string_view("a\0b", 3)) == "holds a NUL byte");
}

TEST_CASE("percent escapes: malformed ones are refused, encoding keeps unreserved only",
          "[http][message]") {
    CHECK(http::percent_decode("a%20b%2fc") == "a b/c");
    CHECK(http::percent_decode("a+b") == "a+b");
    CHECK(http::percent_decode("a+b", true) == "a b");
    CHECK(http::percent_decode("%00") == std::string(1, '\0'));
    for (const std::string bad : {"%", "%2", "a%g0", "%%", "abc%"}) {
        INFO(bad);
        CHECK_FALSE(http::percent_decode(bad).has_value());
    }
    CHECK(http::percent_encode("a b/c?d=e&f~g.h_i-j") == "a%20b%2Fc%3Fd%3De%26f~g.h_i-j");
    CHECK(http::percent_encode("\xC3\xA9") == "%C3%A9");
    const std::string all = "x y/\x01\xFF%";
    CHECK(http::percent_decode(http::percent_encode(all)) == all);
}

TEST_CASE("error bodies are the one JSON shape, with hostile text escaped", "[http][message]") {
    auto r = http::response::error(422, "invalid_field", "say \"hi\"\\ \n\t\x01 </script>");
    CHECK(r.status == 422);
    CHECK(r.header.get("content-type") == "application/json");
    rapidjson::Document d;
    d.Parse(r.body.c_str(), r.body.size());
    REQUIRE_FALSE(d.HasParseError());
    REQUIRE(d.IsObject());
    CHECK(d.MemberCount() == 1);
    CHECK(std::string(d["error"]["code"].GetString()) == "invalid_field");
    CHECK(std::string(d["error"]["message"].GetString()) == "say \"hi\"\\ \n\t\x01 </script>");
    CHECK(r.body.find('\n') == std::string::npos);  // control characters are escaped

    CHECK(http::json_quote("a\"b") == R"("a\"b")");
    CHECK(http::json_quote(std::string("\x1f", 1)) == R"("\u001f")");

    auto j = http::response::json(201, R"({"ok":true})");
    CHECK(j.status == 201);
    CHECK(j.body == R"({"ok":true})");
    auto b = http::response::bytes(200, "image/jpeg", "\xFF\xD8");
    CHECK(b.header.get("Content-Type") == "image/jpeg");
}

TEST_CASE("headers: case-insensitive lookups, set replaces every field, erase", "[http][message]") {
    http::headers h;
    h.add("Set-Cookie", "a=1");
    h.add("set-cookie", "b=2");
    h.add("X-One", "1");
    CHECK(h.get("SET-COOKIE") == "a=1");  // the first of that name
    CHECK(h.has("x-one"));
    h.set("SET-cookie", "c=3");
    CHECK(h.get("set-cookie") == "c=3");
    std::size_t n = 0;
    for (const auto& f : h.fields())
        n += f.second == "c=3" || f.second == "a=1" || f.second == "b=2";
    CHECK(n == 1);
    h.erase("x-ONE");
    CHECK_FALSE(h.has("X-One"));
}

TEST_CASE("media type: parameters dropped, lower-cased, empty without Content-Type",
          "[http][message]") {
    http::request r;
    CHECK(r.media_type().empty());
    r.header.add("Content-Type", " Application/JSON ; charset=UTF-8");
    CHECK(r.media_type() == "application/json");
}

TEST_CASE("Set-Cookie values carry the attributes asked for", "[http][message]") {
    CHECK(http::set_cookie("awp-auth-token", "t") ==
          "awp-auth-token=t; Path=/; HttpOnly; SameSite=Lax");
    http::cookie_options o;
    o.max_age = 0;
    o.secure = true;
    o.http_only = false;
    o.path = "/api/sources/oauth/x";
    o.same_site = "Strict";
    CHECK(http::set_cookie("s", "", o) ==
          "s=; Path=/api/sources/oauth/x; Max-Age=0; Secure; SameSite=Strict");
}

TEST_CASE("reason phrases of the statuses the services answer", "[http][message]") {
    CHECK(http::reason(200) == "OK");
    CHECK(http::reason(405) == "Method Not Allowed");
    CHECK(http::reason(413) == "Content Too Large");
    CHECK(http::reason(431) == "Request Header Fields Too Large");
    CHECK(http::reason(504) == "Gateway Timeout");
    CHECK(http::reason(299) == "Unknown");
}

}  // namespace http_message_test
