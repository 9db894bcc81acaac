// The lexical fallback awp-hash-384-v1: named, deterministic, unit norm, lexically sensible.
#include <rapidjson/document.h>
#include <awp/embed/embedder.hpp>
#include <awp/embed/hash_embedding.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>

#include <cmath>
#include <string>
#include <vector>

namespace embed_fallback_test {

namespace {

namespace embed = awp::embed;

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
    double dot = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) dot += static_cast<double>(a[i]) * b[i];
    return dot;  // both have unit norm
}

double norm(const std::vector<float>& v) {
    double n = 0.0;
    for (float x : v) n += static_cast<double>(x) * x;
    return std::sqrt(n);
}

}  // namespace

TEST_CASE("the fallback names itself on every vector and is 384-dimensional", "[embed]") {
    const auto fallback = embed::make_fallback();
    CHECK(fallback->model_name() == "awp-hash-384-v1");
    CHECK(fallback->is_fallback());
    CHECK(fallback->dimensions() == 384);
    const std::vector<std::string> texts{"one", "two words", ""};
    const auto results = fallback->embed_batch(texts);
    REQUIRE(results.size() == 3);
    for (const auto& r : results) {
        CHECK(r.model == "awp-hash-384-v1");
        CHECK(r.vector.size() == 384);
        CHECK(norm(r.vector) == Approx(1.0).epsilon(1e-6));
    }
    CHECK(results[1].token_count == 2);
    CHECK(results[2].token_count == 0);
}

TEST_CASE("fallback vectors are deterministic and fixed across builds", "[embed]") {
    const auto a = embed::hash_embedding("Configure the PostgreSQL connection pool");
    const auto b = embed::hash_embedding("Configure the PostgreSQL connection pool");
    CHECK(a == b);
    // Pinned hash values: a change here changes every stored vector, so it needs a new name.
    CHECK(embed::stable_hash("w:hello", 0) == embed::stable_hash("w:hello", 0));
    CHECK(embed::stable_hash("w:hello", 0) != embed::stable_hash("w:hello", 1));
    CHECK(embed::stable_hash("", 0) == 0xc3817c016ba4ff30ULL);
    CHECK(embed::stable_hash("a", 0) == 0x5f29c2aadd9b8527ULL);
    CHECK(embed::stable_hash("w:hello", 1) == 0x372fddd19df29bc8ULL);
}

TEST_CASE("fallback vectors equal the independent Python statement of the scheme", "[embed]") {
    // tools/embed-reference/make_hash_fixture.py (standard library only) wrote these vectors.
    std::ifstream in(std::string(AWP_SOURCE_DIR) + "/tests/fixtures/embed/hash-384-v1.json");
    REQUIRE(in);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    rapidjson::Document doc;
    doc.Parse(text.c_str());
    REQUIRE(doc.IsArray());
    REQUIRE(doc.Size() >= 10);
    for (const auto& row : doc.GetArray()) {
        const std::string input(row["text"].GetString(), row["text"].GetStringLength());
        int words = -1;
        const auto got = embed::hash_embedding(input, &words);
        INFO(input);
        CHECK(words == row["words"].GetInt());
        REQUIRE(got.size() == row["vector"].Size());
        double diff = 0.0;
        for (rapidjson::SizeType i = 0; i < row["vector"].Size(); ++i)
            diff = std::max(diff, std::fabs(got[i] - row["vector"][i].GetDouble()));
        CHECK(diff < 1e-6);
    }
}

TEST_CASE("similar texts are closer than unrelated ones", "[embed]") {
    const auto reset = embed::hash_embedding("How do I reset my password?");
    const auto reset2 = embed::hash_embedding("Password reset instructions");
    const auto pool = embed::hash_embedding("Configure the PostgreSQL connection pool");
    const auto pool2 = embed::hash_embedding("postgres connection pooling settings");
    const auto weather = embed::hash_embedding("Sunny weather expected tomorrow in Lisbon");
    CHECK(cosine(reset, reset2) > 0.25);
    CHECK(cosine(pool, pool2) > 0.25);
    CHECK(cosine(reset, reset2) > cosine(reset, weather) + 0.15);
    CHECK(cosine(pool, pool2) > cosine(pool, weather) + 0.15);
    CHECK(std::fabs(cosine(reset, pool)) < 0.2);
}

TEST_CASE("fallback words are case- and width-folded, CJK split per character", "[embed]") {
    CHECK(embed::hash_words("Hello, WORLD! ｆｕｌｌ") ==
          std::vector<std::string>{"hello", "world", "full"});
    CHECK(embed::hash_words("中文abc") == std::vector<std::string>{"中", "文", "abc"});
    CHECK(embed::hash_words("Straße") == std::vector<std::string>{"strasse"});
    CHECK(embed::hash_embedding("HELLO World") == embed::hash_embedding("hello world"));
}

}  // namespace embed_fallback_test
