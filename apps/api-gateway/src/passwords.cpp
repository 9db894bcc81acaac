// Passwords of both faces' sign-ins: Argon2id (libsodium) on the gateway's cpu pool, and the
// failed-login limits (login_limiter, docs/security.md, "Signing in") that /api/auth/login,
// /auth/v1's password grant and a password change's current_password share.
#include <sodium.h>

#include <algorithm>
#include <limits>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "gateway.hpp"
#include "users.hpp"

namespace awp::api {

namespace {
constexpr std::chrono::hours kKnownFor{24 * 30};  // an address that signed in stays known
}  // namespace

void login_limiter::prune(clock::time_point now) {
    if (entries_.size() > 100'000) {  // bound memory under a spray of addresses
        std::erase_if(entries_, [&](const auto& kv) {
            return kv.second.inflight == 0 && now - kv.second.first > window_;
        });
    }
    if (known_.size() > 100'000) {
        std::erase_if(known_, [&](const auto& kv) { return now - kv.second > kKnownFor; });
        while (known_.size() > 100'000) known_.erase(known_.begin());
    }
}

long login_limiter::begin(const std::string& account, const std::string& address) {
    const auto now = clock::now();
    std::lock_guard lock(mu_);
    prune(now);
    const auto pair_key = "p:" + account + "\n" + address;
    const bool known = [&] {
        auto it = known_.find(account + "\n" + address);
        return it != known_.end() && now - it->second < kKnownFor;
    }();
    struct check {
        std::string key;
        int limit;
    };
    // The account counter always counts; it does not stop an address the account knows.
    const check checks[] = {{pair_key, max_},
                            {"a:" + address, 4 * max_},
                            {"u:" + account, known ? std::numeric_limits<int>::max() : 10 * max_}};
    long wait = 0;
    for (const auto& c : checks) {
        auto it = entries_.find(c.key);
        if (it == entries_.end()) continue;
        auto& e = it->second;
        if (now - e.first > window_) {  // a new window
            e.count = 0;
            e.first = now;
        }
        if (e.count + e.inflight >= c.limit) {
            const auto left =
                std::chrono::duration_cast<std::chrono::seconds>(e.first + window_ - now);
            wait = std::max(wait, std::max<long>(1, static_cast<long>(left.count()) + 1));
        }
    }
    if (wait > 0) return wait;
    for (const auto& c : checks) {
        auto& e = entries_[c.key];
        if (e.count == 0 && e.inflight == 0) e.first = now;
        ++e.inflight;
    }
    return 0;
}

void login_limiter::end(const std::string& account, const std::string& address, bool success) {
    const auto now = clock::now();
    std::lock_guard lock(mu_);
    for (const auto& key : {"p:" + account + "\n" + address, "a:" + address, "u:" + account}) {
        auto it = entries_.find(key);
        if (it == entries_.end()) continue;
        auto& e = it->second;
        if (e.inflight > 0) --e.inflight;
        if (success) {  // the address keeps its count: a spray may include one good guess
            if (key[0] != 'a') e.count = 0;
            if (key[0] != 'a' && e.inflight == 0) entries_.erase(it);
            continue;
        }
        if (now - e.first > window_) {
            e.count = 0;
            e.first = now;
        }
        ++e.count;
    }
    if (success) known_[account + "\n" + address] = now;
}

namespace {

net::awaitable<bool> verify_on_pool(std::string hash, std::string password) {
    co_return crypto_pwhash_str_verify(hash.c_str(), password.c_str(), password.size()) == 0;
}

// "" when libsodium cannot (out of memory): failures cross co_spawn as values.
net::awaitable<std::string> hash_on_pool(std::string password) {
    char buf[crypto_pwhash_STRBYTES];
    if (crypto_pwhash_str(buf, password.c_str(), password.size(),
                          crypto_pwhash_OPSLIMIT_INTERACTIVE,
                          crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
        co_return std::string();
    }
    co_return std::string(buf);
}

}  // namespace

net::awaitable<bool> gateway::verify_password(std::string hash, std::string password) {
    co_return co_await net::co_spawn(cpu_, verify_on_pool(std::move(hash), std::move(password)),
                                     net::use_awaitable);
}

net::awaitable<std::string> gateway::hash_password(std::string password) {
    auto hash = co_await net::co_spawn(cpu_, hash_on_pool(std::move(password)), net::use_awaitable);
    if (hash.empty()) throw core::error("out of memory hashing a password");
    co_return hash;
}

net::awaitable<sign_in_result> gateway::sign_in(principal p, std::string account,
                                                std::string password, std::string remote) {
    sign_in_result out;
    if (auto wait = limiter_.begin(account, remote); wait > 0) {
        out.retry_after = wait;
        co_return out;
    }
    // Every path out of here ends the reserved attempt: a failure unless marked otherwise.
    struct attempt {
        login_limiter& l;
        const std::string& account;
        const std::string& address;
        bool ok = false;
        ~attempt() { l.end(account, address, ok); }
    } guard{limiter_, account, remote};
    const auto sql = std::string("SELECT ") + kAppUserColumns +
                     ", u.password_hash FROM public.app_users u WHERE lower(u.email) = $1";
    auto t = co_await db_->begin(std::move(p));
    auto row = co_await t.query_and_commit(sql, account);
    const bool found = !row.empty();
    const std::string hash = found ? row.get<std::string>(0, "password_hash") : dummy_hash_;
    const bool ok = co_await verify_password(hash, password);
    if (found && ok) {
        out.verified = true;
        out.user = app_user_at(row, 0);
        guard.ok = !out.user.disabled;
    }
    co_return out;
}

}  // namespace awp::api
