// HS256 JWTs on libjwt 1.10. Kept apart from crypto.cpp so daemons that never see a token do
// not link libjwt (and the TLS library it drags in).
#include <jwt.h>

#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/json.hpp"
#include "crypto_internal.hpp"

namespace awp::core::crypto {
namespace {

// Far above any real token; keeps a hostile header from costing more than a parse.
constexpr std::size_t kMaxTokenSize = 16 * 1024;

using detail::bytes;

struct jwt_free_fn {
    void operator()(jwt_t* jwt) const noexcept { jwt_free(jwt); }
};
using jwt_ptr = std::unique_ptr<jwt_t, jwt_free_fn>;

struct c_free_fn {
    void operator()(char* p) const noexcept { std::free(p); }
};
using c_string = std::unique_ptr<char, c_free_fn>;

std::string describe_alg(const char* alg) {
    if (alg == nullptr) return "(missing)";
    // Echo only names libjwt knows: the header is attacker-controlled text.
    return jwt_str_alg(alg) == JWT_ALG_INVAL ? std::string("(unrecognised)") : std::string(alg);
}

}  // namespace

std::string jwt_sign_hs256(std::string_view claims_json, std::string_view secret) {
    if (secret.empty()) throw crypto_error("JWT secret is empty");
    if (secret.size() > INT_MAX) throw crypto_error("JWT secret is too large");
    if (!json::try_parse(claims_json, json::kSmall).value_or(rapidjson::Document{}).IsObject()) {
        throw crypto_error("JWT claims must be a JSON object");
    }
    jwt_t* raw = nullptr;
    if (jwt_new(&raw) != 0 || raw == nullptr) throw crypto_error("jwt_new failed");
    const jwt_ptr jwt(raw);
    const std::string claims(claims_json);
    if (jwt_add_grants_json(jwt.get(), claims.c_str()) != 0) {
        throw crypto_error("JWT claims were refused by libjwt");
    }
    if (jwt_set_alg(jwt.get(), JWT_ALG_HS256, bytes(secret), static_cast<int>(secret.size())) !=
        0) {
        throw crypto_error("jwt_set_alg failed");
    }
    const c_string token(jwt_encode_str(jwt.get()));
    if (!token) throw crypto_error("jwt_encode_str failed");
    return token.get();
}

std::string anon_key(std::string_view jwt_secret) {
    return jwt_sign_hs256(R"({"role":"anon","iss":"awp","iat":)" +
                              std::to_string(kAnonKeyIssuedAt) + R"(,"exp":)" +
                              std::to_string(kAnonKeyExpires) + "}",
                          jwt_secret);
}

std::string jwt_verify_hs256(std::string_view token, std::string_view secret,
                             const jwt_verify_options& options) {
    if (secret.empty()) throw crypto_error("JWT secret is empty");
    if (secret.size() > INT_MAX) throw crypto_error("JWT secret is too large");
    if (token.empty() || token.size() > kMaxTokenSize ||
        token.find('\0') != std::string_view::npos) {
        throw token_error(token_failure::malformed, "token is not a JWT");
    }
    const std::string text(token);

    // A keyless decode only to tell a foreign algorithm from a bad signature; nothing it
    // returns is trusted. (libjwt 1.10 reports alg "none" for keyless decodes, hence the header.)
    jwt_t* raw = nullptr;
    if (jwt_decode(&raw, text.c_str(), nullptr, 0) != 0 || raw == nullptr) {
        throw token_error(token_failure::malformed, "token is not a well-formed JWT");
    }
    const jwt_ptr unverified(raw);
    const char* alg = jwt_get_header(unverified.get(), "alg");
    if (alg == nullptr || std::string_view(alg) != "HS256") {
        throw token_error(token_failure::bad_algorithm,
                          "token algorithm " + describe_alg(alg) + " is not HS256");
    }

    raw = nullptr;
    if (jwt_decode(&raw, text.c_str(), bytes(secret), static_cast<int>(secret.size())) != 0 ||
        raw == nullptr) {
        throw token_error(token_failure::bad_signature, "token signature does not verify");
    }
    const jwt_ptr verified(raw);
    if (jwt_get_alg(verified.get()) != JWT_ALG_HS256) {
        throw token_error(token_failure::bad_algorithm, "token algorithm is not HS256");
    }
    const c_string claims_text(jwt_get_grants_json(verified.get(), nullptr));
    if (!claims_text) throw token_error(token_failure::malformed, "token has no claims");
    std::string claims(claims_text.get());

    const auto doc = json::try_parse(claims, json::kSmall).value_or(rapidjson::Document{});
    if (!doc.IsObject()) {
        throw token_error(token_failure::malformed, "token claims are not a JSON object");
    }
    const auto now = std::chrono::duration<double>(
                         options.now.value_or(std::chrono::system_clock::now()).time_since_epoch())
                         .count();
    const auto leeway = static_cast<double>(options.leeway.count());
    const auto number = [&doc](const char* name) -> std::optional<double> {
        const auto it = doc.FindMember(name);
        if (it == doc.MemberEnd()) return std::nullopt;
        if (!it->value.IsNumber()) {
            throw token_error(token_failure::malformed,
                              std::string("token claim ") + name + " is not a number");
        }
        return it->value.GetDouble();
    };
    const auto exp = number("exp");
    const auto nbf = number("nbf");
    if (exp && now >= *exp + leeway) throw token_error(token_failure::expired, "token has expired");
    if (!exp && options.require_exp) {
        throw token_error(token_failure::missing_exp, "token has no exp claim");
    }
    if (nbf && now + leeway < *nbf) {
        throw token_error(token_failure::not_yet_valid, "token is not valid yet");
    }
    return claims;
}

}  // namespace awp::core::crypto
