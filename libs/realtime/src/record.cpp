// The postgres_changes `data` object (record.hpp): pgoutput's text values turned into the JSON
// the platform sends (its walrus builds it with to_jsonb), so a client reads the same types on
// awp as on a hosted project.
#include "awp/realtime/record.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

namespace awp::realtime {

namespace {

constexpr int kMaxArrayDepth = 6;  // Postgres's MAXDIM

bool is_number_type(std::string_view t) {
    return t == "int2" || t == "int4" || t == "int8" || t == "float4" || t == "float8" ||
           t == "numeric" || t == "oid";
}

/// JSON's number grammar (Postgres prints NaN and Infinity, which JSON has not).
bool json_number(std::string_view s) {
    std::size_t i = 0;
    auto digits = [&] {
        const auto start = i;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        return i > start;
    };
    if (i < s.size() && s[i] == '-') ++i;
    if (i < s.size() && s[i] == '0') {
        ++i;
    } else if (!digits()) {
        return false;
    }
    if (i < s.size() && s[i] == '.') {
        ++i;
        if (!digits()) return false;
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
        const auto start = i;
        if (!digits()) return false;
        // Past a double's range a JSON parser refuses the number or makes it Infinity: text.
        if (i - start > 3 || std::stoi(std::string(s.substr(start, i - start))) > 308) return false;
    }
    return i == s.size();
}

/// "2026-11-26 23:40:35.758+00" as to_jsonb prints it: "2026-11-26T23:40:35.758+00:00".
std::string iso_timestamp(std::string_view s, bool with_zone) {
    std::string out(s);
    const auto sp = out.find(' ');
    if (sp == std::string::npos || sp != 10) return out;  // infinity, BC years: as printed
    if (out.find(' ', sp + 1) != std::string::npos) return out;
    out[sp] = 'T';
    if (with_zone) {
        const auto z = out.find_last_of("+-");
        if (z != std::string::npos && z > sp && out.size() - z == 3) out += ":00";
    }
    return out;
}

/// The text with every byte that is not part of well-formed UTF-8 replaced by U+FFFD: a
/// database of another encoding (SQL_ASCII) must not put invalid UTF-8 in a text frame, which
/// a browser answers by failing the connection.
std::string valid_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 8);
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t n = 0;
        if (c < 0x80) {
            n = 1;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
        }
        if (n > 0 && i + n <= s.size() && core::json::is_utf8(s.substr(i, n))) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            out += "\xEF\xBF\xBD";
            ++i;
        }
    }
    return out;
}

void write_text(core::json::writer& j, std::string_view text) {
    if (core::json::is_utf8(text)) {
        j.str(text);
    } else {
        j.str(valid_utf8(text));
    }
}

void write_scalar(core::json::writer& j, std::string_view type, std::string_view text) {
    if (type == "bool") {
        if (text == "t") {
            j.w.Bool(true);
            return;
        }
        if (text == "f") {
            j.w.Bool(false);
            return;
        }
    } else if (is_number_type(type)) {
        if (json_number(text)) {
            j.w.RawValue(text.data(), text.size(), rapidjson::kNumberType);
            return;
        }
    } else if (type == "json" || type == "jsonb") {
        // Postgres checked it is JSON; an empty text would break the frame.
        if (!text.empty()) {
            j.w.RawValue(text.data(), text.size(), rapidjson::kObjectType);
            return;
        }
    } else if (type == "timestamptz" || type == "timestamp") {
        write_text(j, iso_timestamp(text, type == "timestamptz"));
        return;
    }
    write_text(j, text);
}

/// A Postgres array literal ({1,2,NULL}, {"a b","c\"d"}, {{1,2},{3,4}}) as a JSON array;
/// false when the text is not one (then the caller writes it as a string).
class array_parser {
public:
    array_parser(std::string_view s, std::string_view element) : s_(s), element_(element) {}
    bool write(core::json::writer& j) {
        core::json::writer probe;  // written apart: a failure half-way leaves j untouched
        if (!array(probe, 0) || i_ != s_.size()) return false;
        const auto text = probe.str();
        j.w.RawValue(text.data(), text.size(), rapidjson::kArrayType);
        return true;
    }

private:
    bool array(core::json::writer& j, int depth) {
        if (depth >= kMaxArrayDepth || i_ >= s_.size() || s_[i_] != '{') return false;
        ++i_;
        j.w.StartArray();
        if (i_ < s_.size() && s_[i_] == '}') {
            ++i_;
            j.w.EndArray();
            return true;
        }
        for (;;) {
            if (i_ >= s_.size()) return false;
            if (s_[i_] == '{') {
                if (!array(j, depth + 1)) return false;
            } else if (s_[i_] == '"') {
                std::string v;
                ++i_;
                while (i_ < s_.size() && s_[i_] != '"') {
                    if (s_[i_] == '\\') ++i_;
                    if (i_ >= s_.size()) return false;
                    v.push_back(s_[i_++]);
                }
                if (i_ >= s_.size()) return false;
                ++i_;
                write_scalar(j, element_, v);
            } else {
                const auto start = i_;
                while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}') ++i_;
                const auto v = s_.substr(start, i_ - start);
                if (v.empty()) return false;
                std::string low(v);
                std::transform(low.begin(), low.end(), low.begin(),
                               [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
                if (low == "null") {
                    j.w.Null();
                } else {
                    write_scalar(j, element_, v);
                }
            }
            if (i_ >= s_.size()) return false;
            if (s_[i_] == ',') {
                ++i_;
                continue;
            }
            if (s_[i_] == '}') {
                ++i_;
                j.w.EndArray();
                return true;
            }
            return false;
        }
    }

    std::string_view s_;
    std::string_view element_;
    std::size_t i_ = 0;
};

using allowed_set = std::set<std::string, std::less<>>;

bool shown(const allowed_set* allowed, const std::string& name) {
    return !allowed || allowed->contains(name);
}

void write_columns(core::json::writer& j, const std::vector<column_value>& cols,
                   const allowed_set* allowed) {
    j.w.StartArray();
    for (const auto& c : cols) {
        if (!shown(allowed, c.name)) continue;
        j.w.StartObject();
        j.kv("name", c.name);
        j.kv("type", c.type);
        j.w.EndObject();
    }
    j.w.EndArray();
}

void write_row(core::json::writer& j, const std::vector<column_value>& cols, bool keys_only,
               const allowed_set* allowed, const std::vector<std::string>& primary_key = {}) {
    j.w.StartObject();
    for (const auto& c : cols) {
        if (!shown(allowed, c.name)) continue;
        if (keys_only && !c.key) continue;
        if (keys_only && !primary_key.empty() &&
            std::find(primary_key.begin(), primary_key.end(), c.name) == primary_key.end()) {
            continue;
        }
        j.key(c.name);
        if (!c.text) {
            j.w.Null();
        } else {
            write_value(j, c.type, *c.text);
        }
    }
    j.w.EndObject();
}

}  // namespace

void write_value(core::json::writer& j, std::string_view type, std::string_view text) {
    if (type.size() > 1 && type.front() == '_' && type != "_") {
        array_parser p(text, type.substr(1));
        if (p.write(j)) return;
        write_text(j, text);
        return;
    }
    write_scalar(j, type, text);
}

std::string change_data(const change& c, const std::vector<std::string>& primary_key,
                        const allowed_set* columns) {
    core::json::writer j;
    j.w.StartObject();
    j.kv("schema", c.schema);
    j.kv("table", c.table);
    j.kv("commit_timestamp", c.commit_timestamp);
    const char* type = c.kind == change_kind::insert   ? "INSERT"
                       : c.kind == change_kind::update ? "UPDATE"
                                                       : "DELETE";
    j.kv("type", type);
    j.key("columns");
    write_columns(j, c.kind == change_kind::remove ? c.old_keys : c.new_row, columns);
    if (c.kind != change_kind::remove) {
        j.key("record");
        write_row(j, c.new_row, false, columns);
    }
    if (c.kind == change_kind::update) {
        j.key("old_record");
        if (!c.old_keys.empty()) {
            write_row(j, c.old_keys, true, columns, primary_key);
        } else {
            write_row(j, c.new_row, true, columns, primary_key);  // the key did not change
        }
    } else if (c.kind == change_kind::remove) {
        j.key("old_record");
        write_row(j, c.old_keys, true, columns, primary_key);
    }
    j.key("errors");
    j.w.Null();
    j.w.EndObject();
    return j.str();
}

std::string change_payload(const std::vector<std::uint64_t>& ids, std::string_view data_json) {
    core::json::writer j;
    j.w.StartObject();
    j.key("ids");
    j.w.StartArray();
    for (auto id : ids) j.w.Uint64(id);
    j.w.EndArray();
    j.key("data");
    j.raw(data_json);
    j.w.EndObject();
    return j.str();
}

}  // namespace awp::realtime
