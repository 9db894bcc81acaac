// The Phoenix side of /realtime/v1/websocket (realtime.hpp): the upgrade (apikey, vsn), then one
// coroutine per socket reading frames: heartbeat, phx_join with postgres_changes bindings
// checked against the schema cache, access_token refreshes, phx_leave; broadcast and presence
// answered "not supported"; limits on channels, bindings and the join rate.
#include <algorithm>
#include <set>
#include <utility>

#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/rest/error.hpp"
#include "realtime.hpp"
#include "realtime_socket.hpp"

namespace awp::api {

namespace json = core::json;
namespace phx = realtime::phoenix;

namespace {

constexpr std::string_view kTopicPrefix = "realtime:";

std::string reason_json(std::string_view reason) {
    json::writer j;
    j.w.StartObject();
    j.kv("reason", reason);
    j.w.EndObject();
    return j.str();
}

std::string system_json(std::string_view extension, std::string_view status,
                        std::string_view message, std::string_view channel) {
    json::writer j;
    j.w.StartObject();
    j.kv("message", message);
    j.kv("status", status);
    j.kv("extension", extension);
    j.kv("channel", channel);
    j.w.EndObject();
    return j.str();
}

/// The caller of a token exactly as the data API decides it (auth.cpp); throws rest::api_error.
data_principal principal_of(const gateway& g, const std::string& token) {
    request r;
    r.header.set("authorization", "Bearer " + token);
    return g.data_api_principal(r);
}

const rapidjson::Value* object_member(const rapidjson::Value& o, const char* k) {
    if (!o.IsObject()) return nullptr;
    auto it = o.FindMember(k);
    return it == o.MemberEnd() ? nullptr : &it->value;
}

/// A join refused: the reason realtime-js shows (Object.values(response).join(', ')).
class join_refused : public core::error {
public:
    using core::error::error;
};

/// The token a channel acts as: one of the socket's channels' when it has the same (a UI joins
/// several channels with one session), else a new one.
std::shared_ptr<const realtime_token> channel_token(realtime_socket& s, std::string token,
                                                    data_principal who) {
    {
        std::lock_guard lock(s.mu);
        for (const auto& [topic, ch] : s.channels) {
            if (ch.as && ch.as->token == token) return ch.as;
        }
    }
    return std::make_shared<const realtime_token>(realtime_token{std::move(token), std::move(who)});
}

}  // namespace

std::shared_ptr<const realtime_token> realtime_hub::apikey_token(const std::string& apikey,
                                                                 const data_principal& who) {
    std::lock_guard lock(mu_);
    if (auto it = apikeys_.find(apikey); it != apikeys_.end()) return it->second;
    if (apikeys_.size() >= 16) apikeys_.clear();  // a few keys are shared; others come and go
    auto t = std::make_shared<const realtime_token>(realtime_token{apikey, who});
    apikeys_.emplace(apikey, t);
    return t;
}

http::websocket_options realtime_hub::socket_options() const {
    http::websocket_options o;
    o.message_limit = cfg_.message_limit;
    o.queue_limit = cfg_.queue_limit;
    o.idle_timeout = std::chrono::milliseconds(static_cast<long>(cfg_.idle_timeout_s * 1000));
    return o;
}

http::websocket_handler realtime_hub::handler() {
    return [this](request r) -> net::awaitable<http::websocket_accept> {
        http::websocket_accept a;
        const auto vsn_param = r.query_param("vsn");
        const auto v =
            phx::parse_vsn(vsn_param ? std::optional<std::string_view>(*vsn_param) : std::nullopt);
        if (!v) {
            a.refusal = response::error(400, "bad_vsn", "vsn must be 1.0.0 or 2.0.0");
            co_return a;
        }
        std::string apikey = r.query_param("apikey").value_or("");
        if (apikey.empty()) apikey = std::string(r.header.get("apikey").value_or(""));
        if (apikey.empty()) {
            a.refusal =
                response::error(401, "unauthenticated", "an apikey query parameter is required");
            co_return a;
        }
        auto s = std::make_shared<realtime_socket>();
        s->vsn = *v;
        try {
            s->key = apikey_token(apikey, principal_of(g_, apikey));
        } catch (const rest::api_error& e) {
            a.refusal = response::error(401, "unauthenticated", e.message());
            co_return a;
        }
        s->address = r.remote;
        {
            std::lock_guard lock(mu_);
            if (sockets_.size() >= cfg_.max_sockets) {
                a.refusal = response::error(503, "too_many_sockets",
                                            "this server holds as many realtime sockets as it may");
                a.refusal->header.set("Retry-After", "5");
                co_return a;
            }
            // One client does not take the process's sockets: a cap per address (a NAT's
            // users share one, hence a generous default).
            if (auto it = per_address_.find(s->address);
                cfg_.max_sockets_per_address > 0 && it != per_address_.end() &&
                it->second >= cfg_.max_sockets_per_address) {
                a.refusal =
                    response::error(429, "too_many_sockets",
                                    "this address holds as many realtime sockets as it may (" +
                                        std::to_string(cfg_.max_sockets_per_address) + ")");
                a.refusal->header.set("Retry-After", "5");
                co_return a;
            }
        }
        s->join_tokens = cfg_.joins_per_second * 2;
        s->join_refill = std::chrono::steady_clock::now();
        a.session = [this, s](std::shared_ptr<http::websocket> ws) {
            return session(std::move(ws), s);
        };
        co_return a;
    };
}

net::awaitable<void> realtime_hub::session(std::shared_ptr<http::websocket> ws,
                                           std::shared_ptr<realtime_socket> s) {
    s->ws = ws;
    s->last_message_ms = realtime_now_ms();
    add(s);
    struct leave_guard {
        realtime_hub* hub;
        std::shared_ptr<realtime_socket> s;
        ~leave_guard() { hub->remove(s); }
    } guard{this, s};

    auto reply = [&](const phx::message& m, std::string_view status, std::string_view response) {
        s->push(m.join_ref.value_or(""), m.ref.value_or(""), m.topic, "phx_reply",
                phx::reply_payload(status, response), m.join_ref.has_value(), m.ref.has_value());
    };

    // The bindings of a join, checked against the exposed schemas and their tables.
    auto check_bindings = [&](const std::vector<realtime::binding>& bs,
                              const rest::schema_cache& cache) {
        for (const auto& b : bs) {
            if (b.schema != "*" && std::find(cache.schemas.begin(), cache.schemas.end(),
                                             b.schema) == cache.schemas.end()) {
                throw join_refused("schema " + b.schema + " is not exposed (API_REST_SCHEMAS)");
            }
            if (b.schema == "*" || b.any_table()) {
                if (!b.filters.empty()) throw join_refused("a filter needs a schema and a table");
                continue;
            }
            auto it = cache.tables.find(rest::qualified_name{b.schema, *b.table});
            if (it == cache.tables.end() || it->second.is_view()) {
                throw join_refused("no table " + b.schema + "." + *b.table);
            }
            for (const auto& f : b.filters) {
                if (!it->second.find(f.column)) {
                    throw join_refused("no column " + f.column + " in " + b.schema + "." +
                                       *b.table);
                }
            }
        }
    };

    auto join = [&](phx::message& m) -> net::awaitable<void> {
        {
            std::lock_guard lock(s->mu);
            const auto now = std::chrono::steady_clock::now();
            const double elapsed = std::chrono::duration<double>(now - s->join_refill).count();
            s->join_refill = now;
            s->join_tokens = std::min(cfg_.joins_per_second * 2,
                                      s->join_tokens + elapsed * cfg_.joins_per_second);
            if (s->join_tokens < 1) {
                throw join_refused("too many joins: at most " +
                                   std::to_string(static_cast<int>(cfg_.joins_per_second)) +
                                   " a second");
            }
            s->join_tokens -= 1;
            if (!s->channels.contains(m.topic) && s->channels.size() >= cfg_.max_channels) {
                throw join_refused("too many channels on this socket (at most " +
                                   std::to_string(cfg_.max_channels) + ")");
            }
        }
        if (!m.topic.starts_with(kTopicPrefix)) {
            throw join_refused("a topic starts with realtime:");
        }
        if (!m.join_ref) throw join_refused("a join needs a join_ref");
        realtime_channel ch;
        ch.join_ref = *m.join_ref;
        ch.as = s->key;
        if (const auto* t = object_member(m.payload, "access_token"); t && !t->IsNull()) {
            if (!t->IsString()) throw join_refused("access_token must be a string");
            std::string token(t->GetString(), t->GetStringLength());
            if (token != s->key->token) {
                try {
                    auto who = principal_of(g_, token);
                    ch.as = channel_token(*s, std::move(token), std::move(who));
                } catch (const rest::api_error& e) {
                    throw join_refused(e.message());
                }
            }
        }
        // One user does not take the process's sockets either.
        if (!ch.as->who.sub.empty() && !claim_user(s, ch.as->who.sub)) {
            throw join_refused("too many realtime sockets for this user (at most " +
                               std::to_string(cfg_.max_sockets_per_user) + ")");
        }
        // Joins per client address and per user, across sockets (limits.hpp).
        if (ch.as->who.role != "service_role") {
            if (auto no = g_.rates().take(rate_surface::join, s->ws->remote(), ch.as->who.sub)) {
                throw join_refused("too many joins: " + no->message);
            }
        }
        const auto* config = object_member(m.payload, "config");
        bool presence = false;
        if (config && config->IsObject()) {
            if (const auto* p = object_member(*config, "private"); p && p->IsTrue()) {
                throw join_refused(
                    "private channels (Realtime Authorization) are not supported by this server");
            }
            if (const auto* p = object_member(*config, "presence")) {
                if (const auto* e = object_member(*p, "enabled"); e && e->IsTrue()) presence = true;
            }
            if (const auto* pc = object_member(*config, "postgres_changes"); pc && !pc->IsNull()) {
                if (!pc->IsArray()) throw join_refused("postgres_changes must be an array");
                if (pc->Size() > cfg_.max_bindings) {
                    throw join_refused("too many postgres_changes bindings (at most " +
                                       std::to_string(cfg_.max_bindings) + ")");
                }
                for (const auto& v : pc->GetArray()) {
                    try {
                        ch.bindings.push_back(realtime::parse_binding(v));
                    } catch (const realtime::binding_error& e) {
                        throw join_refused(e.what());
                    }
                }
            }
        }
        if (!ch.bindings.empty()) {
            auto cache = co_await g_.schema_cache();
            check_bindings(ch.bindings, *cache);
            // A filter only on columns the role may select, as /rest/v1 refuses others (42501):
            // a filter is not an oracle for what the role may not read.
            std::set<realtime_policies::key> needs;
            for (const auto& b : ch.bindings) {
                if (!b.filters.empty()) {
                    needs.insert({rest::qualified_name{b.schema, *b.table}, ch.as->who.role});
                }
            }
            if (!needs.empty()) {
                auto snap = co_await policies_.prepare(needs, *cache);
                for (const auto& b : ch.bindings) {
                    if (b.filters.empty()) continue;
                    const auto* f =
                        snap->find(rest::qualified_name{b.schema, *b.table}, ch.as->who.role);
                    if (!f || !f->error.empty()) {
                        throw join_refused("the catalog could not be read; try again");
                    }
                    for (const auto& flt : b.filters) {
                        if (!f->columns.contains(flt.column)) {
                            throw join_refused("permission denied for column " + flt.column +
                                               " of table " + b.schema + "." + *b.table);
                        }
                    }
                }
            }
        }
        std::string response;
        {
            json::writer j;
            j.w.StartObject();
            j.key("postgres_changes");
            j.w.StartArray();
            std::lock_guard lock(s->mu);
            for (auto& b : ch.bindings) {
                b.id = s->next_id++;
                j.raw(b.reply_json());
            }
            j.w.EndArray();
            j.w.EndObject();
            response = j.str();
            const bool existed = s->channels.contains(m.topic);
            // A second join of a topic replaces the first (realtime-js rejoins after an error).
            s->channels[m.topic] = ch;
            if (!existed) ++channels;
        }
        reply(m, "ok", response);
        const auto sub = std::string_view(m.topic).substr(kTopicPrefix.size());
        if (!ch.bindings.empty()) {
            s->push(ch.join_ref, "", m.topic, "system",
                    system_json("postgres_changes", "ok", "Subscribed to PostgreSQL", sub), true,
                    false);
        }
        if (presence) {
            s->push(
                ch.join_ref, "", m.topic, "system",
                system_json("presence", "error", "presence is not supported by this server", sub),
                true, false);
        }
    };

    auto refresh = [&](const phx::message& m) {
        const auto* t = object_member(m.payload, "access_token");
        if (!t || !t->IsString()) {
            reply(m, "error", reason_json("access_token must be a string"));
            return;
        }
        std::string token(t->GetString(), t->GetStringLength());
        std::shared_ptr<const realtime_token> as;
        try {
            auto who = principal_of(g_, token);
            as = token == s->key->token ? s->key
                                        : channel_token(*s, std::move(token), std::move(who));
        } catch (const rest::api_error& e) {
            // As the platform: the channel is told why and closed.
            std::string join_ref;
            {
                std::lock_guard lock(s->mu);
                auto it = s->channels.find(m.topic);
                if (it == s->channels.end()) return;
                join_ref = it->second.join_ref;
                s->channels.erase(it);
                --channels;
            }
            const auto sub = std::string_view(m.topic).substr(kTopicPrefix.size());
            s->push(join_ref, "", m.topic, "system",
                    system_json("system", "error", e.message(), sub), true, false);
            s->push(join_ref, "", m.topic, "phx_close", "{}", true, false);
            return;
        }
        std::lock_guard lock(s->mu);
        auto it = s->channels.find(m.topic);
        if (it == s->channels.end()) return;
        it->second.as = std::move(as);
        // No reply: realtime-js pushes access_token without waiting for one.
    };

    phx::limits limits;
    limits.max_bytes = cfg_.message_limit;
    while (auto in = co_await ws->read()) {
        if (in->binary) {
            // vsn 2.0.0 sends user broadcasts as binary frames: not served here.
            continue;
        }
        phx::message m;
        try {
            m = phx::parse(in->data, s->vsn, limits);
        } catch (const phx::frame_error& e) {
            ws->close_now(http::close_code::bad_payload,
                          std::string("not a Phoenix message: ") + e.what());
            break;
        }
        s->last_message_ms = realtime_now_ms();
        if (m.topic == "phoenix") {
            if (m.event == "heartbeat") reply(m, "ok", "{}");
            continue;
        }
        if (m.event == "phx_join") {
            try {
                co_await join(m);
            } catch (const join_refused& e) {
                reply(m, "error", reason_json(e.what()));
            } catch (const rest::api_error& e) {
                reply(m, "error", reason_json(e.message()));
            } catch (const pg::connection_error&) {
                reply(m, "error", reason_json("the database is unreachable; try again"));
            } catch (const pg::sql_error&) {
                reply(m, "error", reason_json("the schema cache could not be read; try again"));
            }
            continue;
        }
        bool joined = false;
        {
            std::lock_guard lock(s->mu);
            joined = s->channels.contains(m.topic);
        }
        if (!joined) {
            reply(m, "error", reason_json("unmatched topic"));
            continue;
        }
        if (m.event == "phx_leave") {
            std::string join_ref;
            {
                std::lock_guard lock(s->mu);
                auto it = s->channels.find(m.topic);
                if (it != s->channels.end()) {
                    join_ref = it->second.join_ref;
                    s->channels.erase(it);
                    --channels;
                }
            }
            reply(m, "ok", "{}");
            s->push(join_ref, "", m.topic, "phx_close", "{}", true, false);
        } else if (m.event == "access_token") {
            refresh(m);
        } else if (m.event == "broadcast" || m.event == "presence") {
            if (m.ref) reply(m, "error", reason_json(m.event + " is not supported by this server"));
        } else {
            if (m.ref) reply(m, "error", reason_json("unknown event " + m.event));
        }
    }
}

}  // namespace awp::api
