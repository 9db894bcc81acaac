// One realtime websocket's state, shared by its session (realtime_socket.cpp: the Phoenix
// protocol), the fan-out (realtime_fanout.cpp) and the token sweep (realtime.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "awp/http/websocket.hpp"
#include "awp/realtime/binding.hpp"
#include "awp/realtime/phoenix.hpp"
#include "gateway.hpp"

namespace awp::api {

/// A token and whom it makes its bearer, as the data API took it. Shared: every socket of one
/// apikey (the anon key, typically) holds the same one, and a channel acting as the apikey holds
/// its socket's.
struct realtime_token {
    std::string token;  ///< re-checked by the sweep
    data_principal who;
};

/// A joined channel (its topic is the key it is kept under): its bindings and who it acts as
/// (the join's access_token, else the socket's apikey), refreshed by access_token messages.
struct realtime_channel {
    std::string join_ref;
    std::vector<realtime::binding> bindings;
    std::shared_ptr<const realtime_token> as;
};

struct realtime_socket {
    std::shared_ptr<http::websocket> ws;
    realtime::phoenix::vsn vsn = realtime::phoenix::vsn::v2;
    std::shared_ptr<const realtime_token> key;  ///< the apikey parameter's
    std::string address;                        ///< the client's, for the per-address cap
    std::string user;  ///< the user it counts against (the first channel's token's sub), or ""
    /// When the client last sent a Phoenix message (steady clock, ms): the heartbeat timeout.
    std::atomic<std::int64_t> last_message_ms{0};

    std::mutex mu;  // everything below: the session writes, the fan-out and the sweep read
    std::map<std::string, realtime_channel, std::less<>> channels;
    std::uint64_t next_id = 1;
    // Join rate: a token bucket.
    double join_tokens = 0;
    std::chrono::steady_clock::time_point join_refill{};

    /// Sends a message (serialised in the socket's vsn); false when the socket is closing.
    bool push(std::string_view join_ref, std::string_view ref, std::string_view topic,
              std::string_view event, std::string_view payload_json, bool has_join_ref = true,
              bool has_ref = true) const {
        realtime::phoenix::outgoing o;
        if (has_join_ref) o.join_ref = join_ref;
        if (has_ref) o.ref = ref;
        o.topic = topic;
        o.event = event;
        o.payload_json = payload_json;
        return ws->send(realtime::phoenix::serialize(o, vsn));
    }
};

/// Now on the steady clock in milliseconds (realtime_socket::last_message_ms).
inline std::int64_t realtime_now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace awp::api
