// Realtime's socket side on arbitrary bytes: a Phoenix frame (first byte picks vsn 1.0.0 or
// 2.0.0) parsed under the socket's limits; a phx_join's config.postgres_changes entries parsed
// as bindings with their filters and tested against a change; and the text after a NUL byte
// (when there is one) typed as a column value of each type the event data knows. Only
// frame_error and binding_error are expected; every answer serialised must be valid JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "awp/core/json.hpp"
#include "awp/realtime/binding.hpp"
#include "awp/realtime/phoenix.hpp"
#include "awp/realtime/record.hpp"

namespace {

namespace rt = awp::realtime;
namespace phx = awp::realtime::phoenix;

/// JSON's grammar with valid UTF-8; numbers only as text (a numeric's 1000 digits are a valid
/// JSON number a double cannot hold, as the platform sends them too).
void must_be_json(const std::string& text) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseValidateEncodingFlag>(
        text.data(), text.size());
    if (d.HasParseError()) std::abort();
}

void bindings(const phx::message& m, const rt::change& c) {
    auto cfg = m.payload.FindMember("config");
    if (cfg == m.payload.MemberEnd() || !cfg->value.IsObject()) return;
    auto pc = cfg->value.FindMember("postgres_changes");
    if (pc == cfg->value.MemberEnd() || !pc->value.IsArray()) return;
    for (const auto& v : pc->value.GetArray()) {
        try {
            auto b = rt::parse_binding(v);
            must_be_json(b.reply_json());
            (void)b.covers(c.kind, c.schema, c.table);
            (void)rt::filters_hold(b, c);
        } catch (const rt::binding_error&) {
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const auto v = (data[0] & 1) ? phx::vsn::v2 : phx::vsn::v1;
    std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::string_view frame = all;
    std::string_view value;
    if (auto nul = all.find('\0'); nul != std::string_view::npos) {
        frame = all.substr(0, nul);
        value = all.substr(nul + 1);
    }
    rt::change c;
    c.kind = rt::change_kind::insert;
    c.schema = "public";
    c.table = "t";
    for (const char* type : {"int4", "numeric", "bool", "jsonb", "_int4", "_text", "timestamptz",
                             "timestamp", "text", "uuid"}) {
        rt::column_value col;
        col.name = "c";
        col.type = type;
        col.text = std::string(value);
        c.new_row.push_back(col);
        awp::core::json::writer j;
        // jsonb's text is trusted (Postgres checked it): only the others must come out as JSON.
        if (std::string_view(type) == "jsonb") continue;
        j.w.StartArray();
        rt::write_value(j, type, value);
        j.w.EndArray();
        must_be_json(j.str());
    }
    try {
        auto m = phx::parse(frame, v);
        bindings(m, c);
        const phx::outgoing o{m.join_ref, m.ref, m.topic, m.event, "{}"};
        must_be_json(phx::serialize(o, v));
    } catch (const phx::frame_error&) {
    }
    return 0;
}
