// TEMPORARY stand-in for gateway::data_api_principal until the /auth/v1 work lands (auth.cpp).
#include "awp/core/crypto.hpp"
#include "awp/core/json.hpp"
#include "awp/rest/error.hpp"
#include "gateway.hpp"

namespace awp::api {

data_principal gateway::data_api_principal(const request& r) const {
    data_principal p;
    std::string token;
    if (auto h = r.header.get("authorization"); h && h->size() > 7)
        token = std::string(h->substr(7));
    if (token.empty()) {
        if (auto k = r.header.get("apikey")) token = std::string(*k);
    }
    if (token.empty()) return p;
    if (!cfg_.service_role_key.empty() && token == cfg_.service_role_key) {
        p.role = "service_role";
        p.claims_json = R"({"role":"service_role"})";
        p.has_jwt = true;
        return p;
    }
    std::string claims;
    try {
        core::crypto::jwt_verify_options o;
        o.require_exp = false;
        claims = core::crypto::jwt_verify_hs256(token, cfg_.jwt_secret, o);
    } catch (const std::exception& e) {
        rest::api_error err(401, "PGRST301", e.what());
        err.headers.emplace_back("WWW-Authenticate", "Bearer");
        throw err;
    }
    auto d = core::json::parse_object(claims, core::json::kSmall);
    p.role = core::json::string_or(d, "role", "anon");
    p.sub = core::json::string_or(d, "sub");
    p.claims_json = claims;
    p.has_jwt = true;
    return p;
}

}  // namespace awp::api
