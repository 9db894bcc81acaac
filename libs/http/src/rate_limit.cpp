// Token buckets by key (rate_limit.hpp).
#include "awp/http/rate_limit.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>

#include "awp/core/error.hpp"
#include "awp/http/client_address.hpp"

namespace awp::http {

namespace {

std::string number(double v) {
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc{} ? std::string(buf, end) : std::to_string(v);
}

}  // namespace

rate_rule rate_rule::parse(std::string_view text, std::string_view what) {
    auto bad = [&] {
        return core::config_error(std::string(what) + ": '" + std::string(text) +
                                  "' is not a rate (N/s, N/min or N/h, optionally :burst; "
                                  "0 or off for none)");
    };
    if (text == "off" || text == "0") return {};
    const auto slash = text.find('/');
    if (slash == std::string_view::npos) throw bad();
    double n = 0;
    {
        const auto s = text.substr(0, slash);
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || !(n > 0) || n > 1e9) {
            throw bad();
        }
    }
    auto rest = text.substr(slash + 1);
    const auto colon = rest.find(':');
    const auto unit = rest.substr(0, colon);
    double seconds = 0;
    if (unit == "s") {
        seconds = 1;
    } else if (unit == "min") {
        seconds = 60;
    } else if (unit == "h") {
        seconds = 3600;
    } else {
        throw bad();
    }
    rate_rule r{n / seconds, n};
    if (colon != std::string_view::npos) {
        const auto b = rest.substr(colon + 1);
        const auto [end, ec] = std::from_chars(b.data(), b.data() + b.size(), r.burst);
        if (b.empty() || ec != std::errc{} || end != b.data() + b.size() || !(r.burst >= 1) ||
            r.burst > 1e9) {
            throw bad();
        }
    }
    if (r.burst < 1) r.burst = 1;
    return r;
}

std::string rate_rule::to_string() const {
    if (off()) return "off";
    double n = per_second;
    std::string unit = "s";
    if (per_second < 1) {
        n = per_second * 60;
        unit = "min";
        if (std::abs(n - std::round(n)) > 1e-9) {
            n = per_second * 3600;
            unit = "h";
        }
    }
    std::string out = number(std::round(n * 1e6) / 1e6) + "/" + unit;
    if (std::abs(burst - std::round(n * 1e6) / 1e6) > 1e-9) out += ":" + number(burst);
    return out;
}

std::string address_key(std::string_view address) {
    const auto a = parse_address(address);
    if (!a || a->is_v4()) return std::string(address);
    auto bytes = a->to_v6().to_bytes();
    std::fill(bytes.begin() + 8, bytes.end(), 0);
    return net::ip::address_v6(bytes).to_string() + "/64";
}

rate_limiter::rate_limiter(std::size_t max_keys)
    : per_shard_(std::max<std::size_t>(1, max_keys / kShards)) {}

std::size_t rate_limiter::shard_of(std::string_view key) const noexcept {
    return std::hash<std::string_view>{}(key) % kShards;
}

void rate_limiter::evict(shard& s, clock::time_point now) const {
    // How full each bucket is by now: a full one is the same as none, and dropping a nearly
    // full one gives its client little it would not have soon anyway. A drained bucket (a
    // client at its limit) is dropped last, so a flood of new keys cannot reset it.
    std::vector<std::pair<double, const std::string*>> by_fill;
    by_fill.reserve(s.buckets.size());
    for (const auto& [k, b] : s.buckets) {
        const double elapsed = std::chrono::duration<double>(now - b.at).count();
        by_fill.emplace_back(std::min(1.0, (b.tokens + elapsed * b.per_second) / b.burst), &k);
    }
    std::vector<std::string> gone;
    for (const auto& [fill, k] : by_fill) {
        if (fill >= 1.0) gone.push_back(*k);
    }
    if (gone.empty()) {
        // Every bucket is in use: the fullest eighth goes.
        const auto n = std::max<std::size_t>(1, by_fill.size() / 8);
        std::nth_element(by_fill.begin(), by_fill.begin() + static_cast<std::ptrdiff_t>(n - 1),
                         by_fill.end(),
                         [](const auto& x, const auto& y) { return x.first > y.first; });
        for (std::size_t i = 0; i < n; ++i) gone.push_back(*by_fill[i].second);
    }
    for (const auto& k : gone) s.buckets.erase(k);
}

std::optional<rate_limiter::refusal> rate_limiter::take(const std::vector<charge>& charges,
                                                        clock::time_point now) {
    std::array<bool, kShards> involved{};
    for (const auto& c : charges) {
        if (!c.rule.off()) involved[shard_of(c.key)] = true;
    }
    // Every shard involved, locked in index order (no two callers wait on each other).
    std::vector<std::unique_lock<std::mutex>> locks;
    for (std::size_t i = 0; i < kShards; ++i) {
        if (involved[i]) locks.emplace_back(shards_[i].mu);
    }
    // Room first, so no bucket found below is erased while the others are looked up.
    for (const auto& c : charges) {
        if (c.rule.off()) continue;
        auto& s = shards_[shard_of(c.key)];
        if (s.buckets.size() >= per_shard_ && !s.buckets.contains(c.key)) evict(s, now);
    }
    std::vector<bucket*> taken;
    double wait = 0;
    std::size_t longest = 0;
    for (std::size_t i = 0; i < charges.size(); ++i) {
        const auto& c = charges[i];
        if (c.rule.off()) continue;
        auto& s = shards_[shard_of(c.key)];
        auto [it, fresh] = s.buckets.try_emplace(c.key);
        bucket& b = it->second;
        if (fresh) {
            b.tokens = c.rule.burst;
        } else {
            const double elapsed = std::max(0.0, std::chrono::duration<double>(now - b.at).count());
            b.tokens = std::min(c.rule.burst, b.tokens + elapsed * c.rule.per_second);
        }
        b.at = now;
        b.burst = c.rule.burst;
        b.per_second = c.rule.per_second;
        if (b.tokens < 1 && (1 - b.tokens) / c.rule.per_second > wait) {
            wait = (1 - b.tokens) / c.rule.per_second;
            longest = i;
        }
        taken.push_back(&b);
    }
    if (wait > 0) return refusal{std::max<long>(1, static_cast<long>(std::ceil(wait))), longest};
    for (auto* b : taken) b->tokens -= 1;
    return std::nullopt;
}

std::size_t rate_limiter::size() const {
    std::size_t n = 0;
    for (const auto& s : shards_) {
        std::lock_guard lock(s.mu);
        n += s.buckets.size();
    }
    return n;
}

}  // namespace awp::http
