// PostgREST's error body and its SQLSTATE → HTTP status table (PostgREST v14, Error.hs), the one
// place awp spells them.
#include "awp/rest/error.hpp"

#include "awp/core/json.hpp"
#include "parsec.hpp"

namespace awp::rest {

std::string api_error::body() const {
    // Messages quote what the client sent (a header, a name); RapidJSON's writer would copy
    // invalid UTF-8 into the body as it is, so it is replaced here, once for every stage.
    auto text = [](const std::string& s) { return detail::lenient_utf8(s); };
    core::json::writer j;
    j.w.StartObject();
    j.kv("code", text(code_));
    j.key("details");
    if (!details_json.empty()) {
        j.raw(details_json);
    } else if (details_.empty()) {
        j.w.Null();
    } else {
        j.str(text(details_));
    }
    j.key("hint");
    if (hint_.empty()) {
        j.w.Null();
    } else {
        j.str(text(hint_));
    }
    j.kv("message", text(message_));
    j.w.EndObject();
    return j.str();
}

unsigned status_for_sqlstate(std::string_view s, std::string_view m, bool authenticated) noexcept {
    auto starts = [&](std::string_view p) { return s.substr(0, p.size()) == p; };
    auto ends = [&](std::string_view t) {
        return m.size() >= t.size() && m.substr(m.size() - t.size()) == t;
    };
    if (s.size() != 5) return 500;
    if (starts("08")) return 503;  // connection exception
    if (starts("09")) return 500;  // triggered action exception
    if (starts("0L")) return 403;  // invalid grantor
    if (starts("0P")) return 403;  // invalid role specification
    if (s == "23503" || s == "23505") return 409;
    if (s == "25006") return 405;  // read_only_sql_transaction
    if (s == "21000") return ends("requires a WHERE clause") ? 400 : 500;
    if (s == "22023") {
        return m.substr(0, 4) == "role" && ends("does not exist") ? 401 : 400;
    }
    if (starts("25")) return 500;
    if (starts("28")) return 403;
    if (starts("2D") || starts("38") || starts("39") || starts("3B") || starts("40")) return 500;
    if (s == "53400") return 500;
    if (starts("53")) return 503;
    if (starts("54") || starts("55")) return 500;
    if (s == "57P01") return 503;
    if (starts("57") || starts("58") || starts("F0") || starts("HV")) return 500;
    if (s == "P0001") return 400;
    if (starts("P0") || starts("XX")) return 500;
    if (s == "42883") return m.substr(0, 16) == "function xmlagg(" ? 406 : 404;
    if (s == "42P01") return 404;
    if (s == "42P17") return 500;
    if (s == "42501") return authenticated ? 403 : 401;
    if (starts("PT")) {
        unsigned n = 0;
        for (char c : s.substr(2)) {
            if (c < '0' || c > '9') return 500;
            n = n * 10 + static_cast<unsigned>(c - '0');
        }
        return n >= 100 && n <= 599 ? n : 500;
    }
    return 400;
}

api_error from_sql_error(std::string_view sqlstate, std::string message, std::string details,
                         std::string hint, bool authenticated) {
    const auto status = status_for_sqlstate(sqlstate, message, authenticated);
    api_error e(status, std::string(sqlstate), std::move(message), std::move(details),
                std::move(hint));
    if (status == 401) e.headers.emplace_back("WWW-Authenticate", "Bearer");
    return e;
}

std::string_view reason_phrase(unsigned status) noexcept {
    switch (status) {
        case 200:
            return "OK";
        case 201:
            return "Created";
        case 204:
            return "No Content";
        case 206:
            return "Partial Content";
        case 300:
            return "Multiple Choices";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 406:
            return "Not Acceptable";
        case 409:
            return "Conflict";
        case 413:
            return "Payload Too Large";
        case 414:
            return "URI Too Long";
        case 415:
            return "Unsupported Media Type";
        case 416:
            return "Requested Range Not Satisfiable";
        case 422:
            return "Unprocessable Entity";
        case 429:
            return "Too Many Requests";
        case 500:
            return "Internal Server Error";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        default:
            return "";
    }
}

}  // namespace awp::rest
