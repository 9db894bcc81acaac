// Browser routes: the agent's Chromium over the DevTools protocol (not built yet).
#include "gateway.hpp"
#include "json.hpp"

namespace awp::api {

net::awaitable<response> gateway::browser_state(request r) {
    require_session(r);
    throw http::http_error(501, "not_implemented", "browser state is not available yet");
    co_return response{};
}

net::awaitable<response> gateway::browser_screenshot(request r) {
    require_session(r);
    throw http::http_error(501, "not_implemented", "browser screenshots are not available yet");
    co_return response{};
}

}  // namespace awp::api
