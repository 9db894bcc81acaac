// The headers the dialect reads, as PostgREST v14 reads them: Prefer (Preferences.hs), Accept
// with q-values (wai-extra's parseHttpAccept) and media types (MediaType.hs), and Range
// (RangeQuery.hs) with PostgREST's range algebra.
#include <algorithm>
#include <cmath>
#include <map>

#include "internal.hpp"
#include "parsec.hpp"

namespace awp::rest {
namespace {

// ---- Prefer -------------------------------------------------------------------------------

/// Data.ByteString.Char8's isSpace: ASCII whitespace and Latin-1's no-break space.
bool is_space8(char c) noexcept {
    const auto u = static_cast<unsigned char>(c);
    return u == ' ' || (u >= '\t' && u <= '\r') || u == 0xA0;
}

std::string_view strip8(std::string_view s) {
    while (!s.empty() && is_space8(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space8(s.back())) s.remove_suffix(1);
    return s;
}

template <class E>
struct token {
    std::string_view text;
    E value;
};

constexpr token<prefer_resolution> kResolution[] = {
    {"resolution=merge-duplicates", prefer_resolution::merge_duplicates},
    {"resolution=ignore-duplicates", prefer_resolution::ignore_duplicates}};
constexpr token<prefer_return> kReturn[] = {
    {"return=representation", prefer_return::representation},
    {"return=minimal", prefer_return::minimal},
    {"return=headers-only", prefer_return::headers_only}};
constexpr token<prefer_count> kCount[] = {{"count=exact", prefer_count::exact},
                                          {"count=planned", prefer_count::planned},
                                          {"count=estimated", prefer_count::estimated}};
constexpr token<prefer_tx> kTx[] = {{"tx=commit", prefer_tx::commit},
                                    {"tx=rollback", prefer_tx::rollback}};
constexpr token<prefer_missing> kMissing[] = {{"missing=default", prefer_missing::apply_defaults},
                                              {"missing=null", prefer_missing::apply_nulls}};
constexpr token<prefer_handling> kHandling[] = {{"handling=strict", prefer_handling::strict},
                                                {"handling=lenient", prefer_handling::lenient}};

template <class E, std::size_t N>
bool known(std::string_view t, const token<E> (&set)[N]) {
    return std::any_of(std::begin(set), std::end(set), [&](const auto& k) { return k.text == t; });
}

/// parsePrefs: the value of the first token that is one of `set`.
template <class E, std::size_t N>
void first_of(const std::vector<std::string_view>& tokens, const token<E> (&set)[N], E& out) {
    for (auto t : tokens) {
        for (const auto& k : set) {
            if (k.text == t) {
                out = k.value;
                return;
            }
        }
    }
}

template <class E, std::size_t N>
std::string_view name_of(E v, const token<E> (&set)[N]) {
    for (const auto& k : set) {
        if (k.value == v) return k.text;
    }
    return {};
}

// ---- Accept and media types ---------------------------------------------------------------

bool is_alnum_latin1(char32_t c) noexcept {
    return (c >= U'0' && c <= U'9') || detail::is_alpha(c) || c == 0xB2 || c == 0xB3 || c == 0xB9 ||
           (c >= 0xBC && c <= 0xBE);
}

bool is_space_latin1(char32_t c) noexcept {
    return c == U' ' || (c >= U'\t' && c <= U'\r') || c == 0xA0;
}

char32_t lower(char32_t c) noexcept {
    if ((c >= U'A' && c <= U'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
    return c;
}

std::u32string lower(std::u32string s) {
    for (auto& c : s) c = lower(c);
    return s;
}

/// tokenizeMediaType: type, subtype and parameters (keys lowercased, the last of a key wins),
/// or nothing when the type and subtype are not there.
struct media_tokens {
    std::u32string type, subtype;
    std::map<std::u32string, std::u32string> params;
};

std::optional<media_tokens> tokenize(const std::u32string& s) {
    std::size_t i = 0;
    auto take = [&](auto pred) {
        const std::size_t from = i;
        while (i < s.size() && pred(s[i])) ++i;
        return s.substr(from, i - from);
    };
    auto skip_spaces = [&] {
        while (i < s.size() && is_space_latin1(s[i])) ++i;
    };
    media_tokens t;
    t.type = take([](char32_t c) { return is_alnum_latin1(c) || c == U'.' || c == U'*'; });
    if (t.type.empty() || i >= s.size() || s[i] != U'/') return std::nullopt;
    ++i;
    t.subtype = take([](char32_t c) {
        return is_alnum_latin1(c) || c == U'.' || c == U'*' || c == U'+' || c == U'-';
    });
    if (t.subtype.empty()) return std::nullopt;
    // many (try (spaces ';' spaces key spaces '=' spaces value)): a failed item is not consumed
    for (;;) {
        const std::size_t back = i;
        skip_spaces();
        if (i >= s.size() || s[i] != U';') {
            i = back;
            break;
        }
        ++i;
        skip_spaces();
        auto key = take([](char32_t c) { return is_alnum_latin1(c) || c == U'-'; });
        skip_spaces();
        if (key.empty() || i >= s.size() || s[i] != U'=') {
            i = back;
            break;
        }
        ++i;
        skip_spaces();
        std::u32string value;
        bool got = false;
        if (i < s.size() && s[i] == U'"') {
            const auto close = s.find(U'"', i + 1);
            if (close != std::u32string::npos) {
                value = s.substr(i + 1, close - i - 1);
                i = close + 1;
                got = true;
            }
        }
        if (!got) {
            value = take([](char32_t c) { return is_alnum_latin1(c) || c == U'|' || c == U'-'; });
            got = !value.empty();
        }
        if (!got) {
            i = back;
            break;
        }
        t.params[lower(key)] = value;
    }
    return t;
}

detail::decoded_media decode(const std::u32string& text) {
    detail::decoded_media out;
    media_type& m = out.type;
    const auto tok = tokenize(text);
    const std::u32string type = tok ? lower(tok->type) : lower(text);
    const std::u32string sub = tok ? lower(tok->subtype) : std::u32string();
    auto param = [&](const std::u32string& k) -> std::optional<std::u32string> {
        if (!tok) return std::nullopt;
        auto it = tok->params.find(k);
        if (it == tok->params.end()) return std::nullopt;
        return it->second;
    };
    const bool stripped = param(U"nulls") == std::optional<std::u32string>(U"stripped");
    auto set = [&](media k, std::string raw) {
        m.kind = k;
        m.raw = std::move(raw);
    };
    if (type == U"application" && sub == U"json") {
        set(media::json, "application/json");
    } else if (type == U"application" && sub == U"geo+json") {
        set(media::geojson, "application/geo+json");
    } else if (type == U"text" && sub == U"csv") {
        set(media::csv, "text/csv");
    } else if (type == U"text" && sub == U"plain") {
        set(media::text, "text/plain");
    } else if (type == U"text" && sub == U"xml") {
        set(media::xml, "text/xml");
    } else if (type == U"application" && sub == U"openapi+json") {
        set(media::openapi, "application/openapi+json");
    } else if (type == U"application" && sub == U"x-www-form-urlencoded") {
        set(media::other, "application/x-www-form-urlencoded");
        out.urlencoded = true;
    } else if (type == U"application" && sub == U"octet-stream") {
        set(media::octet, "application/octet-stream");
    } else if (type == U"application" &&
               (sub == U"vnd.pgrst.plan" || sub == U"vnd.pgrst.plan+text" ||
                sub == U"vnd.pgrst.plan+json")) {
        m.kind = media::plan;
        m.plan_text = sub != U"vnd.pgrst.plan+json";
        const auto f = param(U"for");
        m.plan_for = decode(f ? *f : std::u32string(U"application/json")).type.raw;
        std::vector<std::u32string> opts;
        if (const auto o = param(U"options")) {
            std::size_t from = 0;
            for (;;) {
                const auto bar = o->find(U'|', from);
                opts.push_back(o->substr(from, bar == std::u32string::npos ? bar : bar - from));
                if (bar == std::u32string::npos) break;
                from = bar + 1;
            }
        }
        for (const auto* name : {U"analyze", U"verbose", U"settings", U"buffers", U"wal"}) {
            if (std::find(opts.begin(), opts.end(), name) != opts.end()) {
                m.plan_options.push_back(detail::to_utf8(name));
            }
        }
        m.raw = std::string("application/vnd.pgrst.plan+") + (m.plan_text ? "text" : "json") +
                "; for=\"" + m.plan_for + "\"";
        if (!m.plan_options.empty()) {
            m.raw += "; options=";
            for (std::size_t i = 0; i < m.plan_options.size(); ++i) {
                if (i > 0) m.raw += '|';
                m.raw += m.plan_options[i];
            }
        }
    } else if (type == U"application" &&
               (sub == U"vnd.pgrst.object+json" || sub == U"vnd.pgrst.object")) {
        if (stripped) {
            set(media::object_nulls, "application/vnd.pgrst.object+json;nulls=stripped");
        } else {
            set(media::object, "application/vnd.pgrst.object+json");
        }
    } else if (type == U"application" &&
               (sub == U"vnd.pgrst.array+json" || sub == U"vnd.pgrst.array")) {
        if (stripped) {
            set(media::array_nulls, "application/vnd.pgrst.array+json;nulls=stripped");
        } else {
            set(media::json, "application/json");
        }
    } else if (type == U"*" && sub == U"*") {
        set(media::any, "*/*");
    } else {
        set(media::other, detail::to_utf8(text));
    }
    return out;
}

/// `reads :: ReadS Double` on a q-value: the number at the start (else 1.0, as wai-extra).
double read_q(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size() && is_space8(s[i])) ++i;
    bool neg = false;
    if (i < s.size() && s[i] == '-') {
        neg = true;
        ++i;
        while (i < s.size() && is_space8(s[i])) ++i;
    }
    const auto rest = s.substr(i);
    if (rest.substr(0, 3) == "NaN") return 0.0;  // sorts with the least wanted
    if (rest.substr(0, 8) == "Infinity") return neg ? -HUGE_VAL : HUGE_VAL;
    const std::size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == start) return 1.0;
    if (i + 1 < s.size() && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
        i += 2;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        std::size_t j = i + 1;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        if (j < s.size() && s[j] >= '0' && s[j] <= '9') {
            while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
            i = j;
        }
    }
    const double v = std::strtod(std::string(s.substr(start, i - start)).c_str(), nullptr);
    return neg ? -v : v;
}

}  // namespace

// ---- preferences ----------------------------------------------------------------------------

preferences parse_prefer(const std::vector<std::string_view>& headers) {
    std::vector<std::string_view> tokens;
    for (auto h : headers) {
        if (h.empty()) continue;  // BS.split gives no token for an empty value
        std::size_t from = 0;
        for (;;) {
            const auto comma = h.find(',', from);
            tokens.push_back(
                strip8(h.substr(from, comma == std::string_view::npos ? comma : comma - from)));
            if (comma == std::string_view::npos) break;
            from = comma + 1;
        }
    }
    preferences p;
    first_of(tokens, kResolution, p.resolution);
    first_of(tokens, kReturn, p.ret);
    first_of(tokens, kCount, p.count);
    first_of(tokens, kTx, p.tx);
    first_of(tokens, kMissing, p.missing);
    first_of(tokens, kHandling, p.handling);
    constexpr std::string_view kTz = "timezone=", kMax = "max-affected=";
    bool tz_seen = false, max_seen = false;
    for (auto t : tokens) {
        if (!tz_seen && t.substr(0, kTz.size()) == kTz) {
            tz_seen = true;
            p.timezone = std::string(t.substr(kTz.size()));
        }
        if (!max_seen && t.substr(0, kMax.size()) == kMax) {
            max_seen = true;
            p.max_affected = detail::read_integer(t.substr(kMax.size()));
        }
        if (t == "params=single-object") p.params_single_object = true;
        const bool ok = known(t, kResolution) || known(t, kReturn) || known(t, kCount) ||
                        known(t, kTx) || known(t, kMissing) || known(t, kHandling) ||
                        t.substr(0, kMax.size()) == kMax ||
                        (t.substr(0, kTz.size()) == kTz && !p.timezone.empty());
        if (!ok) p.invalid.emplace_back(t);
    }
    return p;
}

std::string preferences::applied_header(bool tx_allowed) const {
    std::vector<std::string> vals;
    auto add = [&](std::string_view v) {
        if (!v.empty()) vals.emplace_back(v);
    };
    add(name_of(resolution, kResolution));
    add(name_of(missing, kMissing));
    add(name_of(ret, kReturn));
    add(name_of(count, kCount));
    if (tx_allowed) add(name_of(tx, kTx));
    add(name_of(handling, kHandling));
    if (!timezone.empty()) vals.push_back("timezone=" + timezone);
    if (handling == prefer_handling::strict && max_affected) {
        vals.push_back("max-affected=" + std::to_string(*max_affected));
    }
    std::string out;
    for (const auto& v : vals) {
        if (!out.empty()) out += ", ";
        out += v;
    }
    return out;
}

void preferences::check_strict() const {
    if (handling != prefer_handling::strict || invalid.empty()) return;
    std::string list;
    for (const auto& t : invalid) {
        if (!list.empty()) list += ", ";
        list += t;
    }
    throw api_error(400, "PGRST122", "Invalid preferences given with handling=strict",
                    "Invalid preferences: " + list);
}

// ---- Accept ---------------------------------------------------------------------------------

std::vector<media_type> parse_accept(std::string_view accept) {
    struct item {
        std::string type;
        double q;
        long specificity;
    };
    std::vector<item> items;
    if (!accept.empty()) {
        std::size_t from = 0;
        for (;;) {
            const auto comma = accept.find(',', from);
            std::string s;
            for (char c :
                 accept.substr(from, comma == std::string_view::npos ? comma : comma - from)) {
                if (c != ' ') s += c;
            }
            const auto qpos = s.find(";q=");
            double q = 1.0;
            if (qpos != std::string::npos) {
                std::string_view qv = std::string_view(s).substr(qpos + 3);
                q = read_q(qv.substr(0, qv.find(';')));
                s.resize(qpos);
            }
            const auto spec =
                std::count(s.begin(), s.end(), ';') - std::count(s.begin(), s.end(), '*');
            items.push_back({std::move(s), q, static_cast<long>(spec)});
            if (comma == std::string_view::npos) break;
            from = comma + 1;
        }
    }
    std::stable_sort(items.begin(), items.end(), [](const item& a, const item& b) {
        return a.q != b.q ? a.q > b.q : a.specificity > b.specificity;
    });
    std::vector<media_type> out;
    out.reserve(items.size());
    for (const auto& it : items) out.push_back(detail::decode_media_type(it.type).type);
    return out;
}

namespace detail {

decoded_media decode_media_type(std::string_view value) {
    std::u32string s;
    s.reserve(value.size());
    for (char c : value) s.push_back(static_cast<unsigned char>(c));
    return decode(s);
}

// ---- ranges ---------------------------------------------------------------------------------

row_span row_span::intersect(const row_span& o) const noexcept {
    if (empty() || o.empty()) return none();
    return {std::max(lower, o.lower), std::min(upper, o.upper)};
}

namespace {
/// n * base + digit, saturated.
std::int64_t push_digit(std::int64_t n, int base, int digit) noexcept {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(n, base, &r) || __builtin_add_overflow(r, digit, &r)) {
        return row_span::kAboveAll - 1;
    }
    return r;
}
}  // namespace

row_span row_span::restrict(std::int64_t n) const noexcept {
    return intersect(leq(sat_add(sat_add(lower, n), -1)));
}

std::optional<std::int64_t> row_span::limit() const noexcept {
    const bool finite =
        lower != kBelowAll && lower != kAboveAll && upper != kBelowAll && upper != kAboveAll;
    if (!finite) return std::nullopt;
    std::int64_t d = 0;
    if (__builtin_sub_overflow(upper, lower, &d)) return row_span::kAboveAll - 1;
    return sat_add(d, 1);
}

row_range row_span::to_row_range() const noexcept {
    row_range r;
    r.offset = lower == kBelowAll || lower == kAboveAll ? 0 : lower;
    r.limit = limit();
    return r;
}

row_span range_header(std::string_view v) {
    const auto dash = v.find('-');
    if (dash == std::string_view::npos || dash == 0) return row_span::all();
    const auto lo = v.substr(0, dash), hi = v.substr(dash + 1);
    auto digits = [](std::string_view s) {
        return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(lo) || !digits(hi)) return row_span::all();
    auto number = [](std::string_view s) {
        std::int64_t n = 0;
        for (char c : s) n = push_digit(n, 10, c - '0');
        return sat_add(n, 0);
    };
    const row_span lower = row_span::geq(number(lo));
    const row_span upper = hi.empty() ? row_span::all() : row_span::leq(number(hi));
    return lower.intersect(upper);
}

std::optional<std::int64_t> read_integer(std::string_view s) {
    std::size_t i = 0;
    auto skip = [&] {
        while (i < s.size() && is_space8(s[i])) ++i;
    };
    skip();
    std::size_t parens = 0;
    while (i < s.size() && s[i] == '(') {
        ++parens;
        ++i;
        skip();
    }
    bool neg = false;
    if (i < s.size() && s[i] == '-') {
        neg = true;
        ++i;
        skip();
    }
    int base = 10;
    if (i + 1 < s.size() && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
        base = 16;
    } else if (i + 1 < s.size() && s[i] == '0' && (s[i + 1] == 'o' || s[i + 1] == 'O')) {
        base = 8;
    }
    auto value = [base](char c) -> int {
        int v = -1;
        if (c >= '0' && c <= '9') v = c - '0';
        if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
        return v < base ? v : -1;
    };
    if (base != 10) {
        // "0x" must be followed by a digit of the base to be a literal at all
        if (i + 2 >= s.size() || value(s[i + 2]) < 0) {
            base = 10;
        } else {
            i += 2;
        }
    }
    const std::size_t start = i;
    std::int64_t n = 0;
    while (i < s.size() && value(s[i]) >= 0) {
        n = push_digit(n, base, value(s[i]));
        ++i;
    }
    if (i == start) return std::nullopt;
    // a fraction or exponent makes it a non-integer number: no parse
    if (base == 10 && i < s.size() && (s[i] == '.' || s[i] == 'e' || s[i] == 'E')) {
        if (s[i] != '.' || (i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9')) {
            if (s[i] == '.') return std::nullopt;
            std::size_t j = i + 1;
            if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
            if (j < s.size() && s[j] >= '0' && s[j] <= '9') return std::nullopt;
        }
    }
    skip();
    while (parens > 0 && i < s.size() && s[i] == ')') {
        --parens;
        ++i;
        skip();
    }
    if (parens != 0 || i != s.size()) return std::nullopt;
    return sat_add(neg ? -n : n, 0);
}

}  // namespace detail
}  // namespace awp::rest
