// What a stored file is served as (libs/storage content.hpp): sniffing by signature, the inline
// list, and the rule that a declared type is never trusted for inline serving; ranges; MIME
// patterns and size limits of buckets.
#include <catch2/catch.hpp>

#include <string>

#include "awp/storage/content.hpp"
#include "awp/storage/range.hpp"

namespace storage_content_test {

namespace {

using namespace awp::storage;
using namespace std::string_literals;

}  // namespace

TEST_CASE("storage content: files are sniffed by their signature", "[storage][content]") {
    CHECK(sniff("\x89PNG\r\n\x1a\nrest") == "image/png");
    CHECK(sniff("\xff\xd8\xff\xe0") == "image/jpeg");
    CHECK(sniff("GIF89a....") == "image/gif");
    CHECK(sniff("RIFF\0\0\0\0WEBPVP8 "s) == "image/webp");
    CHECK(sniff("%PDF-1.7\n") == "application/pdf");
    CHECK(sniff("PK\x03\x04zip"s) == "application/zip");
    CHECK(sniff("\x1f\x8b\x08\0"s) == "application/gzip");
    CHECK(sniff("<!DOCTYPE html><html>") == "text/html");
    CHECK(sniff("  \n<script>alert(1)</script>") == "text/html");
    CHECK(sniff("\xef\xbb\xbf<HTML>") == "text/html");
    CHECK(sniff("<svg xmlns=...") == "image/svg+xml");
    CHECK(sniff("<?xml version=\"1.0\"?><svg/>") == "application/xml");
    CHECK(sniff("<!-- comment -->") == "text/html");
    CHECK(sniff("plain words\nand a second line\t") == "text/plain");
    CHECK(sniff("") == "text/plain");
    CHECK(sniff("naïve") == "text/plain");
    CHECK(sniff("ends in a cut char \xc3"s) == "text/plain");
    CHECK(sniff("nul\0inside"s) == "application/octet-stream");
    CHECK(sniff("\xff\xfe\xfd") == "application/octet-stream");
    CHECK(sniff("<b>bold</b>") == "text/html");
    CHECK(sniff("<bold>x") == "text/plain");  // not a tag a browser sniffs
}

TEST_CASE("storage content: a declared type is shown inline only when safe and true",
          "[storage][content]") {
    // Safe and matching.
    CHECK(serve("image/png", "image/png").inline_ok);
    CHECK(serve("application/pdf", "application/pdf").inline_ok);
    CHECK(serve("text/plain;charset=UTF-8", "text/plain").inline_ok);
    CHECK(serve("text/plain;charset=UTF-8", "text/plain").content_type ==
          "text/plain;charset=UTF-8");
    // Active types: never inline, whatever the bytes.
    CHECK_FALSE(serve("text/html", "text/html").inline_ok);
    CHECK_FALSE(serve("image/svg+xml", "image/svg+xml").inline_ok);
    CHECK_FALSE(serve("application/javascript", "text/plain").inline_ok);
    // A safe declared type the bytes contradict: a download.
    CHECK_FALSE(serve("image/png", "text/html").inline_ok);
    CHECK_FALSE(serve("text/plain", "text/html").inline_ok);
    CHECK_FALSE(serve("image/jpeg", "image/png").inline_ok);
    CHECK_FALSE(serve("application/json", "application/octet-stream").inline_ok);
    // Garbage in the type: sent as octet-stream.
    CHECK(serve("not a type", "text/plain").content_type == "application/octet-stream");
    CHECK(serve("text/plain\r\nX-Evil: 1", "text/plain").content_type ==
          "application/octet-stream");
    CHECK(serve("image/png; name=\"\xc3\xa9\"", "image/png").content_type == "image/png");
}

TEST_CASE("storage content: the agent files' type by name and the disposition",
          "[storage][content]") {
    CHECK(content_type_for("a/b/Report.PDF") == "application/pdf");
    CHECK(content_type_for("x.svg") == "image/svg+xml");
    CHECK(content_type_for("noext") == "application/octet-stream");
    CHECK(content_type_for("dir.png/file") == "application/octet-stream");
    CHECK(inline_safe("image/png"));
    CHECK_FALSE(inline_safe("text/html; charset=utf-8"));
    CHECK(disposition("attachment", "a/ré\"sumé.pdf") ==
          "attachment; filename=\"r___sum__.pdf\"; filename*=UTF-8''r%C3%A9%22sum%C3%A9.pdf");
}

TEST_CASE("storage content: media types, MIME patterns and sizes", "[storage][content]") {
    CHECK(media_type("Image/PNG; q=1") == "image/png");
    CHECK(media_type("text/") == "");
    CHECK(media_type("/x") == "");
    CHECK(media_type("a b/c") == "");
    const std::vector<std::string> images{"image/*", "application/pdf"};
    CHECK(mime_allowed("image/png", images));
    CHECK(mime_allowed("IMAGE/JPEG; x=y", images));
    CHECK(mime_allowed("application/pdf", images));
    CHECK_FALSE(mime_allowed("text/html", images));
    CHECK_FALSE(mime_allowed("imagex/png", images));
    CHECK_FALSE(mime_allowed("garbage", images));
    CHECK(mime_allowed("anything/at-all", {}));
    CHECK(mime_allowed("text/html", {"*/*"}));
    CHECK(mime_pattern_problem("image/*").empty());
    CHECK(mime_pattern_problem("*/*").empty());
    CHECK(mime_pattern_problem("text/plain").empty());
    CHECK_FALSE(mime_pattern_problem("text/plain; charset=x").empty());
    CHECK_FALSE(mime_pattern_problem("nope").empty());
    CHECK(parse_size("3B") == 3U);
    CHECK(parse_size("30KB") == 30'000U);
    CHECK(parse_size("1.5mb") == 1'500'000U);
    CHECK(parse_size("20GB") == 20'000'000'000ULL);
    CHECK_FALSE(parse_size("20"));
    CHECK_FALSE(parse_size("-1MB"));
    CHECK_FALSE(parse_size("1e9B"));
    CHECK_FALSE(parse_size("99999999999999999GB"));
}

TEST_CASE("storage ranges: one byte range, clipped, or refused as RFC 9110 says",
          "[storage][range]") {
    using kind = byte_range::kind;
    auto r = parse_range("bytes=0-99", 1000);
    CHECK(r.what == kind::partial);
    CHECK(r.first == 0);
    CHECK(r.last == 99);
    CHECK(content_range(r, 1000) == "bytes 0-99/1000");
    r = parse_range("bytes=900-", 1000);
    CHECK((r.what == kind::partial && r.first == 900 && r.last == 999));
    r = parse_range("bytes=-10", 1000);
    CHECK((r.what == kind::partial && r.first == 990 && r.last == 999));
    r = parse_range("bytes=-5000", 1000);
    CHECK((r.what == kind::partial && r.first == 0 && r.last == 999));
    r = parse_range("bytes=500-5000", 1000);
    CHECK((r.what == kind::partial && r.last == 999));
    CHECK(parse_range("bytes=1000-", 1000).what == kind::unsatisfiable);
    CHECK(parse_range("bytes=-0", 1000).what == kind::unsatisfiable);
    CHECK(content_range(parse_range("bytes=2000-3000", 1000), 1000) == "bytes */1000");
    CHECK(parse_range("bytes=0-0", 0).what == kind::unsatisfiable);
    // Ignored: the whole file.
    CHECK(parse_range(std::nullopt, 10).what == kind::whole);
    CHECK(parse_range("bytes=0-1,5-6", 10).what == kind::whole);
    CHECK(parse_range("items=0-1", 10).what == kind::whole);
    CHECK(parse_range("bytes=5-1", 10).what == kind::whole);
    CHECK(parse_range("bytes=x-y", 10).what == kind::whole);
    CHECK(parse_range("bytes=99999999999999999999-", 10).what == kind::whole);
}

}  // namespace storage_content_test
