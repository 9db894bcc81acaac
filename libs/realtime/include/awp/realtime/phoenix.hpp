// The Phoenix channel frames realtime-js speaks on /realtime/v1/websocket: vsn 1.0.0 (a JSON
// object {join_ref, ref, topic, event, payload}) and vsn 2.0.0 (a JSON array [join_ref, ref,
// topic, event, payload]). Parsing is bounded (bytes, nesting, field lengths) and fuzzed
// (fuzz/realtime_frame.cpp); nothing here knows sockets or channels.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "awp/core/error.hpp"

namespace awp::realtime::phoenix {

enum class vsn { v1, v2 };

/// The `vsn` query parameter: "1.0.0" or "2.0.0" (absent = 1.0.0, as Phoenix decides);
/// nullopt for anything else.
[[nodiscard]] std::optional<vsn> parse_vsn(std::optional<std::string_view> text);

struct limits {
    std::size_t max_bytes = 64 * 1024;  ///< a whole frame
    unsigned max_depth = 16;            ///< payload nesting
    std::size_t max_topic = 255;        ///< realtime-js refuses longer topics itself
    std::size_t max_event = 64;
    std::size_t max_ref = 64;
};

/// A frame the peer sent that is not a Phoenix message. what() says why, never repeats it.
class frame_error : public core::error {
public:
    using core::error::error;
};

/// One message from the client.
struct message {
    std::optional<std::string> join_ref;  ///< null/absent = none
    std::optional<std::string> ref;
    std::string topic;
    std::string event;
    rapidjson::Document payload;  ///< always an object ({} when the client sent null)
};

/// Parses a text frame. Refs may be strings or integers (Phoenix sends strings; a number is
/// taken as its decimal text). Throws frame_error.
[[nodiscard]] message parse(std::string_view text, vsn v, const limits& l = {});

/// A message to the client; `payload_json` is already serialised JSON (an object).
struct outgoing {
    std::optional<std::string_view> join_ref;
    std::optional<std::string_view> ref;
    std::string_view topic;
    std::string_view event;
    std::string_view payload_json;
};

/// The frame's text in the socket's vsn.
[[nodiscard]] std::string serialize(const outgoing& m, vsn v);

/// A phx_reply's payload: {"status": status, "response": response_json}.
[[nodiscard]] std::string reply_payload(std::string_view status, std::string_view response_json);

}  // namespace awp::realtime::phoenix
