// A filter's operator expression (grammar_rules.hpp): not., the operators with their
// quantifiers and languages, is values, in lists and the single values of filters and of
// and/or leaves (quoted values, {array} literals).
#include "grammar_rules.hpp"

namespace awp::rest::detail {

reply<unit> grammar::ci_text(const cursor& s, std::u32string_view w) const {
    reply<unit> acc = pure(s, unit{});
    for (const char32_t ch : w) {
        const char32_t up = ch >= U'a' && ch <= U'z' ? ch - 32 : ch;
        auto r = alt(acc.at, one(acc.at, ch), [&](const cursor& c) { return one(c, up); });
        acc = then(acc, with(r, unit{}));
        if (!acc.ok) return acc;
    }
    return acc;
}

reply<is_value> grammar::is_val(const cursor& s) const {
    auto word = [&](std::u32string_view w, is_value v) {
        return [this, w, v](const cursor& c) { return with(attempt(ci_text(c, w)), v); };
    };
    auto r = word(U"null", is_value::null)(s);
    r = alt(s, std::move(r), word(U"not_null", is_value::not_null));
    r = alt(s, std::move(r), word(U"true", is_value::true_));
    r = alt(s, std::move(r), word(U"false", is_value::false_));
    r = alt(s, std::move(r), word(U"unknown", is_value::unknown));
    return label(std::move(r), "isVal: (null, not_null, true, false, unknown)");
}

reply<str> grammar::single_value(const cursor& s, value_kind k) const {
    if (k == value_kind::single) return many_chars(s, [&](const cursor& c) { return any(c); });
    auto r = attempt(quoted_element(s));
    r = alt(s, std::move(r), [&](const cursor& c) { return attempt(pg_array(c)); });
    return alt(s, std::move(r), [&](const cursor& c) {
        return many_chars(c, [&](const cursor& d) { return none_of(d, U",)"); });
    });
}

reply<str> grammar::quoted_element(const cursor& s) const {
    auto q = quoted(s);
    if (!q.ok) return q;
    return keep(q, not_followed_by(q.at, [&](const cursor& c) { return none_of(c, U",)"); }));
}

reply<str> grammar::pg_array(const cursor& s) const {
    auto open = text(s, U"{");
    if (!open.ok) return fail_as<str>(open);
    auto body = then(open, many_chars(open.at, [&](const cursor& c) { return none_of(c, U"{}"); }));
    if (!body.ok) return body;
    auto close = then(body, text(body.at, U"}"));
    return with(close, U"{" + body.value + U"}");
}

reply<std::vector<str>> grammar::list_val(const cursor& s) const {
    auto open = lexeme(s, [&](const cursor& c) { return one(c, U'('); });
    if (!open.ok) return fail_as<std::vector<str>>(open);
    auto items = then(open, sep_by1(
                                open.at,
                                [&](const cursor& c) {
                                    return alt(c, attempt(quoted_element(c)), [&](const cursor& d) {
                                        return many_chars(
                                            d, [&](const cursor& e) { return none_of(e, U",)"); });
                                    });
                                },
                                [&](const cursor& c) { return one(c, U','); }));
    if (!items.ok) return items;
    return keep(items, lexeme(items.at, [&](const cursor& c) { return one(c, U')'); }));
}

reply<unit> grammar::word_dot(const cursor& s, std::u32string_view w) const {
    auto t = text(s, w);
    if (!t.ok) return attempt(t);
    return attempt(with(then(t, delimiter(t.at)), unit{}));
}

reply<op_expr> grammar::op_expression(const cursor& s, value_kind k) const {
    auto neg =
        alt(s, with(word_dot(s, U"not"), true), [&](const cursor& c) { return pure(c, false); });
    auto oper = then(neg, operation(neg.at, k));
    if (oper.ok) oper.value.negated = neg.value;
    return oper;
}

reply<op_expr> grammar::operation(const cursor& s, value_kind k) const {
    auto r = in_op(s);
    r = alt(s, std::move(r), [&](const cursor& c) { return is_op(c); });
    r = alt(s, std::move(r), [&](const cursor& c) { return is_distinct_op(c, k); });
    r = alt(s, std::move(r), [&](const cursor& c) { return attempt(fts_op(c, k)); });
    r = alt(s, std::move(r), [&](const cursor& c) { return attempt(simple_op(c, k)); });
    r = alt(s, std::move(r), [&](const cursor& c) { return attempt(quant_op(c, k)); });
    return label(std::move(r), "operator (eq, gt, ...)");
}

reply<op_expr> grammar::in_op(const cursor& s) const {
    auto w = word_dot(s, U"in");
    if (!w.ok) return fail_as<op_expr>(w);
    auto l = then(w, list_val(w.at));
    if (!l.ok) return fail_as<op_expr>(l);
    op_expr e;
    e.op = op::in;
    for (const auto& v : l.value) e.list.push_back(to_utf8(v));
    return with(l, std::move(e));
}

reply<op_expr> grammar::is_op(const cursor& s) const {
    auto w = word_dot(s, U"is");
    if (!w.ok) return fail_as<op_expr>(w);
    auto v = then(w, is_val(w.at));
    if (!v.ok) return fail_as<op_expr>(v);
    op_expr e;
    e.op = op::is;
    e.is = v.value;
    return with(v, std::move(e));
}

reply<op_expr> grammar::is_distinct_op(const cursor& s, value_kind k) const {
    auto w = word_dot(s, U"isdistinct");
    if (!w.ok) return fail_as<op_expr>(w);
    auto v = then(w, single_value(w.at, k));
    if (!v.ok) return fail_as<op_expr>(v);
    op_expr e;
    e.op = op::isdistinct;
    e.value = to_utf8(v.value);
    return with(v, std::move(e));
}

reply<op_expr> grammar::fts_op(const cursor& s, value_kind k) const {
    static const std::pair<std::u32string_view, op> kWords[] = {
        {U"fts", op::fts}, {U"plfts", op::plfts}, {U"phfts", op::phfts}, {U"wfts", op::wfts}};
    auto o = words(s, kWords);
    if (!o.ok) return fail_as<op_expr>(o);
    auto lang = then(o, option_maybe(o.at, [&](const cursor& c) {
                         auto open = one(c, U'(');
                         if (!open.ok) return fail_as<str>(open);
                         auto id = then(open, identifier(open.at));
                         if (!id.ok) return attempt(id);
                         return attempt(keep(id, one(id.at, U')')));
                     }));
    if (!lang.ok) return fail_as<op_expr>(lang);
    auto dot = then(lang, delimiter(lang.at));
    if (!dot.ok) return fail_as<op_expr>(dot);
    auto v = then(dot, single_value(dot.at, k));
    if (!v.ok) return fail_as<op_expr>(v);
    op_expr e;
    e.op = o.value;
    if (lang.value) e.language = to_utf8(*lang.value);
    e.value = to_utf8(v.value);
    return with(v, std::move(e));
}

reply<op_expr> grammar::simple_op(const cursor& s, value_kind k) const {
    static const std::pair<std::u32string_view, op> kWords[] = {
        {U"neq", op::neq}, {U"cs", op::cs},   {U"cd", op::cd},   {U"ov", op::ov},  {U"sl", op::sl},
        {U"sr", op::sr},   {U"nxr", op::nxr}, {U"nxl", op::nxl}, {U"adj", op::adj}};
    auto o = label(words(s, kWords), "unknown single value operator");
    if (!o.ok) return fail_as<op_expr>(o);
    auto dot = then(o, delimiter(o.at));
    if (!dot.ok) return fail_as<op_expr>(dot);
    auto v = then(dot, single_value(dot.at, k));
    if (!v.ok) return fail_as<op_expr>(v);
    op_expr e;
    e.op = o.value;
    e.value = to_utf8(v.value);
    return with(v, std::move(e));
}

reply<op_expr> grammar::quant_op(const cursor& s, value_kind k) const {
    static const std::pair<std::u32string_view, op> kWords[] = {
        {U"eq", op::eq},       {U"gte", op::gte},     {U"gt", op::gt},
        {U"lte", op::lte},     {U"lt", op::lt},       {U"like", op::like},
        {U"ilike", op::ilike}, {U"match", op::match}, {U"imatch", op::imatch}};
    auto o = label(words(s, kWords), "unknown single value operator");
    if (!o.ok) return fail_as<op_expr>(o);
    auto q = then(o, option_maybe(o.at, [&](const cursor& c) {
                      auto open = one(c, U'(');
                      if (!open.ok) return fail_as<quantifier>(open);
                      auto which = alt(
                          open.at, with(attempt(text(open.at, U"any")), quantifier::any),
                          [&](const cursor& d) { return with(text(d, U"all"), quantifier::all); });
                      which = then(open, std::move(which));
                      if (!which.ok) return attempt(which);
                      return attempt(keep(which, one(which.at, U')')));
                  }));
    if (!q.ok) return fail_as<op_expr>(q);
    auto dot = then(q, delimiter(q.at));
    if (!dot.ok) return fail_as<op_expr>(dot);
    auto v = then(dot, single_value(dot.at, k));
    if (!v.ok) return fail_as<op_expr>(v);
    op_expr e;
    e.op = o.value;
    if (q.value) e.quant = *q.value;
    e.value = to_utf8(v.value);
    return with(v, std::move(e));
}

}  // namespace awp::rest::detail
