// The select= rules (grammar_rules.hpp): the forest of fields, aggregates, count(), embeds with
// their !hint and !inner/!left, and spreads; nesting refused past the embed limit.
#include "grammar_rules.hpp"

namespace awp::rest::detail {

reply<grammar::embed_param> grammar::embed_param_(const cursor& s) const {
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

reply<grammar::embed_params> grammar::embed_params_(const cursor& s) const {
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

reply<unit> grammar::paren_ahead(const cursor& s) const {
    return attempt(look_ahead(s, text(s, U"(")));
}

reply<select_item> grammar::spread_select(const cursor& s) const {
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

reply<select_item> grammar::relation_select(const cursor& s) const {
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

reply<unit> grammar::select_end(const cursor& s) const {
    auto r = attempt(look_ahead(s, text(s, U")")));
    r = alt(s, std::move(r),
            [&](const cursor& c) { return attempt(look_ahead(c, text(c, U","))); });
    return alt(s, std::move(r), [&](const cursor& c) { return attempt(eof(c)); });
}

reply<aggregate> grammar::aggregation(const cursor& s) const {
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

reply<select_item> grammar::field_select(const cursor& s) const {
    return lexeme(s, [&](const cursor& c) {
        auto r = attempt(star(c));
        r = alt(c, std::move(r), [&](const cursor& d) { return attempt(count_field(d)); });
        return alt(c, std::move(r), [&](const cursor& d) { return plain_field(d); });
    });
}

reply<select_item> grammar::star(const cursor& s) const {
    auto st = text(s, U"*");
    if (!st.ok) return fail_as<select_item>(st);
    auto end = then(st, select_end(st.at));
    select_item it;
    it.fld.name = "*";
    return with(end, std::move(it));
}

reply<select_item> grammar::count_field(const cursor& s) const {
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

reply<select_item> grammar::plain_field(const cursor& s) const {
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

reply<std::vector<select_item>> grammar::children(const cursor& s, unsigned depth) const {
    auto open = one(s, U'(');
    if (!open.ok) return fail_as<std::vector<select_item>>(open);
    if (depth > max_embed_) too_deep("Embedded resources in the select parameter are", max_embed_);
    auto kids = then(open, forest(open.at, depth));
    if (!kids.ok) return kids;
    return keep(kids, one(kids.at, U')'));
}

reply<select_item> grammar::tree(const cursor& s, unsigned depth) const {
    auto embed = [&](reply<select_item> head) -> reply<select_item> {
        if (!head.ok) return head;
        auto kids = then(head, children(head.at, depth + 1));
        if (!kids.ok) return fail_as<select_item>(kids);
        head.value.children = std::move(kids.value);
        return with(kids, std::move(head.value));
    };
    auto r = embed(attempt(spread_select(s)));
    r = alt(s, std::move(r), [&](const cursor& c) { return embed(attempt(relation_select(c))); });
    return alt(s, std::move(r), [&](const cursor& c) { return field_select(c); });
}

reply<std::vector<select_item>> grammar::forest(const cursor& s, unsigned depth) const {
    return sep_by(
        s, [&](const cursor& c) { return tree(c, depth); },
        [&](const cursor& c) { return lexeme(c, [&](const cursor& d) { return one(d, U','); }); });
}

}  // namespace awp::rest::detail
