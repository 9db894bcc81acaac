// The JSON entry point: limits hold while parsing, errors name where the text is wrong.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "awp/core/json.hpp"

namespace json_test {

namespace json = awp::core::json;

TEST_CASE("json::parse reads values and refuses anything after them", "[json]") {
    auto d = json::parse(R"({"a":[1,2,{"b":"c"}],"n":null})");
    REQUIRE(d.IsObject());
    CHECK(d["a"][2]["b"].GetString() == std::string("c"));
    CHECK(json::parse("  42 ").GetInt() == 42);
    CHECK_THROWS_WITH(json::parse("{} {}"), Catch::Contains("offset 3"));
    CHECK_THROWS_WITH(json::parse(""), Catch::Contains("offset 0"));
    CHECK_THROWS_WITH(json::parse(R"({"a":})"), Catch::Contains("offset 5"));
}

TEST_CASE("json::parse refuses an empty view that has no data pointer", "[json]") {
    // std::string_view{} has data() == nullptr: memchr must not see it (UB under UBSan)
    CHECK_THROWS_AS(json::parse(std::string_view{}), json::parse_error);
    CHECK_FALSE(json::try_parse(std::string_view{}).has_value());
}

TEST_CASE("json::parse refuses nesting beyond the limit without recursing", "[json]") {
    // Deep enough to overflow a recursive parser's stack (a coroutine's, certainly).
    const std::string deep(2'000'000, '[');
    try {
        (void)json::parse(deep, {4 << 20, 64});
        FAIL("a 2,000,000-deep array was accepted");
    } catch (const json::parse_error& e) {
        CHECK(std::string(e.what()).find("nested deeper than 64") != std::string::npos);
        CHECK(e.offset() == 64);
    }
    std::string ok;
    for (int i = 0; i < 64; ++i) ok += '[';
    for (int i = 0; i < 64; ++i) ok += ']';
    CHECK_NOTHROW(json::parse(ok));
    CHECK_THROWS_AS(json::parse("[" + ok + "]"), json::parse_error);
    std::string objects;
    for (int i = 0; i < 10; ++i) objects += R"({"k":)";
    objects += "1";
    for (int i = 0; i < 10; ++i) objects += '}';
    CHECK_NOTHROW(json::parse(objects, {1024, 10}));
    CHECK_THROWS_WITH(json::parse(objects, {1024, 9}), Catch::Contains("nested deeper than 9"));
}

TEST_CASE("json::parse refuses invalid UTF-8, NUL bytes and oversized text", "[json]") {
    CHECK_THROWS_WITH(json::parse("\"\xff\xfe\""), Catch::Contains("offset"));
    CHECK_THROWS_WITH(json::parse("\"\xc0\xaf\""), Catch::Contains("offset"));  // overlong '/'
    CHECK_THROWS_WITH(json::parse(std::string("{}\0{}", 5)), Catch::Contains("NUL byte"));
    CHECK_THROWS_WITH(json::parse(std::string("[\"a\0\"]", 6)), Catch::Contains("offset 3"));
    // An escaped NUL is a valid string character and keeps its length.
    auto d = json::parse(R"(["a\u0000b"])");
    CHECK(d[0].GetStringLength() == 3);
    CHECK_THROWS_WITH(json::parse(std::string(100, ' '), {99, 8}), Catch::Contains("larger"));
    CHECK_NOTHROW(json::parse(R"("é ✓ 😀")"));
}

TEST_CASE("json::parse_object names a value of another type", "[json]") {
    CHECK_THROWS_WITH(json::parse_object("[1]"), "expected a JSON object");
    CHECK(json::parse_object(R"({"x":"y"})").HasMember("x"));
    CHECK(json::string_or(json::parse(R"({"x":"y","n":1})"), "x") == "y");
    CHECK(json::string_or(json::parse(R"({"n":1})"), "n", "none") == "none");
    CHECK(json::to_string(json::parse(R"( { "a" : [ 1 , true ] } )")) == R"({"a":[1,true]})");
}

TEST_CASE("json errors never repeat the input", "[json]") {
    const std::string secret = "sk-live-1234567890abcdef";
    try {
        (void)json::parse("{\"key\":\"" + secret + "\"");
        FAIL("accepted");
    } catch (const json::parse_error& e) {
        CHECK(std::string(e.what()).find(secret) == std::string::npos);
    }
}

}  // namespace json_test
