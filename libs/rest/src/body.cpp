// Request bodies as PostgREST's getPayload reads them (Payload.hs): a JSON object or array of
// objects with the same keys, text/csv (cassava's rules: the first line names the keys, "NULL"
// is null) and x-www-form-urlencoded bodies turned into the JSON the statement takes.
#include <algorithm>
#include <map>
#include <set>

#include "awp/core/json.hpp"
#include "internal.hpp"
#include "parsec.hpp"

namespace awp::rest::detail {
namespace {

/// JSON deeper than this is refused here rather than by Postgres (stack depth: a 500).
constexpr unsigned kMaxBodyDepth = 512;

[[noreturn]] void invalid_body(std::string message) {
    throw api_error(400, "PGRST102", std::move(message));
}

std::vector<std::string> key_set(const rapidjson::Value& o) {
    std::set<std::string> keys;
    for (auto it = o.MemberBegin(); it != o.MemberEnd(); ++it) {
        keys.emplace(it->name.GetString(), it->name.GetStringLength());
    }
    return {keys.begin(), keys.end()};
}

// ---- CSV (cassava's parser, RFC 4180 with its extensions) -----------------------------------

struct csv_error {
    std::string reason;
    std::size_t at;
};

class csv_reader {
public:
    explicit csv_reader(std::string_view s) : s_(s) {}

    /// Header line, then records; blank lines dropped.
    std::vector<std::vector<std::string>> read(std::vector<std::string>& header) {
        header = record();
        if (!end_of_line()) throw csv_error{"endOfLine", i_};
        std::vector<std::vector<std::string>> rows;
        auto keep = [&](std::vector<std::string> r) {
            if (!(r.size() == 1 && r.front().empty())) rows.push_back(std::move(r));
        };
        keep(record());
        for (;;) {
            if (i_ < s_.size() && s_[i_] == '\r') {
                if (i_ + 1 >= s_.size() || s_[i_ + 1] != '\n') throw csv_error{"'\\n'", i_ + 1};
                i_ += 2;
            } else if (i_ < s_.size() && s_[i_] == '\n') {
                ++i_;
            } else {
                break;
            }
            keep(record());
        }
        (void)end_of_line();
        if (i_ != s_.size()) throw csv_error{"endOfInput", i_};
        return rows;
    }

private:
    bool end_of_line() {
        if (i_ < s_.size() && s_[i_] == '\n') {
            ++i_;
            return true;
        }
        if (i_ < s_.size() && s_[i_] == '\r') {
            i_ += i_ + 1 < s_.size() && s_[i_ + 1] == '\n' ? 2 : 1;
            return true;
        }
        return false;
    }

    std::vector<std::string> record() {
        std::vector<std::string> fields{field()};
        while (i_ < s_.size() && s_[i_] == ',') {
            ++i_;
            fields.push_back(field());
        }
        return fields;
    }

    std::string field() {
        if (i_ < s_.size() && s_[i_] == '"') return escaped();
        const std::size_t from = i_;
        while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\n' && s_[i_] != ',' &&
               s_[i_] != '\r') {
            ++i_;
        }
        return std::string(s_.substr(from, i_ - from));
    }

    /// A quoted field: scanned to the first quote not doubled; its last character dropped
    /// (the closing quote, or, at the end of the body, whatever came last: cassava's rule).
    std::string escaped() {
        ++i_;
        const std::size_t from = i_;
        bool quote = false;
        while (i_ < s_.size()) {
            const char c = s_[i_];
            if (c == '"') {
                quote = !quote;
            } else if (quote) {
                break;
            }
            ++i_;
        }
        std::string_view raw = s_.substr(from, i_ - from);
        if (raw.empty()) throw csv_error{"Failed reading: trailing double quote", i_};
        raw.remove_suffix(1);
        std::string out;
        for (std::size_t k = 0; k < raw.size(); ++k) {
            if (raw[k] != '"') {
                out += raw[k];
                continue;
            }
            if (k + 1 < raw.size() && raw[k + 1] == '"') {
                out += '"';
                ++k;
                continue;
            }
            throw csv_error{"Failed reading: invalid CSV escape sequence", from + k};
        }
        return out;
    }

    std::string_view s_;
    std::size_t i_ = 0;
};

/// cassava shows what it could not read as Latin-1 characters (quoted when short).
std::string left_over(std::string_view s) {
    std::u32string u;
    for (char c : s.substr(0, 100)) u.push_back(static_cast<unsigned char>(c));
    return s.size() > 100 ? to_utf8(u) + " (truncated)" : show_string(u);
}

// ---- form bodies ----------------------------------------------------------------------------

/// urlDecode True as http-types does it: a malformed escape stays as it is.
std::string form_decode(std::string_view s) {
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '+') {
            out += ' ';
        } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

void check_text(const std::string& s, std::string_view what) {
    std::u32string ignored;
    if (s.find('\0') != std::string::npos || !decode_utf8(s, ignored)) {
        invalid_body("The " + std::string(what) + " body is not UTF-8 text without NUL bytes");
    }
}

}  // namespace

void read_json_body(std::string_view body, bool is_call, api_request& out) {
    if (body.empty() && is_call) {  // a call without a body: no arguments
        out.body.clear();
        return;
    }
    if (body.empty()) invalid_body("Empty or invalid json");
    rapidjson::Document doc;
    try {
        doc = core::json::parse(body, {body.size() + 1, kMaxBodyDepth});
    } catch (const core::json::parse_error& e) {
        if (std::string_view(e.what()).find("nested deeper") != std::string_view::npos) {
            invalid_body("The JSON body is nested deeper than " + std::to_string(kMaxBodyDepth) +
                         " levels");
        }
        invalid_body("Empty or invalid json");
    }
    if (doc.IsObject()) {
        out.body = std::string(body);
        out.body_keys = key_set(doc);
        return;
    }
    out.body_is_array = true;
    if (!doc.IsArray() || doc.Empty()) {  // anything else is an empty array (PostgREST's rule)
        out.body = "[]";
        return;
    }
    if (!doc[0].IsObject()) invalid_body("All object keys must match");
    auto keys = key_set(doc[0]);
    for (const auto& v : doc.GetArray()) {
        if (!v.IsObject() || key_set(v) != keys) invalid_body("All object keys must match");
    }
    out.body = std::string(body);
    out.body_keys = std::move(keys);
}

void read_csv_body(std::string_view body, api_request& out) {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
    try {
        rows = csv_reader(body).read(header);
    } catch (const csv_error& e) {
        const auto left = body.substr(std::min(e.at, body.size()));
        invalid_body("parse error (" + e.reason + ") at " + left_over(left));
    }
    for (const auto& h : header) check_text(h, "CSV");
    core::json::writer j;
    j.w.StartArray();
    std::optional<std::vector<std::string>> first_keys;
    for (const auto& row : rows) {
        // zip header and record (the shorter decides), the last of a repeated name wins
        std::map<std::string, const std::string*> obj;
        for (std::size_t k = 0; k < std::min(header.size(), row.size()); ++k)
            obj[header[k]] = &row[k];
        std::vector<std::string> keys;
        j.w.StartObject();
        for (const auto& [name, value] : obj) {
            keys.push_back(name);
            check_text(*value, "CSV");
            j.key(name);
            if (*value == "NULL") {
                j.w.Null();
            } else {
                j.str(*value);
            }
        }
        j.w.EndObject();
        if (!first_keys) {
            first_keys = keys;
        } else if (keys != *first_keys) {
            invalid_body("All lines must have same number of fields");
        }
    }
    j.w.EndArray();
    out.body_is_array = true;
    out.body = rows.empty() ? "[]" : j.str();
    out.body_keys = first_keys.value_or(std::vector<std::string>{});
}

void read_form_body(std::string_view body, api_request& out) {
    std::map<std::string, std::string> fields;  // the last of a repeated name wins
    while (!body.empty()) {
        const auto sep = body.find_first_of("&;");
        const auto item = body.substr(0, sep);
        const auto eq = item.find('=');
        std::string key = form_decode(item.substr(0, eq));
        std::string value =
            eq == std::string_view::npos ? std::string() : form_decode(item.substr(eq + 1));
        check_text(key, "form");
        check_text(value, "form");
        fields[std::move(key)] = std::move(value);
        if (sep == std::string_view::npos) break;
        body.remove_prefix(sep + 1);
    }
    core::json::writer j;
    j.w.StartObject();
    for (const auto& [k, v] : fields) {
        j.kv(k, v);
        out.body_keys.push_back(k);
    }
    j.w.EndObject();
    out.body = j.str();
}

}  // namespace awp::rest::detail
