// The streaming multipart reader: the same parts whichever way the body is cut into chunks
// (a delimiter split at every offset), bounded part headers, and the malformed bodies refused.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "awp/http/message.hpp"
#include "awp/http/multipart.hpp"

namespace http_multipart_test {

namespace {

using awp::http::multipart_reader;

struct seen_part {
    std::string name;
    std::string filename;
    std::string content;
    std::uint64_t offset = 0;
    bool ended = false;
};

/// Feeds `body` cut at the given offsets; returns the parts as the reader reported them.
std::vector<seen_part> read_cut(const std::string& boundary, const std::string& body,
                                const std::vector<std::size_t>& cuts) {
    multipart_reader r(boundary);
    std::vector<seen_part> parts;
    r.on_part = [&](const multipart_reader::part& p) {
        parts.push_back({p.name.value_or(""), p.filename.value_or(""), "", 0, false});
    };
    r.on_data = [&](std::uint64_t at, std::string_view bytes) {
        REQUIRE(!parts.empty());
        auto& p = parts.back();
        if (p.content.empty()) p.offset = at;
        // Contiguous: each piece starts where the previous one ended.
        CHECK(at == p.offset + p.content.size());
        p.content.append(bytes);
    };
    r.on_part_end = [&] {
        REQUIRE(!parts.empty());
        parts.back().ended = true;
    };
    std::size_t from = 0;
    for (auto c : cuts) {
        r.feed(std::string_view(body).substr(from, c - from));
        from = c;
    }
    r.feed(std::string_view(body).substr(from));
    r.finish();
    return parts;
}

const std::string kBody =
    "preamble --Xy\r\n"  // a delimiter-like prefix in the preamble
    "--XyZ\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\ndocs/b.txt\r\n"
    "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.txt\"\r\n"
    "Content-Type: text/plain\r\n\r\nbee\r\n--Xy\r\n-\r\n--X--XyZ\r\n"
    "--XyZ--\r\nepilogue --XyZ\r\n";

void check_parts(const std::vector<seen_part>& parts) {
    REQUIRE(parts.size() == 2);
    CHECK(parts[0].name == "path");
    CHECK(parts[0].content == "docs/b.txt");
    CHECK(parts[0].ended);
    CHECK(parts[1].name == "file");
    CHECK(parts[1].filename == "b.txt");
    // Pieces of the delimiter, and the delimiter without the CRLF before it, are content.
    CHECK(parts[1].ended);
    CHECK(kBody.compare(parts[1].offset, parts[1].content.size(), parts[1].content) == 0);
    CHECK(kBody.compare(parts[0].offset, parts[0].content.size(), parts[0].content) == 0);
}

}  // namespace

TEST_CASE("multipart reader: same parts with the body cut at every offset", "[http][multipart]") {
    const auto whole = read_cut("XyZ", kBody, {});
    REQUIRE(whole.size() == 2);
    CHECK(whole[1].content == "bee\r\n--Xy\r\n-\r\n--X--XyZ");
    check_parts(whole);
    for (std::size_t cut = 0; cut <= kBody.size(); ++cut) {
        INFO("cut at " << cut);
        const auto parts = read_cut("XyZ", kBody, {cut});
        check_parts(parts);
        CHECK(parts[1].content == whole[1].content);
        CHECK(parts[1].offset == whole[1].offset);
    }
    // Two cuts (every pair), and one byte at a time.
    for (std::size_t a = 0; a <= kBody.size(); a += 3) {
        for (std::size_t b = a; b <= kBody.size(); b += 5) {
            INFO("cuts at " << a << " and " << b);
            const auto parts = read_cut("XyZ", kBody, {a, b});
            REQUIRE(parts.size() == 2);
            CHECK(parts[1].content == whole[1].content);
        }
    }
    std::vector<std::size_t> every;
    for (std::size_t i = 1; i < kBody.size(); ++i) every.push_back(i);
    const auto bytewise = read_cut("XyZ", kBody, every);
    REQUIRE(bytewise.size() == 2);
    CHECK(bytewise[0].content == "docs/b.txt");
    CHECK(bytewise[1].content == whole[1].content);
}

TEST_CASE("multipart reader: empty and binary parts, boundary from the content type",
          "[http][multipart]") {
    CHECK(awp::http::multipart_boundary("multipart/form-data; boundary=\"a b\"; x=1") == "a b");
    CHECK(awp::http::multipart_boundary("multipart/form-data; boundary=XyZ") == "XyZ");
    CHECK_THROWS_AS(awp::http::multipart_boundary("multipart/form-data"), awp::http::http_error);
    CHECK_THROWS_AS(awp::http::multipart_boundary("multipart/form-data; boundary=\"\""),
                    awp::http::http_error);
    const std::string bin("\x00\xff\r\n\r\n--\r", 9);
    const std::string body = "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n" + bin +
                             "\r\n--b\r\nContent-Disposition: form-data; name=\"e\"\r\n\r\n"
                             "\r\n--b--";
    for (std::size_t cut = 0; cut <= body.size(); ++cut) {
        INFO("cut at " << cut);
        const auto parts = read_cut("b", body, {cut});
        REQUIRE(parts.size() == 2);
        CHECK(parts[0].content == bin);
        CHECK(parts[1].name == "e");
        CHECK(parts[1].content.empty());
        CHECK(parts[1].ended);
    }
}

TEST_CASE("multipart reader: malformed bodies and oversized part headers are a 400",
          "[http][multipart]") {
    const auto code = [](const std::string& body) -> std::string {
        multipart_reader r("XyZ");
        try {
            r.feed(body);
            r.finish();
        } catch (const awp::http::http_error& e) {
            CHECK(e.status() == 400);
            return e.code() + ": " + e.what();
        }
        return "accepted";
    };
    CHECK(code("no parts here") == "bad_multipart: no multipart parts");
    CHECK(code("--XyZ") == "bad_multipart: malformed part");
    CHECK(code("--XyZ?x") == "bad_multipart: malformed part");
    CHECK(code("--XyZ\r\nContent-Disposition: form-data") ==
          "bad_multipart: malformed part headers");
    CHECK(code("--XyZ\r\nA: b\r\n\r\nno end") == "bad_multipart: unterminated part");
    CHECK(code("--XyZ\r\nA: b\r\n\r\nend\r\n--XyZ--") == "accepted");
    // Part headers without an end are refused once they pass the cap, not kept growing.
    multipart_reader r("XyZ");
    r.feed("--XyZ\r\n");
    const std::string filler(1024, 'h');
    bool refused = false;
    for (int i = 0; i < 64 && !refused; ++i) {
        try {
            r.feed(filler);
        } catch (const awp::http::http_error& e) {
            refused = true;
            CHECK(e.code() == "bad_multipart");
            CHECK(i >= 15);
        }
    }
    CHECK(refused);
}

}  // namespace http_multipart_test
