// The names of /storage/v1 (libs/storage names.hpp): every way a hostile name is refused, with
// what is wrong, and what real names look like (Unicode, spaces, dots) accepted.
#include <catch2/catch.hpp>

#include <string>

#include "awp/storage/names.hpp"

namespace storage_names_test {

namespace {

using awp::storage::bucket_name_problem;
using awp::storage::object_name_problem;
using awp::storage::split_object_path;

bool refused(std::string_view name, std::string_view says) {
    const auto why = object_name_problem(name);
    INFO("name: " << std::string(name) << " -> " << why);
    return why.find(says) != std::string::npos && !why.empty();
}

}  // namespace

TEST_CASE("storage names: real names are accepted", "[storage][names]") {
    for (const char* ok :
         {"a", "a0000000-0000-4000-8000-00000000000a/knowledge/x/Report Q3.pdf", "Résumé.pdf",
          "日本語/ファイル.txt", "emoji ❤️.png", "dots.in.the.name..tar.gz", ".hidden",
          "..leading", "a/.emptyFolderPlaceholder", "naïve café (1).docx", "x/y/z/w/v"}) {
        INFO(ok);
        CHECK(object_name_problem(ok).empty());
    }
}

TEST_CASE("storage names: traversal, separators and structure are refused", "[storage][names]") {
    CHECK(refused("", "empty"));
    CHECK(refused("..", "'.' or '..'"));
    CHECK(refused("a/../b", "'.' or '..'"));
    CHECK(refused("./a", "'.' or '..'"));
    CHECK(refused("/etc/passwd", "empty segment"));
    CHECK(refused("a//b", "empty segment"));
    CHECK(refused("a/", "empty segment"));
    CHECK(refused("a\\..\\b", "backslash"));
    CHECK(refused(" a.pdf", "space"));
    CHECK(refused("a.pdf ", "space"));
    CHECK(refused("dir /a", "space"));
}

TEST_CASE("storage names: bytes that are not text are refused", "[storage][names]") {
    CHECK(refused(std::string("a\0b", 3), "control"));
    CHECK(refused("a\nb", "control"));
    CHECK(refused("a\x7f", "control"));
    CHECK(refused("\xc2\x85", "control"));  // U+0085, a C1 control
    CHECK(refused("\xff\xfe", "not UTF-8"));
    CHECK(refused("\xc0\xae\xc0\xae", "not UTF-8"));  // overlong "..": refused as not UTF-8
    CHECK(refused("\xed\xa0\x80", "not UTF-8"));      // a surrogate
    CHECK(refused("a\xe2\x80", "not UTF-8"));         // cut
}

TEST_CASE("storage names: look-alikes and invisible characters are refused", "[storage][names]") {
    CHECK(
        refused("a\xe2\x88\x95"
                "b",
                "look-alike of '/'"));  // U+2215 division slash
    CHECK(
        refused("a\xe2\x81\x84"
                "b",
                "look-alike of '/'"));  // U+2044 fraction slash
    CHECK(
        refused("a\xef\xbc\x8f"
                "b",
                "look-alike"));                                // U+FF0F fullwidth solidus
    CHECK(refused("\xef\xbc\x8e\xef\xbc\x8e", "look-alike"));  // U+FF0E fullwidth full stops
    CHECK(
        refused("a\xe2\x80\xa4"
                "b",
                "look-alike of '.'"));  // U+2024 one dot leader
    CHECK(
        refused("invoice\xe2\x80\xae"
                "fdp.exe",
                "bidirectional"));  // U+202E RLO
    CHECK(
        refused("a\xe2\x80\x8b"
                "b",
                "invisible"));  // U+200B zero width space
    CHECK(
        refused("\xef\xbb\xbf"
                "a",
                "invisible"));  // U+FEFF
    CHECK(
        refused("a\xc2\xa0"
                "b",
                "space other than"));  // U+00A0
    CHECK(
        refused("a\xe3\x80\x80"
                "b",
                "space other than"));                // U+3000
    CHECK(refused("\xee\x80\x80", "private-use"));   // U+E000
    CHECK(refused("\xef\xbf\xbe", "noncharacter"));  // U+FFFE
    CHECK(refused("a\xf3\xa0\x80\x81", "tag"));      // U+E0001
    // The refusal names the code point.
    CHECK(object_name_problem("a\xe2\x80\xae").find("U+202E") != std::string::npos);
}

TEST_CASE("storage names: length limits", "[storage][names]") {
    CHECK(object_name_problem(std::string(255, 'a')).empty());
    CHECK(refused(std::string(256, 'a'), "255"));
    std::string long_name;
    while (long_name.size() < 1000) long_name += std::string(99, 'a') + "/";
    long_name += "end";
    CHECK(object_name_problem(long_name.substr(0, 1024)).empty() == (long_name[1023] != '/'));
    CHECK(refused(long_name + std::string(30, 'b'), "1024"));
}

TEST_CASE("storage names: bucket ids follow the platform's rule", "[storage][names]") {
    for (const char* ok :
         {"assets", "gateway-backups", "A_b.c", "with space", "a!*'()&$=@;:+,?-"}) {
        INFO(ok);
        CHECK(bucket_name_problem(ok).empty());
    }
    for (const char* bad : {"", "a/b", "a\\b", "é", " lead", "trail ", ".", "..", "a\tb", "a%b"}) {
        INFO(bad);
        CHECK_FALSE(bucket_name_problem(bad).empty());
    }
    CHECK_FALSE(bucket_name_problem(std::string(101, 'a')).empty());
    CHECK(bucket_name_problem(std::string(100, 'a')).empty());
}

TEST_CASE("storage names: a request path's tail is split and decoded once per segment",
          "[storage][names]") {
    auto p = split_object_path("assets/t%C3%A9nant/a%20b.pdf");
    CHECK(p.problem.empty());
    CHECK(p.bucket == "assets");
    CHECK(p.name == "ténant/a b.pdf");
    // An encoded '/' is a separator, so an encoded ".." segment is still one.
    auto q = split_object_path("assets/a%2F..%2Fb");
    CHECK_FALSE(q.problem.empty());
    auto dots = split_object_path("assets/%2e%2e/x");
    CHECK(dots.problem.find("'..'") != std::string::npos);
    auto nul = split_object_path("assets/a%00b");
    CHECK(nul.problem.find("control") != std::string::npos);
    auto bad_escape = split_object_path("assets/a%zz");
    CHECK(bad_escape.problem.find("%-escape") != std::string::npos);
    auto bad_bucket = split_object_path("as%2Fsets/x");
    CHECK(bad_bucket.bad_bucket);
    auto only_bucket = split_object_path("assets");
    CHECK(only_bucket.bucket == "assets");
    CHECK(only_bucket.problem == "the object name is empty");
}

TEST_CASE("storage names: LIKE patterns of literals match only the literal", "[storage][names]") {
    CHECK(awp::storage::like_escape("a%b_c\\d") == "a\\%b\\_c\\\\d");
    CHECK(awp::storage::base_name("a/b/c.txt") == "c.txt");
    CHECK(awp::storage::base_name("c.txt") == "c.txt");
}

}  // namespace storage_names_test
