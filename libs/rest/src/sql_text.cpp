// SQL text helpers of the data API (sql_text.hpp).
#include "sql_text.hpp"

#include <array>
#include <cctype>
#include <utility>

#include "awp/core/json.hpp"
#include "awp/rest/error.hpp"

namespace awp::rest::detail {

std::string ident(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out += '"';
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    out += '"';
    return out;
}

std::string qname(const qualified_name& q) {
    if (q.schema.empty()) return ident(q.name);
    return ident(q.schema) + "." + ident(q.name);
}

std::string literal(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 3);
    bool backslash = false;
    out += '\'';
    for (char c : s) {
        if (c == '\'') out += '\'';
        if (c == '\\') {
            out += '\\';
            backslash = true;
        }
        out += c;
    }
    out += '\'';
    return backslash ? "E" + out : out;
}

std::string binder::bind(std::string value) {
    params_.emplace_back(std::move(value));
    return "$" + std::to_string(params_.size());
}

std::string binder::bind_null() {
    params_.emplace_back(std::nullopt);
    return "$" + std::to_string(params_.size());
}

namespace {

// The spellings SQL's grammar gives to built-in types (not names a quoted identifier finds).
constexpr std::array<std::pair<std::string_view, std::string_view>, 27> kBuiltins{{
    {"int", "integer"},
    {"integer", "integer"},
    {"smallint", "smallint"},
    {"bigint", "bigint"},
    {"real", "real"},
    {"float", "double precision"},
    {"double precision", "double precision"},
    {"decimal", "numeric"},
    {"dec", "numeric"},
    {"numeric", "numeric"},
    {"boolean", "boolean"},
    {"bool", "boolean"},
    {"char", "character"},
    {"character", "character"},
    {"varchar", "character varying"},
    {"character varying", "character varying"},
    {"timestamp", "timestamp without time zone"},
    {"timestamp without time zone", "timestamp without time zone"},
    {"timestamp with time zone", "timestamp with time zone"},
    {"time", "time without time zone"},
    {"time without time zone", "time without time zone"},
    {"time with time zone", "time with time zone"},
    {"interval", "interval"},
    {"national character", "character"},
    {"national character varying", "character varying"},
    {"bit varying", "bit varying"},
    {"bit", "bit"},
}};

}  // namespace

std::string sql_type(std::string_view cast) {
    // Trim, fold to lower case and squeeze inner blanks, as the SQL lexer would read it.
    std::string t;
    bool space = false;
    for (char c : cast) {
        const auto u = static_cast<unsigned char>(c);
        if (c == ' ' || c == '\t') {
            space = !t.empty();
            continue;
        }
        if (!std::isalnum(u) && c != '_' && c != '$') {
            throw api_error(400, "PGRST100", "\"failed to parse cast\"",
                            "the cast '" + std::string(cast) + "' is not a type name");
        }
        if (space) t += ' ';
        space = false;
        t += static_cast<char>(std::tolower(u));
    }
    if (t.empty() || t.size() > 63 * 3) {
        throw api_error(400, "PGRST100", "\"failed to parse cast\"",
                        "the cast is empty or too long");
    }
    for (const auto& [name, sql] : kBuiltins) {
        if (t == name) return std::string(sql);
    }
    // The object identifier types look a name up in the catalog when text is cast to them, so
    // `name::regrole` on a value the caller wrote answers whether a role, table, function or
    // schema of that name exists (another tenant's gateway login, a table outside the exposed
    // schemas): refused, whatever the value.
    for (const std::string_view reg :
         {"regclass", "regrole", "regproc", "regprocedure", "regoper", "regoperator", "regtype",
          "regnamespace", "regconfig", "regdictionary", "regcollation"}) {
        if (t == reg) {
            throw api_error(400, "PGRST100", "\"failed to parse cast\"",
                            "the cast '" + std::string(cast) +
                                "' looks names up in the catalog and is not served");
        }
    }
    if (t.find(' ') != std::string::npos) {
        throw api_error(400, "PGRST100", "\"failed to parse cast\"",
                        "the cast '" + std::string(cast) + "' is not a type name");
    }
    return ident(t);
}

std::string json_string(std::string_view s) {
    core::json::writer w;
    w.str(s);
    return w.str();
}

std::string array_literal(const std::vector<std::string>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        out += '"';
        for (char c : values[i]) {
            if (c == '\0') continue;
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    out += '}';
    return out;
}

}  // namespace awp::rest::detail
