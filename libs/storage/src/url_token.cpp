// Signed URL tokens (url_token.hpp) on core::crypto's HS256.
#include "awp/storage/url_token.hpp"

#include "awp/core/crypto.hpp"
#include "awp/core/json.hpp"

namespace awp::storage {

namespace crypto = core::crypto;

std::string url_signing_key(std::string_view jwt_secret) {
    return crypto::hkdf_sha256(jwt_secret, "awp-storage-url-v1", "hs256", 32);
}

std::string sign_url_token(const url_claims& c, std::string_view key) {
    core::json::writer j;
    j.w.StartObject();
    j.kv("url", c.url);
    j.kv("scope", c.scope);
    j.key("exp");
    j.w.Int64(c.exp);
    if (c.scope == kScopeUpload) {
        j.key("upsert");
        j.w.Bool(c.upsert);
        if (!c.owner.empty()) j.kv("owner", c.owner);
        if (!c.tenant.empty()) j.kv("tenant", c.tenant);
    }
    j.w.EndObject();
    return crypto::jwt_sign_hs256(j.str(), key);
}

url_claims verify_url_token(std::string_view token, std::string_view key, std::string_view scope,
                            std::string_view url) {
    using kind = url_token_error::kind;
    std::string claims;
    try {
        crypto::jwt_verify_options o;
        o.require_exp = true;
        claims = crypto::jwt_verify_hs256(token, key, o);
    } catch (const crypto::token_error& e) {
        if (e.reason() == crypto::token_failure::expired) {
            throw url_token_error(kind::expired, "The provided token has expired.");
        }
        throw url_token_error(kind::invalid, "invalid signature");
    }
    const auto d = core::json::try_parse(claims, core::json::kSmall);
    if (!d || !d->IsObject()) throw url_token_error(kind::invalid, "invalid signature");
    url_claims out;
    out.scope = core::json::string_or(*d, "scope");
    out.url = core::json::string_or(*d, "url");
    out.owner = core::json::string_or(*d, "owner");
    out.tenant = core::json::string_or(*d, "tenant");
    if (auto it = d->FindMember("exp"); it != d->MemberEnd() && it->value.IsInt64()) {
        out.exp = it->value.GetInt64();
    }
    if (auto it = d->FindMember("upsert"); it != d->MemberEnd() && it->value.IsBool()) {
        out.upsert = it->value.GetBool();
    }
    if (out.scope != scope) {
        throw url_token_error(kind::wrong_scope, "Token is not scoped for " + std::string(scope));
    }
    if (out.url != url) throw url_token_error(kind::wrong_object, "Invalid signature");
    return out;
}

}  // namespace awp::storage
