// Request-rate limits: token buckets by key (a client address, a user), bounded in memory, one
// implementation for every route that limits a rate (the data API's /rest/v1 and /auth/v1, the
// realtime joins; docs/security.md, "Request rates").
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace awp::http {

/// A bucket's rule: `burst` requests at once, refilled at `per_second`. The rule of a bucket
/// that takes nothing (per_second 0) is "no limit".
struct rate_rule {
    double per_second = 0;
    double burst = 0;
    [[nodiscard]] bool off() const noexcept { return per_second <= 0; }
    /// "N/s", "N/min" or "N/h", optionally ":B" for a burst other than N ("100/s", "30/min:10");
    /// "0" or "off": no limit. Throws core::config_error naming `what`.
    static rate_rule parse(std::string_view text, std::string_view what);
    /// As parse() reads it ("100/s", "30/min:10", "off"), for --print-config and messages.
    [[nodiscard]] std::string to_string() const;
};

/// The key of a client address for a per-address limit: the address itself for IPv4, its /64
/// for IPv6 (one host, or one customer's network, holds a whole /64: counting its addresses one
/// by one would let a single client rotate through billions of buckets).
[[nodiscard]] std::string address_key(std::string_view address);

/// Token buckets by key. Thread-safe (sharded locks). Bounded: at most `max_keys` buckets. When
/// full, a bucket that has refilled to its burst (the same as none) is dropped first, then the
/// fullest ones: a drained bucket, a client at its limit, goes last, so a flood of new keys
/// does not reset it (and IPv6 is keyed by /64).
class rate_limiter {
public:
    using clock = std::chrono::steady_clock;
    explicit rate_limiter(std::size_t max_keys = 200'000);

    /// One request against several buckets at once (e.g. its address's and its user's): it is
    /// allowed only if every bucket holds a token, and then takes one from each; a refused
    /// request takes nothing. Buckets whose rule is off are skipped.
    struct charge {
        std::string key;
        rate_rule rule;
    };
    /// Why a request was refused: the whole seconds (>= 1) until every bucket would hold a
    /// token again (Retry-After), and which charge waits longest (its index).
    struct refusal {
        long retry_after = 1;
        std::size_t charge = 0;
    };
    /// nullopt when the request is allowed (and charged).
    [[nodiscard]] std::optional<refusal> take(const std::vector<charge>& charges,
                                              clock::time_point now = clock::now());

    /// Buckets held right now (tests, /api/health for operators).
    [[nodiscard]] std::size_t size() const;

private:
    struct bucket {
        double tokens = 0;
        clock::time_point at{};
        double burst = 0;
        double per_second = 0;
    };
    struct shard {
        mutable std::mutex mu;
        std::unordered_map<std::string, bucket> buckets;
    };
    static constexpr std::size_t kShards = 16;
    [[nodiscard]] std::size_t shard_of(std::string_view key) const noexcept;
    /// Makes room in a full shard (its lock held).
    void evict(shard& s, clock::time_point now) const;
    std::size_t per_shard_;
    std::array<shard, kShards> shards_;
};

}  // namespace awp::http
