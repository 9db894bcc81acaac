// Unit tests of the runner's output scrubbing (scrub.hpp): what is stored of a command's
// outputs and errors carries no secret, fits its limit and is valid text.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "scrub.hpp"

namespace runner_scrub_test {

using namespace awp::runner;

namespace {

command_row cmd(std::string action, std::string payload) {
    command_row c;
    c.id = "11111111-1111-1111-1111-111111111111";
    c.action = std::move(action);
    c.payload = std::move(payload);
    return c;
}

}  // namespace

TEST_CASE("runner scrub: synced secrets of 6 bytes or more are redacted with the payload's",
          "[runner]") {
    known_secrets k;
    k.replace({"short", "synced-secret-1", "123456"});
    CHECK(k.size() == 2);
    const auto s = k.for_command(cmd("auth_set_api_key", R"({"provider":"p","api_key":"sk-777"})"));
    const std::string kept = keep("sk-777 synced-secret-1 123456 short", s, 1000);
    CHECK(kept == "[redacted] [redacted] [redacted] short");
    k.replace({});
    CHECK(k.for_command(cmd("list_models", "{}")).empty());
}

TEST_CASE("runner scrub: an output is redacted before it is cut, and made valid text", "[runner]") {
    const std::string secret = "topsecret-value";
    // The secret straddles the cut: redacted first, so no piece of it survives.
    const std::string text = std::string(100, 'a') + secret + std::string(10, 'b') + "\xff";
    const std::string kept = keep(text, {secret}, 20);
    CHECK_THAT(kept, Catch::StartsWith("[... ") && !Catch::Contains("secret"));
    CHECK_THAT(kept, Catch::EndsWith("bbbbbbbbbb\xEF\xBF\xBD"));
}

TEST_CASE("runner scrub: a JSON stdout stays valid JSON, any other loses its terminal escapes",
          "[runner]") {
    const std::string json = R"({"models":[{"id":"a","key":"sk-hidden-1"},{"id":"b"}]})";
    const std::string kept = keep_stdout(json, {"sk-hidden-1"}, true, 64);
    CHECK_THAT(kept, Catch::StartsWith("{") && Catch::Contains("[redacted]") &&
                         !Catch::Contains("sk-hidden-1"));
    CHECK_FALSE(Catch::StartsWith("[... ").match(kept));  // entries trimmed, never bytes
    // Not JSON after all: kept as text, cut to the limit.
    CHECK(keep_stdout("\033[1mbold\033[0m plain", {}, true, 1000) == "bold plain");
    CHECK(keep_stdout("\033[1mbold\033[0m plain", {}, false, 1000) == "bold plain");
    CHECK_THAT(keep_stdout(std::string(5000, 'x'), {}, false, 100), Catch::StartsWith("[... "));
}

TEST_CASE("runner scrub: an error text is cut to kErrorLimit with an ellipsis, and made valid",
          "[runner]") {
    CHECK(error_text("exited with code 1") == "exited with code 1");
    const std::string long_error(kErrorLimit + 500, 'e');
    const std::string cut = error_text(long_error);
    CHECK(cut.size() == kErrorLimit + 3);
    CHECK_THAT(cut, Catch::EndsWith("..."));
    CHECK(error_text(std::string("bad\0byte", 8)) ==
          "bad\xEF\xBF\xBD"
          "byte");
}

}  // namespace runner_scrub_test
