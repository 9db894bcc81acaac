// JSON log lines on stderr, written whole with one write(2).
#include "awp/core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <regex>
#include <string>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/error.hpp"

namespace awp::core::log {
namespace {

std::string& daemon_name() {
    static std::string name = "awp";
    return name;
}
std::atomic<int> min_level{static_cast<int>(level::info)};

constexpr std::string_view level_name(level l) {
    switch (l) {
        case level::debug:
            return "debug";
        case level::info:
            return "info";
        case level::warn:
            return "warn";
        case level::error:
            return "error";
    }
    return "info";
}

void write_timestamp(rapidjson::Writer<rapidjson::StringBuffer>& w) {
    using namespace std::chrono;
    const auto now = system_clock::now();
    const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
    const std::time_t t = system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    char out[40];
    const int len = std::snprintf(out, sizeof out, "%.*s.%03dZ", static_cast<int>(n), buf,
                                  static_cast<int>(ms));
    w.String(out, static_cast<rapidjson::SizeType>(len));
}

}  // namespace

void init(std::string_view daemon, level l) {
    daemon_name() = std::string(daemon);
    set_level(l);
}

void set_level(level l) { min_level.store(static_cast<int>(l)); }

level parse_level(std::string_view text) {
    if (text == "debug") return level::debug;
    if (text == "info") return level::info;
    if (text == "warn" || text == "warning") return level::warn;
    if (text == "error") return level::error;
    throw config_error("log level must be debug, info, warn or error, not '" + std::string(text) +
                       "'");
}

bool enabled(level l) { return static_cast<int>(l) >= min_level.load(); }

void write(level l, std::string_view msg, fields extra) {
    if (!enabled(l)) return;
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    const auto str = [&w](std::string_view s) {
        w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
    };
    w.StartObject();
    w.Key("ts");
    write_timestamp(w);
    w.Key("level");
    str(level_name(l));
    w.Key("daemon");
    str(daemon_name());
    w.Key("msg");
    str(msg);
    for (const auto& f : extra) {
        str(f.name);
        std::visit(
            [&](const auto& v) {
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, std::nullptr_t>) {
                    w.Null();
                } else if constexpr (std::is_same_v<T, bool>) {
                    w.Bool(v);
                } else if constexpr (std::is_same_v<T, std::int64_t>) {
                    w.Int64(v);
                } else if constexpr (std::is_same_v<T, std::uint64_t>) {
                    w.Uint64(v);
                } else if constexpr (std::is_same_v<T, double>) {
                    w.Double(v);
                } else {
                    str(v);
                }
            },
            f.value);
    }
    w.EndObject();
    std::string line(buf.GetString(), buf.GetSize());
    line.push_back('\n');
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        const ssize_t n = ::write(STDERR_FILENO, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // stderr is gone: nothing better to do with a log line
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

std::string redact_dsn(std::string_view dsn) {
    // URI form: scheme://user:password@host...
    static const std::regex uri(R"(^([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@]*:)[^@]*@)");
    // Keyword form: password=secret or password='se cret'
    static const std::regex kw(R"((password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+))");
    std::string s(dsn);
    s = std::regex_replace(s, uri, "$1***@");
    s = std::regex_replace(s, kw, "$1***");
    return s;
}

}  // namespace awp::core::log
