// Sources routes: connectors, browse/validate, OAuth 2 with PKCE (not built yet).
#include "gateway.hpp"
#include "json.hpp"

namespace awp::api {

namespace {
[[noreturn]] void not_yet() {
    throw http::http_error(501, "not_implemented", "sources are not available yet");
}
}  // namespace

net::awaitable<response> gateway::sources_browse(request r) {
    require_session(r);
    not_yet();
    co_return response{};
}
net::awaitable<response> gateway::sources_validate(request r) {
    require_session(r);
    not_yet();
    co_return response{};
}
net::awaitable<response> gateway::oauth_start(request r) {
    require_session(r);
    not_yet();
    co_return response{};
}
net::awaitable<response> gateway::oauth_callback(request r) {
    require_session(r);
    not_yet();
    co_return response{};
}

}  // namespace awp::api
