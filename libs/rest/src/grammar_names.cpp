// The grammar's lexical rules (grammar_rules.hpp): whitespace, identifiers and quoted names,
// dash-joined names, JSON paths (->, ->>, keys and signed indexes), fields, aliases and casts.
#include "grammar_rules.hpp"

namespace awp::rest::detail {

str strip(str s) {
    while (!s.empty() && is_space(s.back())) s.pop_back();
    std::size_t i = 0;
    while (i < s.size() && is_space(s[i])) ++i;
    return s.substr(i);
}

void too_deep(std::string_view what, unsigned max) {
    throw api_error(400, "PGRST100", std::string(what) + " nested too deeply",
                    "At most " + std::to_string(max) + " levels are accepted.");
}

reply<unit> grammar::ws(const cursor& s) const {
    return many(
        s, unit{}, [&](const cursor& c) { return one_of(c, U" \t"); }, [](unit&, char32_t) {});
}

reply<char32_t> grammar::delimiter(const cursor& s) const {
    return label(one(s, U'.'), "delimiter (.)");
}

reply<char32_t> grammar::ident_char(const cursor& s) const {
    auto r = letter(s);
    r = alt(s, std::move(r), [&](const cursor& c) { return digit(c); });
    return alt(s, std::move(r), [&](const cursor& c) { return one_of(c, U"_ $"); });
}

reply<str> grammar::identifier(const cursor& s) const {
    auto r = many1_chars(s, [&](const cursor& c) { return ident_char(c); });
    if (r.ok) r.value = strip(std::move(r.value));
    return r;
}

reply<unit> grammar::dash(const cursor& s) const {
    auto a = one(s, U'-');
    if (!a.ok) return fail_as<unit>(a);
    return attempt(then(a, not_followed_by(a.at, [&](const cursor& c) { return one(c, U'>'); })));
}

reply<str> grammar::quoted(const cursor& s) const {
    auto open = one(s, U'"');
    if (!open.ok) return fail_as<str>(open);
    auto body = then(open, many_chars(open.at, [&](const cursor& c) {
                         return alt(c, none_of(c, U"\\\""), [&](const cursor& d) {
                             auto esc = one(d, U'\\');
                             if (!esc.ok) return esc;
                             return then(esc, any(esc.at));
                         });
                     }));
    if (!body.ok) return body;
    return keep(body, one(body.at, U'"'));
}

reply<str> grammar::field_name(const cursor& s) const {
    auto r = alt(s, quoted(s), [&](const cursor& c) {
        return sep_by_dash(c, [&](const cursor& d) { return identifier(d); });
    });
    return label(std::move(r), "field name (* or [a..z0..9_$])");
}

reply<json_path> grammar::json_path_(const cursor& s) const {
    return many(
        s, json_path{}, [&](const cursor& c) { return json_operation(c); },
        [](json_path& acc, json_step st) { acc.push_back(std::move(st)); });
}

reply<json_step> grammar::json_operation(const cursor& s) const {
    auto arrow = attempt(text(s, U"->>"));
    reply<bool> as_text = with(arrow, true);
    as_text = alt(s, std::move(as_text),
                  [&](const cursor& c) { return with(attempt(text(c, U"->")), false); });
    if (!as_text.ok) return fail_as<json_step>(as_text);
    auto operand = then(as_text, alt(as_text.at, attempt(json_index(as_text.at)),
                                     [&](const cursor& c) { return attempt(json_key(c)); }));
    if (operand.ok) operand.value.as_text = as_text.value;
    return operand;
}

reply<json_step> grammar::json_index(const cursor& s) const {
    auto sign = option(s, U'+', [&](const cursor& c) { return one(c, U'-'); });
    auto digits = then(sign, many1_chars(sign.at, [&](const cursor& c) { return digit(c); }));
    if (!digits.ok) return fail_as<json_step>(digits);
    auto end = then(digits, index_end(digits.at));
    if (!end.ok) return fail_as<json_step>(end);
    json_step st;
    st.is_index = true;
    st.operand = to_utf8(str(1, sign.value) + digits.value);
    return with(end, std::move(st));
}

reply<unit> grammar::index_end(const cursor& s) const {
    auto ahead = [&](std::u32string_view t) {
        return [this, t](const cursor& c) { return attempt(look_ahead(c, text(c, t))); };
    };
    auto r = ahead(U"->")(s);
    r = alt(s, std::move(r), ahead(U"::"));
    r = alt(s, std::move(r), ahead(U"."));
    r = alt(s, std::move(r), ahead(U","));
    return alt(s, std::move(r), [&](const cursor& c) { return attempt(eof(c)); });
}

reply<json_step> grammar::json_key(const cursor& s) const {
    auto r = alt(s, quoted(s), [&](const cursor& c) {
        return sep_by_dash(c, [&](const cursor& d) {
            auto k = many1_chars(d, [&](const cursor& e) { return none_of(e, U"(-:.,>)"); });
            if (k.ok) k.value = strip(std::move(k.value));
            return k;
        });
    });
    r = label(std::move(r), "any non reserved character different from: .,>()");
    if (!r.ok) return fail_as<json_step>(r);
    json_step st;
    st.operand = to_utf8(r.value);
    return with(r, std::move(st));
}

reply<field> grammar::field_(const cursor& s) const {
    return lexeme(s, [&](const cursor& c) {
        auto name = field_name(c);
        if (!name.ok) return fail_as<field>(name);
        auto path = then(
            name, option(name.at, json_path{}, [&](const cursor& d) { return json_path_(d); }));
        if (!path.ok) return fail_as<field>(path);
        return with(path, field{to_utf8(name.value), std::move(path.value)});
    });
}

reply<unit> grammar::alias_sep(const cursor& s) const {
    auto a = one(s, U':');
    if (!a.ok) return fail_as<unit>(a);
    return then(a, not_followed_by(a.at, [&](const cursor& c) { return one(c, U':'); }));
}

reply<std::optional<str>> grammar::alias(const cursor& s) const {
    return option_maybe(s, [&](const cursor& c) {
        auto n = field_name(c);
        if (!n.ok) return attempt(n);
        return attempt(keep(n, alias_sep(n.at)));
    });
}

reply<std::optional<str>> grammar::cast(const cursor& s) const {
    return option_maybe(s, [&](const cursor& c) {
        auto colons = text(c, U"::");
        if (!colons.ok) return fail_as<str>(colons);
        return then(colons, identifier(colons.at));
    });
}

reply<std::vector<str>> grammar::dotted_names(const cursor& s) const {
    return sep_by1(
        s, [&](const cursor& c) { return field_name(c); },
        [&](const cursor& c) { return delimiter(c); });
}

reply<std::vector<str>> grammar::columns(const cursor& s) const {
    return sep_by1(
        s, [&](const cursor& c) { return field_name(c); },
        [&](const cursor& c) { return lexeme(c, [&](const cursor& d) { return one(d, U','); }); });
}

}  // namespace awp::rest::detail
