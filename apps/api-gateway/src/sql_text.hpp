// SQL text the gateway writes itself: quoted identifiers and text[] literals (values go as
// bound parameters; these are for names and for a list bound as one text[] parameter).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace awp::api::sql_text {

/// `s` as a double-quoted SQL identifier.
inline std::string quote_ident(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

/// A text[] literal of the strings: {"a","b\"c"}.
inline std::string text_array(const std::vector<std::string>& v) {
    std::string out = "{";
    for (std::size_t i = 0; i < v.size(); ++i) {
        out += i ? ",\"" : "\"";
        for (char c : v[i]) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    return out + "}";
}

}  // namespace awp::api::sql_text
