// The grammar's rules as one class over parsec.hpp's scanner (grammar_*.cpp define them, one
// file per kind of parameter): each rule a Parsec parser of QueryParams.hs in behaviour.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "awp/rest/request.hpp"
#include "parsec.hpp"

namespace awp::rest::detail {

using str = std::u32string;

/// Whatever limits say, recursion stops here: a stack frame chain this deep is still small.
inline constexpr unsigned kMaxNesting = 64;

/// T.strip
[[nodiscard]] str strip(str s);
/// The limit errors of nesting: refused before descending, with what was too deep.
[[noreturn]] void too_deep(std::string_view what, unsigned max);

/// return x (a success that consumed nothing and explains nothing)
template <class T>
[[nodiscard]] reply<T> pure(const cursor& s, T v) {
    return {true, false, std::move(v), s, {s.pos, {}}};
}

/// mzero / guard False
template <class T>
[[nodiscard]] reply<T> nothing(const cursor& s) {
    return {false, false, T{}, s, {s.pos, {}}};
}

class grammar : public scanner {
public:
    grammar(str in, unsigned max_embed, unsigned max_logic)
        : scanner(std::move(in)),
          max_embed_(std::min(max_embed, kMaxNesting)),
          max_logic_(std::min(max_logic, kMaxNesting)) {}

    // ---- lexical pieces -----------------------------------------------------------------

    reply<unit> ws(const cursor& s) const;

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
    reply<char32_t> delimiter(const cursor& s) const;

    /// pIdentifierChar
    reply<char32_t> ident_char(const cursor& s) const;

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
    reply<str> identifier(const cursor& s) const;

    /// isDash: try (char '-' >> notFollowedBy (char '>'))
    reply<unit> dash(const cursor& s) const;

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
    reply<str> quoted(const cursor& s) const;

    /// pFieldName
    reply<str> field_name(const cursor& s) const;

    /// pJsonPath
    reply<json_path> json_path_(const cursor& s) const;

    reply<json_step> json_operation(const cursor& s) const;

    /// pJIdx: an optional '-', digits, then one of "->", "::", ".", "," or the end ahead
    reply<json_step> json_index(const cursor& s) const;

    reply<unit> index_end(const cursor& s) const;

    /// JKey <$> pJsonKeyName
    reply<json_step> json_key(const cursor& s) const;

    /// pField: lexeme ((,) <$> pFieldName <*> option [] pJsonPath)
    reply<field> field_(const cursor& s) const;

    /// aliasSeparator: char ':' >> notFollowedBy (char ':')
    reply<unit> alias_sep(const cursor& s) const;

    /// optionMaybe (try (pFieldName <* aliasSeparator))
    reply<std::optional<str>> alias(const cursor& s) const;

    /// optionMaybe (string "::" *> pIdentifier)
    reply<std::optional<str>> cast(const cursor& s) const;

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
    reply<embed_param> embed_param_(const cursor& s) const;

    /// pEmbedParams: two optional params; the first hint and the first join type win
    reply<embed_params> embed_params_(const cursor& s) const;

    /// try (void $ lookAhead (string "("))
    reply<unit> paren_ahead(const cursor& s) const;

    /// pSpreadRelationSelect
    reply<select_item> spread_select(const cursor& s) const;

    /// pRelationSelect
    reply<select_item> relation_select(const cursor& s) const;

    /// pEnd of a select field: ")" or "," ahead, or the end
    reply<unit> select_end(const cursor& s) const;

    /// pAggregation: choice [sum, avg, count, try max, try min]
    reply<aggregate> aggregation(const cursor& s) const;

    /// pFieldSelect
    reply<select_item> field_select(const cursor& s) const;

    reply<select_item> star(const cursor& s) const;

    reply<select_item> count_field(const cursor& s) const;

    reply<select_item> plain_field(const cursor& s) const;

    /// between (char '(') (char ')') (pFieldForest) one level down
    reply<std::vector<select_item>> children(const cursor& s, unsigned depth) const;

    /// pFieldTree
    reply<select_item> tree(const cursor& s, unsigned depth) const;

    /// pFieldForest: pFieldTree `sepBy` lexeme (char ',')
    reply<std::vector<select_item>> forest(const cursor& s, unsigned depth) const;

    // ---- filters ------------------------------------------------------------------------

    enum class value_kind { single, logic };

    /// ciString: each letter in either case
    reply<unit> ci_text(const cursor& s, std::u32string_view w) const;

    /// pIsVal
    reply<is_value> is_val(const cursor& s) const;

    /// pSingleVal (many anyChar) or pLogicSingleVal
    reply<str> single_value(const cursor& s, value_kind k) const;

    /// pQuotedValue <* notFollowedBy (noneOf ",)")
    reply<str> quoted_element(const cursor& s) const;

    /// pPgArray: "{" ... "}" kept with its braces
    reply<str> pg_array(const cursor& s) const;

    /// pListVal
    reply<std::vector<str>> list_val(const cursor& s) const;

    /// `try (string w *> pDelimiter)`
    reply<unit> word_dot(const cursor& s, std::u32string_view w) const;

    /// pOpExpr
    reply<op_expr> op_expression(const cursor& s, value_kind k) const;

    reply<op_expr> operation(const cursor& s, value_kind k) const;

    reply<op_expr> in_op(const cursor& s) const;

    reply<op_expr> is_op(const cursor& s) const;

    reply<op_expr> is_distinct_op(const cursor& s, value_kind k) const;

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

    reply<op_expr> fts_op(const cursor& s, value_kind k) const;

    reply<op_expr> simple_op(const cursor& s, value_kind k) const;

    reply<op_expr> quant_op(const cursor& s, value_kind k) const;

    // ---- order --------------------------------------------------------------------------

    reply<order_dir> order_dir_(const cursor& s) const;

    reply<order_nulls> order_nulls_(const cursor& s) const;

    /// pEnd of an order term: "," ahead or the end
    reply<unit> order_end(const cursor& s) const;

    /// dir <- optionMaybe pOrdDir; nls <- optionMaybe pNulls <* pEnd <|> pEnd $> Nothing
    reply<order_term> order_tail(const cursor& s, order_term t) const;

    reply<order_term> order_relation_term(const cursor& s) const;

    reply<order_term> order_term_(const cursor& s) const;

    /// pOrder
    reply<std::vector<order_term>> order(const cursor& s) const;

    // ---- and/or -------------------------------------------------------------------------

    /// pLogicTree
    reply<logic_tree> logic(const cursor& s, unsigned depth) const;

    reply<logic_tree> logic_expr(const cursor& s, unsigned depth) const;

    // ---- names --------------------------------------------------------------------------

    /// pFieldName `sepBy1` pDelimiter
    reply<std::vector<str>> dotted_names(const cursor& s) const;

    /// pColumns
    reply<std::vector<str>> columns(const cursor& s) const;

private:
    unsigned max_embed_;
    unsigned max_logic_;
};

}  // namespace awp::rest::detail
