// pg_node_tree text into a tree (node_tree.hpp): the tokens as PostgreSQL's pg_strtok cuts them
// (whitespace and ( ) { } delimit, a backslash keeps the next character), nodes, lists, NULL and
// datums, each bounded.
#include "awp/realtime/node_tree.hpp"

#include <charconv>
#include <cstring>

namespace awp::realtime::node_tree {

namespace {

bool delimiter(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '(' || c == ')' || c == '{' ||
           c == '}';
}

class reader {
public:
    reader(std::string_view text, const limits& l) : s_(text), l_(l) {
        if (text.size() > l.max_bytes) {
            throw parse_error("a node tree above " + std::to_string(l.max_bytes) + " bytes", 0);
        }
    }

    value read_all() {
        auto v = read_value(0);
        skip_space();
        if (pos_ != s_.size()) throw parse_error("text after the tree", pos_);
        return v;
    }

private:
    struct token {
        std::string_view raw;  // as in the text (backslashes kept)
        std::size_t at = 0;
        bool end = false;
    };

    void skip_space() {
        while (pos_ < s_.size() &&
               (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) {
            ++pos_;
        }
    }

    token next() {
        skip_space();
        token t;
        t.at = pos_;
        if (pos_ >= s_.size()) {
            t.end = true;
            return t;
        }
        const char c = s_[pos_];
        if (c == '(' || c == ')' || c == '{' || c == '}') {
            t.raw = s_.substr(pos_, 1);
            ++pos_;
            return t;
        }
        const std::size_t start = pos_;
        while (pos_ < s_.size() && !delimiter(s_[pos_])) {
            if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) {
                pos_ += 2;
            } else {
                ++pos_;
            }
        }
        t.raw = s_.substr(start, pos_ - start);
        return t;
    }

    token peek() {
        const auto save = pos_;
        auto t = next();
        pos_ = save;
        return t;
    }

    static std::string unescape(std::string_view raw) {
        std::string out;
        out.reserve(raw.size());
        for (std::size_t i = 0; i < raw.size(); ++i) {
            if (raw[i] == '\\' && i + 1 < raw.size()) ++i;
            out += raw[i];
        }
        return out;
    }

    static bool numeric(std::string_view raw) {
        if (raw.empty()) return false;
        std::size_t i = raw[0] == '-' ? 1 : 0;
        if (i == raw.size()) return false;
        for (; i < raw.size(); ++i) {
            if (raw[i] < '0' || raw[i] > '9') return false;
        }
        return true;
    }

    value read_value(unsigned depth) {
        auto t = next();
        if (t.end) throw parse_error("the tree ends early", t.at);
        return from(t, depth);
    }

    value from(const token& t, unsigned depth) {
        if (t.raw == "{") return read_node(t.at, depth + 1);
        if (t.raw == "(") return read_list(t.at, depth + 1);
        if (t.raw == ")" || t.raw == "}")
            throw parse_error("an unexpected " + std::string(t.raw), t.at);
        if (t.raw == "<>") return value{};
        if (numeric(t.raw)) {
            auto p = peek();
            if (!p.end && p.raw == "[") return read_datum(t);
        }
        value v;
        v.what = value::kind::token;
        v.text = unescape(t.raw);
        return v;
    }

    value read_datum(const token& length) {
        (void)next();  // [
        std::size_t declared = 0;
        const auto r =
            std::from_chars(length.raw.data(), length.raw.data() + length.raw.size(), declared);
        if (r.ec != std::errc() || declared > l_.max_bytes) {
            throw parse_error("a datum's length is not a size", length.at);
        }
        value v;
        v.what = value::kind::datum;
        for (;;) {
            auto b = next();
            if (b.end) throw parse_error("a datum ends early", b.at);
            if (b.raw == "]") break;
            int n = 0;
            const auto br = std::from_chars(b.raw.data(), b.raw.data() + b.raw.size(), n);
            if (br.ec != std::errc() || br.ptr != b.raw.data() + b.raw.size() || n < -128 ||
                n > 255) {
                throw parse_error("a datum byte is not a byte", b.at);
            }
            if (v.text.size() >= l_.max_bytes) throw parse_error("a datum too long", b.at);
            v.text += static_cast<char>(static_cast<unsigned char>(n & 0xFF));
        }
        return v;
    }

    value read_node(std::size_t at, unsigned depth) {
        if (depth > l_.max_depth) {
            throw parse_error("a node tree nested deeper than " + std::to_string(l_.max_depth), at);
        }
        auto tag = next();
        if (tag.end || tag.raw.empty() || delimiter(tag.raw[0])) {
            throw parse_error("a node without a tag", tag.at);
        }
        value v;
        v.what = value::kind::node;
        v.text = unescape(tag.raw);
        for (;;) {
            auto t = next();
            if (t.end) throw parse_error("a node ends early", t.at);
            if (t.raw == "}") break;
            if (t.raw.size() < 2 || t.raw[0] != ':') {
                throw parse_error("a node field is not named", t.at);
            }
            v.names.push_back(unescape(t.raw.substr(1)));
            // Every field is written with a value (a token that starts with ':' included).
            v.items.push_back(read_value(depth));
        }
        return v;
    }

    value read_list(std::size_t at, unsigned depth) {
        if (depth > l_.max_depth) {
            throw parse_error("a node tree nested deeper than " + std::to_string(l_.max_depth), at);
        }
        value v;
        v.what = value::kind::list;
        for (;;) {
            auto t = next();
            if (t.end) throw parse_error("a list ends early", t.at);
            if (t.raw == ")") break;
            v.items.push_back(from(t, depth));
        }
        return v;
    }

    std::string_view s_;
    const limits& l_;
    std::size_t pos_ = 0;
};

/// The bytes of a varlena datum (its header read and checked), or nullopt when it is not a plain
/// one (compressed, external) or its length lies.
std::optional<std::string_view> varlena(std::string_view d) {
    if (d.empty()) return std::nullopt;
    const auto b0 = static_cast<unsigned char>(d[0]);
    if ((b0 & 0x01U) == 0x01U) {  // one-byte header: length (header included) in the high bits
        if (b0 == 0x01U) return std::nullopt;  // an external pointer
        const std::size_t len = b0 >> 1U;
        if (len < 1 || len > d.size()) return std::nullopt;
        return d.substr(1, len - 1);
    }
    if (d.size() < 4 || (b0 & 0x03U) != 0) return std::nullopt;  // compressed, or too short
    std::uint32_t h = 0;
    for (int i = 3; i >= 0; --i) {
        h = (h << 8U) | static_cast<unsigned char>(d[static_cast<std::size_t>(i)]);
    }
    const std::size_t len = h >> 2U;
    if (len < 4 || len > d.size()) return std::nullopt;
    return d.substr(4, len - 4);
}

std::int64_t little_endian(std::string_view d, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8U) | static_cast<unsigned char>(d[i]);
    if (n < 8 && (v >> (8 * n - 1)) != 0) v |= ~((std::uint64_t{1} << (8 * n)) - 1);  // sign
    return static_cast<std::int64_t>(v);
}

/// A non-null CONST's type and datum.
std::optional<std::pair<std::int64_t, const value*>> const_parts(const value& c) {
    if (!c.is_node("CONST")) return std::nullopt;
    if (c.boolean("constisnull").value_or(true)) return std::nullopt;
    const auto type = c.number("consttype");
    const auto* d = c.field("constvalue");
    if (!type || !d || d->what != value::kind::datum) return std::nullopt;
    return std::make_pair(*type, d);
}

}  // namespace

const value* value::field(std::string_view name) const noexcept {
    if (what != kind::node) return nullptr;
    for (std::size_t i = 0; i < names.size() && i < items.size(); ++i) {
        if (names[i] == name) return &items[i];
    }
    return nullptr;
}

std::optional<std::int64_t> value::number(std::string_view name) const {
    const auto* f = field(name);
    if (!f || f->what != kind::token) return std::nullopt;
    std::int64_t n = 0;
    const auto& t = f->text;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), n);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
    return n;
}

std::optional<bool> value::boolean(std::string_view name) const {
    const auto* f = field(name);
    if (!f || f->what != kind::token) return std::nullopt;
    if (f->text == "true") return true;
    if (f->text == "false") return false;
    return std::nullopt;
}

value parse(std::string_view text, const limits& l) {
    reader r(text, l);
    return r.read_all();
}

std::optional<std::string> const_text(const value& c) {
    const auto parts = const_parts(c);
    if (!parts) return std::nullopt;
    const auto [type, d] = *parts;
    switch (type) {
        case 25:     // text
        case 1043:   // varchar
        case 1042:   // bpchar
        case 705: {  // unknown (a varlena here; cstring-like only in old trees)
            auto body = varlena(d->text);
            if (!body) return std::nullopt;
            return std::string(*body);
        }
        case 19: {  // name: NAMEDATALEN bytes, NUL-padded
            const auto& t = d->text;
            return t.substr(0, std::min(t.find('\0'), t.size()));
        }
        default:
            return std::nullopt;
    }
}

std::optional<std::int64_t> const_integer(const value& c) {
    const auto parts = const_parts(c);
    if (!parts) return std::nullopt;
    const auto [type, d] = *parts;
    const auto& t = d->text;
    switch (type) {
        case 21:  // int2
            return t.size() >= 2 ? std::optional(little_endian(t, 2)) : std::nullopt;
        case 23:  // int4
            return t.size() >= 4 ? std::optional(little_endian(t, 4)) : std::nullopt;
        case 26:  // oid (unsigned)
            return t.size() >= 4 ? std::optional(little_endian(t, 4) & 0xFFFFFFFFLL) : std::nullopt;
        case 20:  // int8
            return t.size() >= 8 ? std::optional(little_endian(t, 8)) : std::nullopt;
        default:
            return std::nullopt;
    }
}

std::optional<bool> const_bool(const value& c) {
    const auto parts = const_parts(c);
    if (!parts || parts->first != 16 || parts->second->text.empty()) return std::nullopt;
    return parts->second->text[0] != 0;
}

std::optional<std::vector<std::string>> const_text_array(const value& c) {
    const auto parts = const_parts(c);
    if (!parts || parts->first != 1009) return std::nullopt;  // _text
    const auto whole = varlena(parts->second->text);
    if (!whole) return std::nullopt;
    // The array's header after the varlena's: ndim, dataoffset (0: no NULLs), element type,
    // then dims[ndim] and lbounds[ndim]; the elements start at MAXALIGN(16 + 8 * ndim) of the
    // whole datum, each a varlena aligned to 4 bytes.
    const std::string_view d = parts->second->text;
    if (d.size() < 16) return std::nullopt;
    const auto ndim = little_endian(d.substr(4), 4);
    const auto dataoffset = little_endian(d.substr(8), 4);
    const auto elemtype = little_endian(d.substr(12), 4);
    std::vector<std::string> out;
    if (ndim == 0) return out;
    if (ndim != 1 || dataoffset != 0 || elemtype != 25 || d.size() < 24) return std::nullopt;
    const auto n = little_endian(d.substr(16), 4);
    if (n < 0 || n > 10000) return std::nullopt;
    std::size_t pos = 24;  // MAXALIGN(16 + 8)
    const std::size_t end = 4 + whole->size();
    for (std::int64_t i = 0; i < n; ++i) {
        if (pos < end && (static_cast<unsigned char>(d[pos]) & 0x01U) == 0) {
            pos = (pos + 3) & ~std::size_t{3};  // a 4-byte header is aligned
        }
        if (pos >= end) return std::nullopt;
        const auto el = varlena(d.substr(pos, end - pos));
        if (!el) return std::nullopt;
        const bool short_header = (static_cast<unsigned char>(d[pos]) & 0x01U) == 0x01U;
        out.emplace_back(*el);
        pos += el->size() + (short_header ? 1 : 4);
    }
    return out;
}

}  // namespace awp::realtime::node_tree
