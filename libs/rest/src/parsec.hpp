// A small model of Parsec's (3.1) parser semantics in direct style, so the grammar in
// grammar.cpp fails exactly where and with exactly the words PostgREST's Parsec parsers do:
// "empty" vs "consumed" replies, errors merged at the furthest position, labels replacing the
// expected items of a reply that consumed nothing, and Parsec's rendering of the messages
// ("unexpected \"x\" expecting a, b or c"). Clients compare those texts verbatim.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace awp::rest::detail {

/// A line and column as Parsec counts them (tabs to the next multiple of 8 plus one).
struct source_pos {
    std::uint32_t line = 1;
    std::uint32_t col = 1;
};
[[nodiscard]] int compare(source_pos a, source_pos b) noexcept;

/// Parsec's four message kinds, in its sort order.
enum class msg_kind : std::uint8_t { sys_unexpect, unexpect, expect, message };
struct message {
    msg_kind kind;
    std::string text;
};

/// A ParseError: a position and its messages (none = "unknown error").
struct parse_error {
    source_pos pos;
    std::vector<message> msgs;
    [[nodiscard]] bool unknown() const noexcept { return msgs.empty(); }
};

/// mergeError: the meaningful error, else the one further on, else both.
[[nodiscard]] parse_error merge(parse_error a, parse_error b);
/// setExpectErrors with one label: every "expecting" item replaced by `label`.
void set_expect(parse_error& e, std::string label);

/// Where a parser is: an index into the code points and Parsec's position there.
struct cursor {
    std::size_t i = 0;
    source_pos pos;
};

/// A reply: ok or not, consumed input or not, the value, where it stopped, and its error
/// (on success the error explains why it stopped, for merging with what comes next).
template <class T>
struct reply {
    bool ok = false;
    bool consumed = false;
    T value{};
    cursor at;
    parse_error err;
};

struct unit {};

template <class T, class A>
[[nodiscard]] reply<T> fail_as(const reply<A>& a) {
    return {false, a.consumed, T{}, a.at, a.err};
}

/// Parsec's bind: `b` ran after `a` succeeded. Consumption adds up; when `b` consumed
/// nothing its error is merged with what `a` left (unless `a` left no error).
template <class A, class B>
[[nodiscard]] reply<B> then(const reply<A>& a, reply<B> b) {
    if (!b.consumed && !a.err.unknown()) b.err = merge(a.err, std::move(b.err));
    b.consumed = b.consumed || a.consumed;
    return b;
}

/// `a <* b` after b ran: b's consumption and error, a's value.
template <class A, class B>
[[nodiscard]] reply<A> keep(const reply<A>& a, const reply<B>& b) {
    reply<B> r = then(a, b);
    return {r.ok, r.consumed, r.ok ? a.value : A{}, r.at, std::move(r.err)};
}

/// Replaces a reply's value (fmap).
template <class T, class A>
[[nodiscard]] reply<T> with(const reply<A>& a, T value) {
    return {a.ok, a.consumed, a.ok ? std::move(value) : T{}, a.at, a.err};
}

/// `try`: a failure that consumed input becomes one that did not.
template <class T>
[[nodiscard]] reply<T> attempt(reply<T> r) {
    if (!r.ok) r.consumed = false;
    return r;
}

/// `<?>`: a reply that consumed nothing expects `label` instead of what it listed.
template <class T>
[[nodiscard]] reply<T> label(reply<T> r, std::string name) {
    if (!r.consumed && (!r.ok || !r.err.unknown())) set_expect(r.err, std::move(name));
    return r;
}

/// `p <|> q`: q runs only when p failed without consuming; the errors merge.
template <class T, class Q>
[[nodiscard]] reply<T> alt(const cursor& s, reply<T> p, Q&& q) {
    if (p.ok || p.consumed) return p;
    reply<T> r = q(s);
    if (!r.consumed) r.err = merge(std::move(p.err), std::move(r.err));
    return r;
}

/// Haskell's `show` of a String ("\"a\\n\"") and of a Char ("'a'"), as Parsec prints tokens.
[[nodiscard]] std::string show_string(std::u32string_view s);
[[nodiscard]] std::string show_char(char32_t c);

/// showErrorMessages with Parsec's English words, newlines as spaces, trimmed (PostgREST's
/// `details` of a PGRST100).
[[nodiscard]] std::string render(const parse_error& e);
/// `show` of a ParseError's position with the parse's name: "\"name\" (line 1, column 5)".
[[nodiscard]] std::string render_pos(std::string_view name, source_pos pos);

/// Haskell's isAlpha (Unicode letters: Lu, Ll, Lt, Lm, Lo) and isSpace.
[[nodiscard]] bool is_alpha(char32_t c) noexcept;
[[nodiscard]] bool is_space(char32_t c) noexcept;

/// UTF-8 to code points; false on an invalid sequence.
[[nodiscard]] bool decode_utf8(std::string_view in, std::u32string& out);
[[nodiscard]] std::string to_utf8(std::u32string_view s);
/// decodeUtf8With lenientDecode: each byte that starts no valid sequence becomes U+FFFD.
[[nodiscard]] std::string lenient_utf8(std::string_view bytes);

/// The primitives over one input (tokenPrim, satisfy, string, eof, ...).
class scanner {
public:
    explicit scanner(std::u32string input) : in_(std::move(input)) {}
    [[nodiscard]] const std::u32string& input() const noexcept { return in_; }
    [[nodiscard]] bool at_end(const cursor& s) const noexcept { return s.i >= in_.size(); }
    [[nodiscard]] char32_t peek(const cursor& s) const noexcept { return in_[s.i]; }
    /// The cursor one code point on (updatePosChar).
    [[nodiscard]] cursor step(cursor s) const noexcept;

    /// satisfy: one code point for which `pred` holds (no label).
    template <class P>
    [[nodiscard]] reply<char32_t> satisfy(const cursor& s, P&& pred) const {
        if (at_end(s)) return {false, false, 0, s, {s.pos, {{msg_kind::sys_unexpect, ""}}}};
        const char32_t c = in_[s.i];
        if (!pred(c)) {
            return {false, false, 0, s, {s.pos, {{msg_kind::sys_unexpect, show_one(c)}}}};
        }
        const cursor n = step(s);
        return {true, true, c, n, {n.pos, {}}};
    }
    /// char c (labelled with show [c]).
    [[nodiscard]] reply<char32_t> one(const cursor& s, char32_t c) const;
    /// oneOf / noneOf (unlabelled).
    [[nodiscard]] reply<char32_t> one_of(const cursor& s, std::u32string_view set) const;
    [[nodiscard]] reply<char32_t> none_of(const cursor& s, std::u32string_view set) const;
    /// anyChar.
    [[nodiscard]] reply<char32_t> any(const cursor& s) const;
    /// letter, digit (labelled).
    [[nodiscard]] reply<char32_t> letter(const cursor& s) const;
    [[nodiscard]] reply<char32_t> digit(const cursor& s) const;
    /// string (Parsec's `tokens`): consumes on a partial match; the error sits at the start.
    [[nodiscard]] reply<unit> text(const cursor& s, std::u32string_view t) const;
    /// eof (notFollowedBy anyToken <?> "end of input").
    [[nodiscard]] reply<unit> eof(const cursor& s) const;
    /// notFollowedBy p for a one-code-point parser p.
    template <class P>
    [[nodiscard]] reply<unit> not_followed_by(const cursor& s, P&& p) const {
        reply<char32_t> r = attempt(p(s));
        if (r.ok) {
            // unexpected (show c), reported where p stopped; the outer try makes it empty.
            return {
                false, false, unit{}, s, {r.at.pos, {{msg_kind::unexpect, show_char(r.value)}}}};
        }
        return {true, false, unit{}, s, std::move(r.err)};
    }

private:
    [[nodiscard]] static std::string show_one(char32_t c) {
        return show_string(std::u32string_view(&c, 1));
    }
    std::u32string in_;
};

/// lookAhead p: p's success without moving; its failure as it is.
template <class T>
[[nodiscard]] reply<T> look_ahead(const cursor& s, reply<T> r) {
    if (r.ok) return {true, false, std::move(r.value), s, {s.pos, {}}};
    return r;
}

/// many p, folding each value into `acc`. p must consume when it succeeds (Parsec aborts
/// otherwise; here the loop stops, which cannot happen with this grammar's parsers).
template <class Acc, class P, class F>
[[nodiscard]] reply<Acc> many(const cursor& s, Acc acc, P&& p, F&& fold) {
    cursor at = s;
    bool consumed = false;
    for (;;) {
        auto r = p(at);
        if (r.ok && r.consumed) {
            fold(acc, std::move(r.value));
            at = r.at;
            consumed = true;
            continue;
        }
        if (!r.ok && r.consumed) return {false, true, Acc{}, r.at, std::move(r.err)};
        return {true, consumed, std::move(acc), at, std::move(r.err)};
    }
}

}  // namespace awp::rest::detail
