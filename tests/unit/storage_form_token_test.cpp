// The upload form as @supabase/storage-js sends it (libs/storage upload_form.hpp) and signed URL
// tokens (url_token.hpp): bound to one object, one scope and an expiry, signed with their own key.
#include <catch2/catch.hpp>

#include <string>

#include "awp/core/crypto.hpp"
#include "awp/http/message.hpp"
#include "awp/storage/upload_form.hpp"
#include "awp/storage/url_token.hpp"

namespace storage_form_token_test {

namespace {

using awp::storage::upload_form;

std::string form_body(const std::string& file) {
    return "--XyZ\r\nContent-Disposition: form-data; name=\"cacheControl\"\r\n\r\n3600\r\n"
           "--XyZ\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"k\":\"v\"}\r\n"
           "--XyZ\r\nContent-Disposition: form-data; name=\"\"; filename=\"blob\"\r\n"
           "Content-Type: image/png\r\n\r\n" +
           file + "\r\n--XyZ--\r\n";
}

struct parsed {
    std::string file;
    upload_form::fields fields;
};

parsed parse(const std::string& body, std::size_t piece) {
    upload_form f("multipart/form-data; boundary=XyZ");
    parsed out;
    f.on_file_data = [&](std::string_view b) { out.file.append(b); };
    for (std::size_t i = 0; i < body.size(); i += piece) f.feed(body.substr(i, piece));
    f.finish();
    out.fields = f.form();
    return out;
}

int status_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const awp::http::http_error& e) {
        return static_cast<int>(e.status());
    }
    return 0;
}

}  // namespace

TEST_CASE("storage form: the file, its type and the fields, fed in pieces of any size",
          "[storage][form]") {
    std::string file = "\x89PNG\r\n\x1a\n";
    for (int i = 0; i < 5000; ++i) file += static_cast<char>(i % 251);
    // Near misses of the delimiter ("\r\n--XyZ"), which a sender never puts in a part.
    file += "--XyZ not after a line break\r\n--XyY\r\n-";
    const auto body = form_body(file);
    for (std::size_t piece : {1UL, 7UL, 100UL, 4096UL, body.size()}) {
        INFO(piece);
        const auto p = parse(body, piece);
        CHECK(p.file == file);
        CHECK(p.fields.size == file.size());
        CHECK(p.fields.content_type == std::optional<std::string>("image/png"));
        CHECK(p.fields.filename == std::optional<std::string>("blob"));
        CHECK(p.fields.cache_control == std::optional<std::string>("3600"));
        CHECK(p.fields.metadata == std::optional<std::string>("{\"k\":\"v\"}"));
    }
}

TEST_CASE("storage form: hostile forms are a 400", "[storage][form]") {
    const std::string two_files =
        "--XyZ\r\nContent-Disposition: form-data; name=\"a\"; filename=\"a\"\r\n\r\nA\r\n"
        "--XyZ\r\nContent-Disposition: form-data; name=\"b\"; "
        "filename=\"b\"\r\n\r\nB\r\n--XyZ--\r\n";
    CHECK(status_of([&] { parse(two_files, 100); }) == 400);
    const std::string no_file =
        "--XyZ\r\nContent-Disposition: form-data; name=\"cacheControl\"\r\n\r\n1\r\n--XyZ--\r\n";
    CHECK(status_of([&] { parse(no_file, 100); }) == 400);
    const std::string cut = form_body("abc").substr(0, 150);
    CHECK(status_of([&] { parse(cut, 10); }) == 400);
    std::string big_field = "--XyZ\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n" +
                            std::string(upload_form::kMaxFieldBytes + 1, 'm') + "\r\n--XyZ--\r\n";
    CHECK(status_of([&] { parse(big_field, 4096); }) == 400);
    std::string many;
    for (std::size_t i = 0; i <= upload_form::kMaxParts; ++i) {
        many += "--XyZ\r\nContent-Disposition: form-data; name=\"f" + std::to_string(i) +
                "\"\r\n\r\nx\r\n";
    }
    many += "--XyZ--\r\n";
    CHECK(status_of([&] { parse(many, 4096); }) == 400);
    CHECK(status_of([] { upload_form f("multipart/form-data"); }) == 400);
}

TEST_CASE("storage tokens: bound to one object, one scope and an expiry", "[storage][token]") {
    using namespace awp::storage;
    const auto key = url_signing_key("a-jwt-secret-that-is-long-enough-0123456789");
    CHECK(key.size() == 32);
    CHECK(key != url_signing_key("another-jwt-secret-that-is-long-enough-012345"));
    url_claims c;
    c.scope = std::string(kScopeUpload);
    c.url = "assets/t/a.png";
    c.exp = 4102444800;
    c.upsert = true;
    c.owner = "u1";
    c.tenant = "t1";
    const auto token = sign_url_token(c, key);
    const auto back = verify_url_token(token, key, kScopeUpload, "assets/t/a.png");
    CHECK(back.upsert);
    CHECK(back.owner == "u1");
    CHECK(back.tenant == "t1");
    using kind = url_token_error::kind;
    auto refused = [&](const std::string& t, std::string_view scope, std::string_view url,
                       const std::string& k) {
        try {
            (void)verify_url_token(t, k, scope, url);
        } catch (const url_token_error& e) {
            return e.what_kind();
        }
        FAIL("accepted");
        return kind::invalid;
    };
    CHECK(refused(token, kScopeDownload, "assets/t/a.png", key) == kind::wrong_scope);
    CHECK(refused(token, kScopeUpload, "assets/t/b.png", key) == kind::wrong_object);
    CHECK(refused(token, kScopeUpload, "assets/t/a.png", url_signing_key("x")) == kind::invalid);
    CHECK(refused(token + "x", kScopeUpload, "assets/t/a.png", key) == kind::invalid);
    c.exp = 1000;  // 1970
    CHECK(refused(sign_url_token(c, key), kScopeUpload, "assets/t/a.png", key) == kind::expired);
    // An access token signed with the JWT secret itself is no URL token.
    const auto access = awp::core::crypto::jwt_sign_hs256(
        R"({"url":"assets/t/a.png","scope":"upload","exp":4102444800})",
        "a-jwt-secret-that-is-long-enough-0123456789");
    CHECK(refused(access, kScopeUpload, "assets/t/a.png", key) == kind::invalid);
}

}  // namespace storage_form_token_test
