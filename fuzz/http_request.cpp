// The HTTP request framing as awp-api-gateway reads it (Boost.Beast's parser with the server's
// header limit and a body limit), then awp's own readers of a request: the query, cookies,
// media type, percent-decoding, the strict query decoding and the router's match (whose
// parameters are always text).
#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "awp/http/message.hpp"
#include "awp/http/server.hpp"

namespace {

const awp::http::router& routes() {
    static const awp::http::router r = [] {
        awp::http::router x;
        awp::http::handler none;
        for (const char* p :
             {"/api/health", "/api/agents/:slug/files", "/api/agents/:slug/files/*path",
              "/api/agents/:slug/skills/:id/versions", "/api/workspaces/switch"}) {
            x.add("GET", p, none);
            x.add("POST", p, none);
        }
        return x;
    }();
    return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace bhttp = boost::beast::http;
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(16 * 1024);
    parser.body_limit(64 * 1024);
    parser.eager(true);
    boost::system::error_code ec;
    parser.put(boost::asio::buffer(data, size), ec);
    if (ec || !parser.is_header_done()) return 0;
    const auto& hdr = parser.get();
    awp::http::request req;
    req.method = std::string(hdr.method_string());
    req.target = std::string(hdr.target());
    const auto q = req.target.find('?');
    req.path = req.target.substr(0, q);
    if (q != std::string::npos) req.query = req.target.substr(q + 1);
    for (const auto& f : hdr) req.header.add(std::string(f.name_string()), std::string(f.value()));
    req.query_params = awp::http::decode_query(req.query).params;
    (void)req.query_param("workspaceId");
    (void)req.cookies();
    (void)req.cookie("awp-auth-token");
    (void)req.media_type();
    (void)awp::http::parse_query(req.query);
    (void)awp::http::percent_decode(req.path, true);
    auto m = routes().match(req.method, req.path);
    // What the router hands on is text: every decoded parameter, whatever the input.
    for (const auto& [k, v] : m.params) {
        if (k != "path" && !awp::http::text_problem(v).empty()) __builtin_trap();
    }
    if (!m.bad_path.empty() && m.h != nullptr) __builtin_trap();
    return 0;
}
