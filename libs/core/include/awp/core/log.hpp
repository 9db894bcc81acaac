// Structured logs: one JSON object per line on stderr (ts, level, daemon, msg, then fields).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace awp::core::log {

enum class level { debug = 0, info = 1, warn = 2, error = 3 };

/// One field of a log line. Never put a secret in one: nothing here can tell.
struct field {
    using value_type =
        std::variant<std::nullptr_t, bool, std::int64_t, std::uint64_t, double, std::string_view>;
    std::string_view name;
    value_type value;

    field(std::string_view n, std::nullptr_t) : name(n), value(nullptr) {}
    field(std::string_view n, bool v) : name(n), value(v) {}
    field(std::string_view n, int v) : name(n), value(std::int64_t{v}) {}
    field(std::string_view n, long v) : name(n), value(std::int64_t{v}) {}
    field(std::string_view n, long long v) : name(n), value(std::int64_t{v}) {}
    field(std::string_view n, unsigned v) : name(n), value(std::uint64_t{v}) {}
    field(std::string_view n, unsigned long v) : name(n), value(std::uint64_t{v}) {}
    field(std::string_view n, unsigned long long v) : name(n), value(std::uint64_t{v}) {}
    field(std::string_view n, double v) : name(n), value(v) {}
    field(std::string_view n, std::string_view v) : name(n), value(v) {}
    field(std::string_view n, const std::string& v) : name(n), value(std::string_view{v}) {}
    field(std::string_view n, const char* v) : name(n), value(std::string_view{v}) {}
};

using fields = std::initializer_list<field>;

/// Sets the daemon name every line carries and the minimum level written. Call once at start.
void init(std::string_view daemon, level min_level = level::info);
void set_level(level min_level);
/// Parses "debug", "info", "warn", "error"; throws config_error otherwise.
level parse_level(std::string_view text);
bool enabled(level l);

/// Writes one line with a single write(2), so concurrent lines never interleave.
void write(level l, std::string_view msg, fields extra = {});

inline void debug(std::string_view msg, fields f = {}) { write(level::debug, msg, f); }
inline void info(std::string_view msg, fields f = {}) { write(level::info, msg, f); }
inline void warn(std::string_view msg, fields f = {}) { write(level::warn, msg, f); }
inline void error(std::string_view msg, fields f = {}) { write(level::error, msg, f); }

/// A connection string with its password replaced by "***" (URI and keyword forms).
std::string redact_dsn(std::string_view dsn);

}  // namespace awp::core::log
