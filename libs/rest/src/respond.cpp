// The HTTP answer to a data-API request whose statement ran (query.hpp respond): status, body and
// headers as PostgREST answers them (Content-Range, Location, Preference-Applied,
// Content-Profile, the response.status / response.headers settings a function may set), and
// the checks that refuse the result and roll the transaction back (.single(), max-affected,
// PUT's key).
#include <charconv>

#include "awp/core/json.hpp"
#include "awp/rest/query.hpp"

namespace awp::rest {

namespace {

std::string content_range(std::int64_t lower, std::int64_t upper,
                          std::optional<std::int64_t> total) {
    const bool total_not_zero = !total || *total != 0;
    std::string range = total_not_zero && lower <= upper
                            ? std::to_string(lower) + "-" + std::to_string(upper)
                            : std::string("*");
    return range + "/" + (total ? std::to_string(*total) : std::string("*"));
}

std::optional<std::int64_t> to_int(const std::optional<std::string>& s) {
    if (!s || s->empty()) return std::nullopt;
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
    if (ec != std::errc() || ptr != s->data() + s->size()) return std::nullopt;
    return v;
}

bool has_header(const outcome& o, std::string_view name) {
    for (const auto& [k, v] : o.headers) {
        if (k.size() != name.size()) continue;
        bool same = true;
        for (std::size_t i = 0; i < k.size() && same; ++i) {
            same = std::tolower(static_cast<unsigned char>(k[i])) ==
                   std::tolower(static_cast<unsigned char>(name[i]));
        }
        if (same) return true;
    }
    return false;
}

std::string url_encode(std::string_view s) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

/// The Location of an inserted row: /<table>?pk=eq.value&... in the key's order.
std::string location_of(const prepared& p, const std::string& json_pairs,
                        const std::vector<std::string>& key_order) {
    auto d = core::json::try_parse(json_pairs, core::json::kSmall);
    if (!d || !d->IsObject()) return {};
    std::string q;
    auto add = [&](const std::string& k, const rapidjson::Value& v) {
        q += q.empty() ? "?" : "&";
        q += url_encode(k) + "=";
        q += v.IsString() ? "eq." + url_encode(std::string(v.GetString(), v.GetStringLength()))
                          : std::string("is.null");
    };
    for (const auto& k : key_order) {
        auto it = d->FindMember(k.c_str());
        if (it != d->MemberEnd()) add(k, it->value);
    }
    if (key_order.empty()) {
        for (auto it = d->MemberBegin(); it != d->MemberEnd(); ++it) {
            add(std::string(it->name.GetString(), it->name.GetStringLength()), it->value);
        }
    }
    return p.location_base + q;
}

/// The response.headers setting: a JSON array of one-key objects with string values.
std::vector<std::pair<std::string, std::string>> guc_headers(const std::string& text) {
    auto fail = [] {
        return api_error(500, "PGRST111",
                         "response.headers guc must be a JSON array composed of objects with a "
                         "single key and a string value");
    };
    auto d = core::json::try_parse(text, core::json::kSmall);
    if (!d || !d->IsArray()) throw fail();
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& o : d->GetArray()) {
        if (!o.IsObject() || o.MemberCount() != 1 || !o.MemberBegin()->value.IsString()) {
            throw fail();
        }
        const auto& m = *o.MemberBegin();
        std::string k(m.name.GetString(), m.name.GetStringLength());
        std::string v(m.value.GetString(), m.value.GetStringLength());
        // Header injection: no line breaks in a name or a value a function chose.
        if (k.find_first_of("\r\n:") != std::string::npos ||
            v.find_first_of("\r\n") != std::string::npos || k.empty()) {
            throw fail();
        }
        out.emplace_back(std::move(k), std::move(v));
    }
    return out;
}

}  // namespace

std::optional<std::int64_t> planned_rows(std::string_view explain_json) {
    auto d = core::json::try_parse(explain_json, core::json::kDocument);
    if (!d || !d->IsArray() || d->Empty() || !(*d)[0].IsObject()) return std::nullopt;
    auto plan = (*d)[0].FindMember("Plan");
    if (plan == (*d)[0].MemberEnd() || !plan->value.IsObject()) return std::nullopt;
    auto rows = plan->value.FindMember("Plan Rows");
    if (rows == plan->value.MemberEnd() || !rows->value.IsNumber()) return std::nullopt;
    return static_cast<std::int64_t>(rows->value.GetDouble());
}

outcome respond(const prepared& p, const main_row& row, std::optional<std::int64_t> planned,
                const options& o) {
    const auto& r = p.req;
    const auto n = row.page_total;
    if (p.single_object && n != 1) {
        throw api_error(406, "PGRST116", "Cannot coerce the result to a single JSON object",
                        "The result contains " + std::to_string(n) + " rows");
    }
    if (r.action == action::upsert_one && n != 1) {
        throw api_error(400, "PGRST115",
                        "Payload values do not match URL in primary key column(s)");
    }
    const bool strict_max = r.prefer.max_affected && r.prefer.handling == prefer_handling::strict &&
                            (r.action == action::update || r.action == action::remove ||
                             (r.action == action::call && !r.read_only));
    if (strict_max && n > *r.prefer.max_affected) {
        throw api_error(400, "PGRST124", "Query result exceeds max-affected preference constraint",
                        "The query affects " + std::to_string(n) + " rows");
    }
    outcome out;
    if (r.action == action::info) {
        out.status = 200;
        out.headers.emplace_back("Allow", p.allow);
        return out;
    }
    out.commit = !(o.tx_override && r.prefer.tx == prefer_tx::rollback);
    const bool counted = r.prefer.count != prefer_count::none;
    auto add = [&](std::string k, std::string v) {
        out.headers.emplace_back(std::move(k), std::move(v));
    };
    auto with_type = [&] {
        add("Content-Type", p.content_type);
        if (r.schema_negotiated) add("Content-Profile", r.schema);
    };
    if (p.out.kind == media::plan) {
        out.status = 200;
        out.body = row.body;
        with_type();
        return out;
    }
    switch (r.action) {
        case action::read:
        case action::call: {
            if (p.is_call && p.call_void) {
                out.status = 204;
                break;
            }
            std::optional<std::int64_t> total = to_int(row.total);
            if (r.prefer.count == prefer_count::planned) {
                total = planned;
            } else if (r.prefer.count == prefer_count::estimated && total && o.max_rows &&
                       *total > *o.max_rows && planned) {
                total = std::max(*total, *planned);
            }
            const auto lower = r.top_range.offset;
            const auto upper = lower + n - 1;
            add("Content-Range", content_range(lower, upper, total));
            out.status = 200;
            if (total) {
                if (lower > *total) {
                    out.status = 416;
                } else if (1 + upper - lower < *total) {
                    out.status = 206;
                }
            }
            if (out.status == 416) {
                api_error e(416, "PGRST103", "Requested range not satisfiable",
                            "An offset of " + std::to_string(lower) +
                                " was requested, but there are only " + std::to_string(*total) +
                                " rows.");
                out.body = e.body();
                add("Content-Type", "application/json; charset=utf-8");
                break;
            }
            if (!r.head) out.body = row.body;
            with_type();
            break;
        }
        case action::insert: {
            const auto inserted = to_int(row.inserted);
            out.status = 201;
            if (inserted && *inserted <= 0 &&
                r.prefer.resolution == prefer_resolution::merge_duplicates) {
                out.status = 200;
            }
            if (p.location && n == 1 && row.location) {
                add("Location", location_of(p, *row.location, p.location_keys));
            }
            add("Content-Range",
                content_range(1, 0, counted ? std::optional<std::int64_t>(n) : std::nullopt));
            if (r.prefer.ret == prefer_return::representation) {
                out.body = row.body;
                with_type();
            }
            break;
        }
        case action::upsert_one: {
            const auto inserted = to_int(row.inserted);
            if (r.prefer.ret == prefer_return::representation) {
                out.status = inserted && *inserted > 0 ? 201 : 200;
                out.body = row.body;
                with_type();
            } else {
                out.status = 204;
            }
            break;
        }
        case action::update:
        case action::remove: {
            if (r.action == action::update) {
                add("Content-Range",
                    content_range(0, n - 1,
                                  counted ? std::optional<std::int64_t>(n) : std::nullopt));
            } else {
                add("Content-Range",
                    content_range(1, 0, counted ? std::optional<std::int64_t>(n) : std::nullopt));
            }
            if (r.prefer.ret == prefer_return::representation) {
                out.status = 200;
                out.body = row.body;
                with_type();
            } else {
                out.status = 204;
            }
            break;
        }
        default:
            break;
    }
    const auto applied = r.prefer.applied_header(o.tx_override);
    if (!applied.empty()) add("Preference-Applied", applied);
    // What the SQL set overrides ours (response.status, response.headers).
    if (row.response_headers) {
        auto extra = guc_headers(*row.response_headers);
        std::vector<std::pair<std::string, std::string>> merged = extra;
        outcome probe;
        probe.headers = extra;
        for (auto& h : out.headers) {
            if (!has_header(probe, h.first)) merged.push_back(std::move(h));
        }
        out.headers = std::move(merged);
    }
    if (row.response_status) {
        const auto s = to_int(row.response_status);
        if (!s || *s < 100 || *s > 599) {
            throw api_error(500, "PGRST112", "response.status guc must be a valid status code");
        }
        out.status = static_cast<unsigned>(*s);
    }
    return out;
}

}  // namespace awp::rest
