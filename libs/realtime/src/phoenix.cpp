// Phoenix frames in and out (phoenix.hpp): the JSON goes through core::json's bounded parser,
// then the shape is checked field by field so a hostile frame is refused with a reason.
#include "awp/realtime/phoenix.hpp"

#include <string>

#include "awp/core/json.hpp"

namespace awp::realtime::phoenix {

namespace json = core::json;

std::optional<vsn> parse_vsn(std::optional<std::string_view> text) {
    if (!text || *text == "1.0.0") return vsn::v1;
    if (*text == "2.0.0") return vsn::v2;
    return std::nullopt;
}

namespace {

std::optional<std::string> ref_of(const rapidjson::Value& v, const char* what, std::size_t max) {
    if (v.IsNull()) return std::nullopt;
    std::string out;
    if (v.IsString()) {
        out.assign(v.GetString(), v.GetStringLength());
    } else if (v.IsInt64()) {
        out = std::to_string(v.GetInt64());
    } else if (v.IsUint64()) {
        out = std::to_string(v.GetUint64());
    } else {
        throw frame_error(std::string(what) + " must be a string or null");
    }
    if (out.size() > max) throw frame_error(std::string(what) + " is too long");
    return out;
}

std::string text_of(const rapidjson::Value& v, const char* what, std::size_t max) {
    if (!v.IsString()) throw frame_error(std::string(what) + " must be a string");
    if (v.GetStringLength() > max) throw frame_error(std::string(what) + " is too long");
    if (v.GetStringLength() == 0) throw frame_error(std::string(what) + " is empty");
    return {v.GetString(), v.GetStringLength()};
}

void take_payload(message& m, const rapidjson::Value& v) {
    if (v.IsNull()) {
        m.payload.SetObject();
        return;
    }
    if (!v.IsObject()) throw frame_error("payload must be an object");
    // The document owns its allocator: copy into the message's own.
    m.payload.CopyFrom(v, m.payload.GetAllocator());
}

}  // namespace

message parse(std::string_view text, vsn v, const limits& l) {
    if (text.size() > l.max_bytes) throw frame_error("frame too large");
    rapidjson::Document d;
    try {
        d = json::parse(text, json::limits{l.max_bytes, l.max_depth});
    } catch (const json::parse_error& e) {
        throw frame_error(std::string("not JSON: ") + e.what());
    }
    message m;
    static const rapidjson::Value null_value;
    if (v == vsn::v2) {
        if (!d.IsArray() || d.Size() != 5) {
            throw frame_error("expected [join_ref, ref, topic, event, payload]");
        }
        m.join_ref = ref_of(d[0], "join_ref", l.max_ref);
        m.ref = ref_of(d[1], "ref", l.max_ref);
        m.topic = text_of(d[2], "topic", l.max_topic);
        m.event = text_of(d[3], "event", l.max_event);
        take_payload(m, d[4]);
    } else {
        if (!d.IsObject()) throw frame_error("expected an object {topic, event, payload, ref}");
        auto field = [&](const char* k) -> const rapidjson::Value& {
            auto it = d.FindMember(k);
            return it == d.MemberEnd() ? null_value : it->value;
        };
        m.join_ref = ref_of(field("join_ref"), "join_ref", l.max_ref);
        m.ref = ref_of(field("ref"), "ref", l.max_ref);
        m.topic = text_of(field("topic"), "topic", l.max_topic);
        m.event = text_of(field("event"), "event", l.max_event);
        auto it = d.FindMember("payload");
        if (it == d.MemberEnd()) {
            m.payload.SetObject();
        } else {
            take_payload(m, it->value);
        }
    }
    return m;
}

std::string serialize(const outgoing& m, vsn v) {
    json::writer j;
    auto ref = [&](const std::optional<std::string_view>& r) {
        if (r) {
            j.str(*r);
        } else {
            j.w.Null();
        }
    };
    if (v == vsn::v2) {
        j.w.StartArray();
        ref(m.join_ref);
        ref(m.ref);
        j.str(m.topic);
        j.str(m.event);
        j.raw(m.payload_json);
        j.w.EndArray();
    } else {
        j.w.StartObject();
        j.key("join_ref");
        ref(m.join_ref);
        j.key("ref");
        ref(m.ref);
        j.kv("topic", m.topic);
        j.kv("event", m.event);
        j.key("payload");
        j.raw(m.payload_json);
        j.w.EndObject();
    }
    return j.str();
}

std::string reply_payload(std::string_view status, std::string_view response_json) {
    json::writer j;
    j.w.StartObject();
    j.kv("status", status);
    j.key("response");
    j.raw(response_json);
    j.w.EndObject();
    return j.str();
}

}  // namespace awp::realtime::phoenix
