// The query-string grammar (select, filters, order, and/or trees, columns, key paths), rule for
// rule in behaviour what PostgREST v14's QueryParams.hs accepts, over parsec.hpp's model of
// Parsec so every refusal has PostgREST's PGRST100 text. Nesting is bounded before recursing.
#include "grammar.hpp"

#include <algorithm>
#include <optional>

#include "parsec.hpp"

namespace awp::rest {
namespace detail {
namespace {

using str = std::u32string;

/// Whatever limits say, recursion stops here: a stack frame chain this deep is still small.
constexpr unsigned kMaxNesting = 64;

str strip(str s) {
    while (!s.empty() && is_space(s.back())) s.pop_back();
    std::size_t i = 0;
    while (i < s.size() && is_space(s[i])) ++i;
    return s.substr(i);
}

str decode_or_throw(std::string_view text, std::string_view what) {
    str out;
    if (!decode_utf8(text, out)) {
        throw api_error(400, "PGRST100", std::string("failed to parse ") + std::string(what),
                        "invalid UTF-8");
    }
    return out;
}

/// The limit errors of nesting: refused before descending, with what was too deep.
[[noreturn]] void too_deep(std::string_view what, unsigned max) {
    throw api_error(400, "PGRST100", std::string(what) + " nested too deeply",
                    "At most " + std::to_string(max) + " levels are accepted.");
}

template <class T>
reply<T> pure(const cursor& s, T v) {
    return {true, false, std::move(v), s, {s.pos, {}}};
}

template <class T>
reply<T> nothing(const cursor& s) {  // mzero / guard False
    return {false, false, T{}, s, {s.pos, {}}};
}

class grammar : public scanner {
public:
    grammar(str in, unsigned max_embed, unsigned max_logic)
        : scanner(std::move(in)),
          max_embed_(std::min(max_embed, kMaxNesting)),
          max_logic_(std::min(max_logic, kMaxNesting)) {}

    // ---- lexical pieces -----------------------------------------------------------------

    reply<unit> ws(const cursor& s) const {
        return many(
            s, unit{}, [&](const cursor& c) { return one_of(c, U" \t"); }, [](unit&, char32_t) {});
    }

    template <class P>
    auto lexeme(const cursor& s, P&& p) const -> decltype(p(s)) {
        auto a = ws(s);
        auto b = then(a, p(a.at));
        if (!b.ok) return b;
        return keep(b, ws(b.at));
    }

    /// option x p
    template <class T, class P>
    reply<T> option(const cursor& s, T def, P&& p) const {
        return alt(s, p(s), [&](const cursor& c) { return pure(c, def); });
    }

    /// optionMaybe p
    template <class P>
    auto option_maybe(const cursor& s, P&& p) const -> reply<std::optional<decltype(p(s).value)>> {
        using T = decltype(p(s).value);
        auto r = p(s);
        reply<std::optional<T>> j{r.ok, r.consumed, std::nullopt, r.at, r.err};
        if (r.ok) j.value = std::move(r.value);
        return alt(s, std::move(j), [&](const cursor& c) { return pure(c, std::optional<T>{}); });
    }

    /// p `sepBy1` sep
    template <class P, class S>
    auto sep_by1(const cursor& s, P&& p, S&& sep) const
        -> reply<std::vector<decltype(p(s).value)>> {
        using T = decltype(p(s).value);
        auto first = p(s);
        if (!first.ok) return fail_as<std::vector<T>>(first);
        auto rest = many(
            first.at, std::vector<T>{},
            [&](const cursor& c) {
                auto d = sep(c);
                if (!d.ok) return fail_as<T>(d);
                return then(d, p(d.at));
            },
            [](std::vector<T>& acc, T v) { acc.push_back(std::move(v)); });
        auto r = then(first, rest);
        if (r.ok) r.value.insert(r.value.begin(), std::move(first.value));
        return r;
    }

    /// p `sepBy` sep
    template <class P, class S>
    auto sep_by(const cursor& s, P&& p, S&& sep) const -> reply<std::vector<decltype(p(s).value)>> {
        using T = decltype(p(s).value);
        return alt(s, sep_by1(s, p, sep),
                   [&](const cursor& c) { return pure(c, std::vector<T>{}); });
    }

    /// pDelimiter
    reply<char32_t> delimiter(const cursor& s) const {
        return label(one(s, U'.'), "delimiter (.)");
    }

    /// pIdentifierChar
    reply<char32_t> ident_char(const cursor& s) const {
        auto r = letter(s);
        r = alt(s, std::move(r), [&](const cursor& c) { return digit(c); });
        return alt(s, std::move(r), [&](const cursor& c) { return one_of(c, U"_ $"); });
    }

    /// many1 p over code points, accumulated as a string.
    template <class P>
    reply<str> many1_chars(const cursor& s, P&& p) const {
        auto first = p(s);
        if (!first.ok) return fail_as<str>(first);
        auto rest = many(first.at, str(1, first.value), p, [](str& acc, char32_t c) { acc += c; });
        return then(first, rest);
    }

    template <class P>
    reply<str> many_chars(const cursor& s, P&& p) const {
        return many(s, str{}, p, [](str& acc, char32_t c) { acc += c; });
    }

    /// pIdentifier: T.strip <$> many1 pIdentifierChar
    reply<str> identifier(const cursor& s) const {
        auto r = many1_chars(s, [&](const cursor& c) { return ident_char(c); });
        if (r.ok) r.value = strip(std::move(r.value));
        return r;
    }

    /// isDash: try (char '-' >> notFollowedBy (char '>'))
    reply<unit> dash(const cursor& s) const {
        auto a = one(s, U'-');
        if (!a.ok) return fail_as<unit>(a);
        return attempt(
            then(a, not_followed_by(a.at, [&](const cursor& c) { return one(c, U'>'); })));
    }

    /// sepByDash p: the pieces joined with '-'
    template <class P>
    reply<str> sep_by_dash(const cursor& s, P&& p) const {
        auto parts = sep_by1(s, p, [&](const cursor& c) { return dash(c); });
        if (!parts.ok) return fail_as<str>(parts);
        str joined;
        for (std::size_t i = 0; i < parts.value.size(); ++i) {
            if (i > 0) joined += U'-';
            joined += parts.value[i];
        }
        return with(parts, std::move(joined));
    }

    /// pQuotedValue
    reply<str> quoted(const cursor& s) const {
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

    /// pFieldName
    reply<str> field_name(const cursor& s) const {
        auto r = alt(s, quoted(s), [&](const cursor& c) {
            return sep_by_dash(c, [&](const cursor& d) { return identifier(d); });
        });
        return label(std::move(r), "field name (* or [a..z0..9_$])");
    }

    /// pJsonPath
    reply<json_path> json_path_(const cursor& s) const {
        return many(
            s, json_path{}, [&](const cursor& c) { return json_operation(c); },
            [](json_path& acc, json_step st) { acc.push_back(std::move(st)); });
    }

    reply<json_step> json_operation(const cursor& s) const {
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

    /// pJIdx: an optional '-', digits, then one of "->", "::", ".", "," or the end ahead
    reply<json_step> json_index(const cursor& s) const {
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

    reply<unit> index_end(const cursor& s) const {
        auto ahead = [&](std::u32string_view t) {
            return [this, t](const cursor& c) { return attempt(look_ahead(c, text(c, t))); };
        };
        auto r = ahead(U"->")(s);
        r = alt(s, std::move(r), ahead(U"::"));
        r = alt(s, std::move(r), ahead(U"."));
        r = alt(s, std::move(r), ahead(U","));
        return alt(s, std::move(r), [&](const cursor& c) { return attempt(eof(c)); });
    }

    /// JKey <$> pJsonKeyName
    reply<json_step> json_key(const cursor& s) const {
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

    /// pField: lexeme ((,) <$> pFieldName <*> option [] pJsonPath)
    reply<field> field_(const cursor& s) const {
        return lexeme(s, [&](const cursor& c) {
            auto name = field_name(c);
            if (!name.ok) return fail_as<field>(name);
            auto path = then(
                name, option(name.at, json_path{}, [&](const cursor& d) { return json_path_(d); }));
            if (!path.ok) return fail_as<field>(path);
            return with(path, field{to_utf8(name.value), std::move(path.value)});
        });
    }

    /// aliasSeparator: char ':' >> notFollowedBy (char ':')
    reply<unit> alias_sep(const cursor& s) const {
        auto a = one(s, U':');
        if (!a.ok) return fail_as<unit>(a);
        return then(a, not_followed_by(a.at, [&](const cursor& c) { return one(c, U':'); }));
    }

    /// optionMaybe (try (pFieldName <* aliasSeparator))
    reply<std::optional<str>> alias(const cursor& s) const {
        return option_maybe(s, [&](const cursor& c) {
            auto n = field_name(c);
            if (!n.ok) return attempt(n);
            return attempt(keep(n, alias_sep(n.at)));
        });
    }

    /// optionMaybe (string "::" *> pIdentifier)
    reply<std::optional<str>> cast(const cursor& s) const {
        return option_maybe(s, [&](const cursor& c) {
            auto colons = text(c, U"::");
            if (!colons.ok) return fail_as<str>(colons);
            return then(colons, identifier(colons.at));
        });
    }

    // ---- select ---------------------------------------------------------------------------

    struct embed_params {
        std::string hint;
        join_type join = join_type::unspecified;
    };
    struct embed_param {
        bool is_join = false;
        join_type join = join_type::unspecified;
        std::string hint;
    };

    /// pEmbedParam: char '!' *> (try "left" <|> try "inner" <|> try (EPHint <$> pFieldName))
    reply<embed_param> embed_param_(const cursor& s) const {
        auto bang = one(s, U'!');
        if (!bang.ok) return fail_as<embed_param>(bang);
        auto join_word = [&](std::u32string_view w, join_type j) {
            return [this, w, j](const cursor& c) {
                return with(attempt(text(c, w)), embed_param{true, j, {}});
            };
        };
        auto r = join_word(U"left", join_type::left)(bang.at);
        r = alt(bang.at, std::move(r), join_word(U"inner", join_type::inner));
        r = alt(bang.at, std::move(r), [&](const cursor& c) {
            auto h = attempt(field_name(c));
            return with(h, embed_param{false, join_type::unspecified, to_utf8(h.value)});
        });
        return then(bang, std::move(r));
    }

    /// pEmbedParams: two optional params; the first hint and the first join type win
    reply<embed_params> embed_params_(const cursor& s) const {
        auto p1 = option_maybe(s, [&](const cursor& c) { return embed_param_(c); });
        if (!p1.ok) return fail_as<embed_params>(p1);
        auto p2 = then(p1, option_maybe(p1.at, [&](const cursor& c) { return embed_param_(c); }));
        if (!p2.ok) return fail_as<embed_params>(p2);
        embed_params out;
        for (const auto* p : {&p1.value, &p2.value}) {
            if (!p->has_value()) continue;
            if ((*p)->is_join) {
                if (out.join == join_type::unspecified) out.join = (*p)->join;
            } else if (out.hint.empty()) {
                out.hint = (*p)->hint;
            }
        }
        return with(p2, std::move(out));
    }

    /// try (void $ lookAhead (string "("))
    reply<unit> paren_ahead(const cursor& s) const { return attempt(look_ahead(s, text(s, U"("))); }

    /// pSpreadRelationSelect
    reply<select_item> spread_select(const cursor& s) const {
        return lexeme(s, [&](const cursor& c) {
            auto dots = text(c, U"...");
            if (!dots.ok) return fail_as<select_item>(dots);
            auto name = then(dots, field_name(dots.at));
            if (!name.ok) return fail_as<select_item>(name);
            auto params = then(name, embed_params_(name.at));
            if (!params.ok) return fail_as<select_item>(params);
            auto ahead = then(params, paren_ahead(params.at));
            select_item it;
            it.what = select_item::kind::spread;
            it.relation = to_utf8(name.value);
            it.hint = params.value.hint;
            it.join = params.value.join;
            return with(ahead, std::move(it));
        });
    }

    /// pRelationSelect
    reply<select_item> relation_select(const cursor& s) const {
        return lexeme(s, [&](const cursor& c) {
            auto al = alias(c);
            if (!al.ok) return fail_as<select_item>(al);
            auto name = then(al, field_name(al.at));
            if (!name.ok) return fail_as<select_item>(name);
            if (name.value == U"count") return then(name, nothing<select_item>(name.at));
            auto params = then(name, embed_params_(name.at));
            if (!params.ok) return fail_as<select_item>(params);
            auto ahead = then(params, paren_ahead(params.at));
            select_item it;
            it.what = select_item::kind::relation;
            it.relation = to_utf8(name.value);
            if (al.value) it.alias = to_utf8(*al.value);
            it.hint = params.value.hint;
            it.join = params.value.join;
            return with(ahead, std::move(it));
        });
    }

    /// pEnd of a select field: ")" or "," ahead, or the end
    reply<unit> select_end(const cursor& s) const {
        auto r = attempt(look_ahead(s, text(s, U")")));
        r = alt(s, std::move(r),
                [&](const cursor& c) { return attempt(look_ahead(c, text(c, U","))); });
        return alt(s, std::move(r), [&](const cursor& c) { return attempt(eof(c)); });
    }

    /// pAggregation: choice [sum, avg, count, try max, try min]
    reply<aggregate> aggregation(const cursor& s) const {
        auto word = [&](std::u32string_view w, aggregate a, bool backtrack) {
            return [this, w, a, backtrack](const cursor& c) {
                auto t = text(c, w);
                return with(backtrack ? attempt(std::move(t)) : std::move(t), a);
            };
        };
        auto r = word(U"sum", aggregate::sum, false)(s);
        r = alt(s, std::move(r), word(U"avg", aggregate::avg, false));
        r = alt(s, std::move(r), word(U"count", aggregate::count, false));
        r = alt(s, std::move(r), word(U"max", aggregate::max, true));
        r = alt(s, std::move(r), word(U"min", aggregate::min, true));
        return alt(s, std::move(r), [](const cursor& c) { return nothing<aggregate>(c); });
    }

    /// pFieldSelect
    reply<select_item> field_select(const cursor& s) const {
        return lexeme(s, [&](const cursor& c) {
            auto r = attempt(star(c));
            r = alt(c, std::move(r), [&](const cursor& d) { return attempt(count_field(d)); });
            return alt(c, std::move(r), [&](const cursor& d) { return plain_field(d); });
        });
    }

    reply<select_item> star(const cursor& s) const {
        auto st = text(s, U"*");
        if (!st.ok) return fail_as<select_item>(st);
        auto end = then(st, select_end(st.at));
        select_item it;
        it.fld.name = "*";
        return with(end, std::move(it));
    }

    reply<select_item> count_field(const cursor& s) const {
        auto al = alias(s);
        if (!al.ok) return fail_as<select_item>(al);
        auto cnt = then(al, text(al.at, U"count()"));
        if (!cnt.ok) return fail_as<select_item>(cnt);
        auto ac = then(cnt, cast(cnt.at));
        if (!ac.ok) return fail_as<select_item>(ac);
        auto end = then(ac, select_end(ac.at));
        select_item it;
        it.fld.name = "*";
        it.agg = aggregate::count;
        if (ac.value) it.agg_cast = to_utf8(*ac.value);
        if (al.value) it.alias = to_utf8(*al.value);
        return with(end, std::move(it));
    }

    reply<select_item> plain_field(const cursor& s) const {
        auto al = alias(s);
        if (!al.ok) return fail_as<select_item>(al);
        auto fld = then(al, field_(al.at));
        if (!fld.ok) return fail_as<select_item>(fld);
        auto cs = then(fld, cast(fld.at));
        if (!cs.ok) return fail_as<select_item>(cs);
        auto agg = then(cs, option_maybe(cs.at, [&](const cursor& c) {
                            auto dot = one(c, U'.');
                            if (!dot.ok) return fail_as<aggregate>(dot);
                            auto a = then(dot, aggregation(dot.at));
                            if (!a.ok) return attempt(a);
                            return attempt(keep(a, text(a.at, U"()")));
                        }));
        if (!agg.ok) return fail_as<select_item>(agg);
        auto ac = then(agg, cast(agg.at));
        if (!ac.ok) return fail_as<select_item>(ac);
        auto end = then(ac, select_end(ac.at));
        select_item it;
        it.fld = std::move(fld.value);
        if (cs.value) it.cast = to_utf8(*cs.value);
        if (agg.value) it.agg = *agg.value;
        if (ac.value) it.agg_cast = to_utf8(*ac.value);
        if (al.value) it.alias = to_utf8(*al.value);
        return with(end, std::move(it));
    }

    /// between (char '(') (char ')') (pFieldForest) one level down
    reply<std::vector<select_item>> children(const cursor& s, unsigned depth) const {
        auto open = one(s, U'(');
        if (!open.ok) return fail_as<std::vector<select_item>>(open);
        if (depth > max_embed_)
            too_deep("Embedded resources in the select parameter are", max_embed_);
        auto kids = then(open, forest(open.at, depth));
        if (!kids.ok) return kids;
        return keep(kids, one(kids.at, U')'));
    }

    /// pFieldTree
    reply<select_item> tree(const cursor& s, unsigned depth) const {
        auto embed = [&](reply<select_item> head) -> reply<select_item> {
            if (!head.ok) return head;
            auto kids = then(head, children(head.at, depth + 1));
            if (!kids.ok) return fail_as<select_item>(kids);
            head.value.children = std::move(kids.value);
            return with(kids, std::move(head.value));
        };
        auto r = embed(attempt(spread_select(s)));
        r = alt(s, std::move(r),
                [&](const cursor& c) { return embed(attempt(relation_select(c))); });
        return alt(s, std::move(r), [&](const cursor& c) { return field_select(c); });
    }

    /// pFieldForest: pFieldTree `sepBy` lexeme (char ',')
    reply<std::vector<select_item>> forest(const cursor& s, unsigned depth) const {
        return sep_by(
            s, [&](const cursor& c) { return tree(c, depth); },
            [&](const cursor& c) {
                return lexeme(c, [&](const cursor& d) { return one(d, U','); });
            });
    }

    // ---- filters ------------------------------------------------------------------------

    enum class value_kind { single, logic };

    /// ciString: each letter in either case
    reply<unit> ci_text(const cursor& s, std::u32string_view w) const {
        reply<unit> acc = pure(s, unit{});
        for (const char32_t ch : w) {
            const char32_t up = ch >= U'a' && ch <= U'z' ? ch - 32 : ch;
            auto r = alt(acc.at, one(acc.at, ch), [&](const cursor& c) { return one(c, up); });
            acc = then(acc, with(r, unit{}));
            if (!acc.ok) return acc;
        }
        return acc;
    }

    /// pIsVal
    reply<is_value> is_val(const cursor& s) const {
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

    /// pSingleVal (many anyChar) or pLogicSingleVal
    reply<str> single_value(const cursor& s, value_kind k) const {
        if (k == value_kind::single) return many_chars(s, [&](const cursor& c) { return any(c); });
        auto r = attempt(quoted_element(s));
        r = alt(s, std::move(r), [&](const cursor& c) { return attempt(pg_array(c)); });
        return alt(s, std::move(r), [&](const cursor& c) {
            return many_chars(c, [&](const cursor& d) { return none_of(d, U",)"); });
        });
    }

    /// pQuotedValue <* notFollowedBy (noneOf ",)")
    reply<str> quoted_element(const cursor& s) const {
        auto q = quoted(s);
        if (!q.ok) return q;
        return keep(q, not_followed_by(q.at, [&](const cursor& c) { return none_of(c, U",)"); }));
    }

    /// pPgArray: "{" ... "}" kept with its braces
    reply<str> pg_array(const cursor& s) const {
        auto open = text(s, U"{");
        if (!open.ok) return fail_as<str>(open);
        auto body =
            then(open, many_chars(open.at, [&](const cursor& c) { return none_of(c, U"{}"); }));
        if (!body.ok) return body;
        auto close = then(body, text(body.at, U"}"));
        return with(close, U"{" + body.value + U"}");
    }

    /// pListVal
    reply<std::vector<str>> list_val(const cursor& s) const {
        auto open = lexeme(s, [&](const cursor& c) { return one(c, U'('); });
        if (!open.ok) return fail_as<std::vector<str>>(open);
        auto items =
            then(open, sep_by1(
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

    /// `try (string w *> pDelimiter)`
    reply<unit> word_dot(const cursor& s, std::u32string_view w) const {
        auto t = text(s, w);
        if (!t.ok) return attempt(t);
        return attempt(with(then(t, delimiter(t.at)), unit{}));
    }

    /// pOpExpr
    reply<op_expr> op_expression(const cursor& s, value_kind k) const {
        auto neg = alt(s, with(word_dot(s, U"not"), true),
                       [&](const cursor& c) { return pure(c, false); });
        auto oper = then(neg, operation(neg.at, k));
        if (oper.ok) oper.value.negated = neg.value;
        return oper;
    }

    reply<op_expr> operation(const cursor& s, value_kind k) const {
        auto r = in_op(s);
        r = alt(s, std::move(r), [&](const cursor& c) { return is_op(c); });
        r = alt(s, std::move(r), [&](const cursor& c) { return is_distinct_op(c, k); });
        r = alt(s, std::move(r), [&](const cursor& c) { return attempt(fts_op(c, k)); });
        r = alt(s, std::move(r), [&](const cursor& c) { return attempt(simple_op(c, k)); });
        r = alt(s, std::move(r), [&](const cursor& c) { return attempt(quant_op(c, k)); });
        return label(std::move(r), "operator (eq, gt, ...)");
    }

    reply<op_expr> in_op(const cursor& s) const {
        auto w = word_dot(s, U"in");
        if (!w.ok) return fail_as<op_expr>(w);
        auto l = then(w, list_val(w.at));
        if (!l.ok) return fail_as<op_expr>(l);
        op_expr e;
        e.op = op::in;
        for (const auto& v : l.value) e.list.push_back(to_utf8(v));
        return with(l, std::move(e));
    }

    reply<op_expr> is_op(const cursor& s) const {
        auto w = word_dot(s, U"is");
        if (!w.ok) return fail_as<op_expr>(w);
        auto v = then(w, is_val(w.at));
        if (!v.ok) return fail_as<op_expr>(v);
        op_expr e;
        e.op = op::is;
        e.is = v.value;
        return with(v, std::move(e));
    }

    reply<op_expr> is_distinct_op(const cursor& s, value_kind k) const {
        auto w = word_dot(s, U"isdistinct");
        if (!w.ok) return fail_as<op_expr>(w);
        auto v = then(w, single_value(w.at, k));
        if (!v.ok) return fail_as<op_expr>(v);
        op_expr e;
        e.op = op::isdistinct;
        e.value = to_utf8(v.value);
        return with(v, std::move(e));
    }

    /// An alternation of `try (string w)` words, as simpleOperator / quantOperator / pFts.
    template <std::size_t N>
    reply<op> words(const cursor& s, const std::pair<std::u32string_view, op> (&ws_)[N]) const {
        auto r = with(attempt(text(s, ws_[0].first)), ws_[0].second);
        for (std::size_t i = 1; i < N; ++i) {
            r = alt(s, std::move(r), [&](const cursor& c) {
                return with(attempt(text(c, ws_[i].first)), ws_[i].second);
            });
        }
        return r;
    }

    reply<op_expr> fts_op(const cursor& s, value_kind k) const {
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

    reply<op_expr> simple_op(const cursor& s, value_kind k) const {
        static const std::pair<std::u32string_view, op> kWords[] = {
            {U"neq", op::neq}, {U"cs", op::cs},   {U"cd", op::cd},
            {U"ov", op::ov},   {U"sl", op::sl},   {U"sr", op::sr},
            {U"nxr", op::nxr}, {U"nxl", op::nxl}, {U"adj", op::adj}};
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

    reply<op_expr> quant_op(const cursor& s, value_kind k) const {
        static const std::pair<std::u32string_view, op> kWords[] = {
            {U"eq", op::eq},       {U"gte", op::gte},     {U"gt", op::gt},
            {U"lte", op::lte},     {U"lt", op::lt},       {U"like", op::like},
            {U"ilike", op::ilike}, {U"match", op::match}, {U"imatch", op::imatch}};
        auto o = label(words(s, kWords), "unknown single value operator");
        if (!o.ok) return fail_as<op_expr>(o);
        auto q =
            then(o, option_maybe(o.at, [&](const cursor& c) {
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

    // ---- order --------------------------------------------------------------------------

    reply<order_dir> order_dir_(const cursor& s) const {
        auto dotted = [&](std::u32string_view w, order_dir d) {
            return [this, w, d](const cursor& c) {
                auto dot = delimiter(c);
                if (!dot.ok) return fail_as<order_dir>(dot);
                return attempt(with(then(dot, text(dot.at, w)), d));
            };
        };
        return alt(s, dotted(U"asc", order_dir::asc)(s), dotted(U"desc", order_dir::desc));
    }

    reply<order_nulls> order_nulls_(const cursor& s) const {
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

    /// pEnd of an order term: "," ahead or the end
    reply<unit> order_end(const cursor& s) const {
        return alt(s, attempt(look_ahead(s, with(one(s, U','), unit{}))),
                   [&](const cursor& c) { return attempt(eof(c)); });
    }

    /// dir <- optionMaybe pOrdDir; nls <- optionMaybe pNulls <* pEnd <|> pEnd $> Nothing
    reply<order_term> order_tail(const cursor& s, order_term t) const {
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

    reply<order_term> order_relation_term(const cursor& s) const {
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

    reply<order_term> order_term_(const cursor& s) const {
        auto fld = field_(s);
        if (!fld.ok) return fail_as<order_term>(fld);
        order_term t;
        t.fld = std::move(fld.value);
        return then(fld, order_tail(fld.at, std::move(t)));
    }

    /// pOrder
    reply<std::vector<order_term>> order(const cursor& s) const {
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

    // ---- and/or -------------------------------------------------------------------------

    /// pLogicTree
    reply<logic_tree> logic(const cursor& s, unsigned depth) const {
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

    reply<logic_tree> logic_expr(const cursor& s, unsigned depth) const {
        auto neg = label(alt(s, with(word_dot(s, U"not"), true),
                             [&](const cursor& c) { return pure(c, false); }),
                         "negation operator (not)");
        auto lop = then(neg, label(alt(neg.at, with(attempt(text(neg.at, U"and")), false),
                                       [&](const cursor& c) { return with(text(c, U"or"), true); }),
                                   "logic operator (and, or)"));
        if (!lop.ok) return fail_as<logic_tree>(lop);
        auto open = then(lop, lexeme(lop.at, [&](const cursor& c) { return one(c, U'('); }));
        if (!open.ok) return fail_as<logic_tree>(open);
        if (depth + 1 > max_logic_) too_deep("Logic trees (and/or) are", max_logic_);
        auto kids =
            then(open, sep_by1(
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

    // ---- names --------------------------------------------------------------------------

    /// pFieldName `sepBy1` pDelimiter
    reply<std::vector<str>> dotted_names(const cursor& s) const {
        return sep_by1(
            s, [&](const cursor& c) { return field_name(c); },
            [&](const cursor& c) { return delimiter(c); });
    }

    /// pColumns
    reply<std::vector<str>> columns(const cursor& s) const {
        return sep_by1(
            s, [&](const cursor& c) { return field_name(c); },
            [&](const cursor& c) {
                return lexeme(c, [&](const cursor& d) { return one(d, U','); });
            });
    }

private:
    unsigned max_embed_;
    unsigned max_logic_;
};

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
