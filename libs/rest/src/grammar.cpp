// The query-string grammar's entry points (grammar.hpp), one per parameter kind, and the rules
// of order= and of and/or trees; rule for rule in behaviour what PostgREST v14's QueryParams.hs
// accepts, over parsec.hpp's model of Parsec so every refusal has PostgREST's PGRST100 text.
// The other rules: grammar_names.cpp, grammar_select.cpp, grammar_filters.cpp.
#include "grammar.hpp"

#include "grammar_rules.hpp"

namespace awp::rest {
namespace detail {

reply<order_dir> grammar::order_dir_(const cursor& s) const {
    auto dotted = [&](std::u32string_view w, order_dir d) {
        return [this, w, d](const cursor& c) {
            auto dot = delimiter(c);
            if (!dot.ok) return fail_as<order_dir>(dot);
            return attempt(with(then(dot, text(dot.at, w)), d));
        };
    };
    return alt(s, dotted(U"asc", order_dir::asc)(s), dotted(U"desc", order_dir::desc));
}

reply<order_nulls> grammar::order_nulls_(const cursor& s) const {
    auto dotted = [&](std::u32string_view w, order_nulls n) {
        return [this, w, n](const cursor& c) {
            auto dot = delimiter(c);
            if (!dot.ok) return fail_as<order_nulls>(dot);
            return attempt(with(then(dot, text(dot.at, w)), n));
        };
    };
    return alt(s, dotted(U"nullsfirst", order_nulls::first)(s),
               dotted(U"nullslast", order_nulls::last));
}

reply<unit> grammar::order_end(const cursor& s) const {
    return alt(s, attempt(look_ahead(s, with(one(s, U','), unit{}))),
               [&](const cursor& c) { return attempt(eof(c)); });
}

reply<order_term> grammar::order_tail(const cursor& s, order_term t) const {
    auto dir = option_maybe(s, [&](const cursor& c) { return order_dir_(c); });
    if (!dir.ok) return fail_as<order_term>(dir);
    auto nls = then(
        dir,
        alt(
            dir.at,
            [&] {
                auto n = option_maybe(dir.at, [&](const cursor& c) { return order_nulls_(c); });
                if (!n.ok) return n;
                return keep(n, order_end(n.at));
            }(),
            [&](const cursor& c) { return with(order_end(c), std::optional<order_nulls>{}); }));
    if (!nls.ok) return fail_as<order_term>(nls);
    if (dir.value) t.dir = *dir.value;
    if (nls.value) t.nulls = *nls.value;
    return with(nls, std::move(t));
}

reply<order_term> grammar::order_relation_term(const cursor& s) const {
    auto name = field_name(s);
    if (!name.ok) return fail_as<order_term>(name);
    auto open = then(name, one(name.at, U'('));
    if (!open.ok) return fail_as<order_term>(open);
    auto fld = then(open, field_(open.at));
    if (!fld.ok) return fail_as<order_term>(fld);
    auto close = then(fld, one(fld.at, U')'));
    if (!close.ok) return fail_as<order_term>(close);
    order_term t;
    t.relation = to_utf8(name.value);
    t.fld = std::move(fld.value);
    return then(close, order_tail(close.at, std::move(t)));
}

reply<order_term> grammar::order_term_(const cursor& s) const {
    auto fld = field_(s);
    if (!fld.ok) return fail_as<order_term>(fld);
    order_term t;
    t.fld = std::move(fld.value);
    return then(fld, order_tail(fld.at, std::move(t)));
}

reply<std::vector<order_term>> grammar::order(const cursor& s) const {
    return sep_by1(
        s,
        [&](const cursor& c) {
            return lexeme(c, [&](const cursor& d) {
                return alt(d, attempt(order_relation_term(d)),
                           [&](const cursor& e) { return order_term_(e); });
            });
        },
        [&](const cursor& c) { return one(c, U','); });
}

reply<logic_tree> grammar::logic(const cursor& s, unsigned depth) const {
    auto leaf = attempt([&] {
        auto fld = field_(s);
        if (!fld.ok) return fail_as<logic_tree>(fld);
        auto dot = then(fld, delimiter(fld.at));
        if (!dot.ok) return fail_as<logic_tree>(dot);
        auto e = then(dot, op_expression(dot.at, value_kind::logic));
        if (!e.ok) return fail_as<logic_tree>(e);
        logic_tree t;
        t.is_leaf = true;
        t.leaf = filter{std::move(fld.value), std::move(e.value)};
        return with(e, std::move(t));
    }());
    return alt(s, std::move(leaf), [&](const cursor& c) { return logic_expr(c, depth); });
}

reply<logic_tree> grammar::logic_expr(const cursor& s, unsigned depth) const {
    auto neg = label(
        alt(s, with(word_dot(s, U"not"), true), [&](const cursor& c) { return pure(c, false); }),
        "negation operator (not)");
    auto lop = then(neg, label(alt(neg.at, with(attempt(text(neg.at, U"and")), false),
                                   [&](const cursor& c) { return with(text(c, U"or"), true); }),
                               "logic operator (and, or)"));
    if (!lop.ok) return fail_as<logic_tree>(lop);
    auto open = then(lop, lexeme(lop.at, [&](const cursor& c) { return one(c, U'('); }));
    if (!open.ok) return fail_as<logic_tree>(open);
    if (depth + 1 > max_logic_) too_deep("Logic trees (and/or) are", max_logic_);
    auto kids = then(open, sep_by1(
                               open.at, [&](const cursor& c) { return logic(c, depth + 1); },
                               [&](const cursor& c) {
                                   return lexeme(c, [&](const cursor& d) { return one(d, U','); });
                               }));
    if (!kids.ok) return fail_as<logic_tree>(kids);
    auto close = keep(kids, lexeme(kids.at, [&](const cursor& c) { return one(c, U')'); }));
    if (!close.ok) return fail_as<logic_tree>(close);
    logic_tree t;
    t.negated = neg.value;
    t.is_or = lop.value;
    t.kids = std::move(close.value);
    return with(close, std::move(t));
}

namespace {

str decode_or_throw(std::string_view text, std::string_view what) {
    str out;
    if (!decode_utf8(text, out)) {
        throw api_error(400, "PGRST100", std::string("failed to parse ") + std::string(what),
                        "invalid UTF-8");
    }
    return out;
}

template <class T>
T finish(reply<T> r, std::string_view name) {
    if (!r.ok) throw api_error(400, "PGRST100", render_pos(name, r.err.pos), render(r.err));
    return std::move(r.value);
}

std::string named(std::string_view what, std::string_view text) {
    return "failed to parse " + std::string(what) + " (" + std::string(text) + ")";
}

}  // namespace

std::vector<select_item> select_param(std::string_view text, const limits& lim) {
    const auto name = named("select parameter", text);
    grammar g(decode_or_throw(text, "select parameter"), lim.max_embed_depth, lim.max_logic_depth);
    return finish(g.forest(cursor{}, 0), name);
}

std::pair<embed_path, field> tree_path(std::string_view key) {
    const auto name = named("tree path", key);
    grammar g(decode_or_throw(key, "tree path"), kMaxNesting, kMaxNesting);
    const auto names = g.dotted_names(cursor{});
    auto path = names.ok ? then(names, g.option(names.at, json_path{},
                                                [&](const cursor& c) { return g.json_path_(c); }))
                         : fail_as<json_path>(names);
    auto jp = finish(std::move(path), name);
    embed_path ep;
    for (std::size_t i = 0; i + 1 < names.value.size(); ++i) ep.push_back(to_utf8(names.value[i]));
    return {std::move(ep), field{to_utf8(names.value.back()), std::move(jp)}};
}

op_expr filter_value(std::string_view text, bool rpc_read) {
    const auto name = named("filter", text);
    grammar g(decode_or_throw(text, "filter"), kMaxNesting, kMaxNesting);
    auto r = g.op_expression(cursor{}, grammar::value_kind::single);
    if (rpc_read) {
        r = alt(cursor{}, std::move(r), [&](const cursor& c) {
            op_expr e;
            e.no_op = true;
            e.value = std::string(text);
            return pure(c, std::move(e));
        });
    }
    return finish(std::move(r), name);
}

std::vector<order_term> order_param(std::string_view text) {
    const auto name = named("order", text);
    grammar g(decode_or_throw(text, "order"), kMaxNesting, kMaxNesting);
    return finish(g.order(cursor{}), name);
}

std::pair<embed_path, std::string> logic_path(std::string_view key) {
    const auto name = named("logic path", key);
    grammar g(decode_or_throw(key, "logic path"), kMaxNesting, kMaxNesting);
    auto names = finish(g.dotted_names(cursor{}), name);
    bool negated = false;
    embed_path ep;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (names[i] == U"not") {
            negated = true;
        } else if (i + 1 < names.size()) {
            ep.push_back(to_utf8(names[i]));
        }
    }
    std::string op = to_utf8(names.back());
    return {std::move(ep), negated ? "not." + op : op};
}

logic_tree logic_param(std::string_view op, std::string_view text, const limits& lim) {
    const auto name = named("logic tree", text);
    std::string whole(op);
    whole += text;
    grammar g(decode_or_throw(whole, "logic tree"), lim.max_embed_depth, lim.max_logic_depth);
    return finish(g.logic(cursor{}, 0), name);
}

std::vector<std::string> columns_param(std::string_view text, std::string_view what) {
    const auto name = named(what, text);
    grammar g(decode_or_throw(text, what), kMaxNesting, kMaxNesting);
    std::vector<std::string> out;
    for (const auto& c : finish(g.columns(cursor{}), name)) out.push_back(to_utf8(c));
    return out;
}

}  // namespace detail

// ---- the public pieces (request.hpp) ------------------------------------------------------

std::vector<select_item> parse_select(std::string_view text, const limits& lim) {
    return detail::select_param(text, lim);
}

op_expr parse_op_expr(std::string_view text, bool rpc_read) {
    return detail::filter_value(text, rpc_read);
}

logic_tree parse_logic(std::string_view key_op, std::string_view text, const limits& lim) {
    return detail::logic_param(key_op, text, lim);
}

std::vector<order_term> parse_order(std::string_view text) { return detail::order_param(text); }

}  // namespace awp::rest
