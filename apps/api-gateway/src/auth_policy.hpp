// The rules every /auth/v1 route applies to what a caller gives for a user (gotrue.cpp's sign-up
// and PUT /user, gotrue_admin.cpp's admin API): one password policy, one e-mail rule, one limit
// on the metadata that rides in every access token (docs/data-api.md, "Signing in").
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

namespace awp::api::auth_policy {

inline constexpr std::size_t kMinPassword = 8;         // the password policy
inline constexpr std::size_t kMaxPassword = 1024;      // as /api/auth/login
inline constexpr std::size_t kMaxEmail = 320;          //
inline constexpr std::size_t kMaxMetadata = 8 * 1024;  // user_metadata rides in every token

/// ASCII lower case (e-mail addresses are kept and compared lower-cased).
inline std::string lower(std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
}

/// GoTrue's weak_password message for the policy above.
inline std::string weak_password_message() {
    return "Password should be at least " + std::to_string(kMinPassword) + " characters.";
}

/// The rule of app_users' CHECK: something@something, no whitespace or control character, one
/// @ only, at most kMaxEmail bytes.
inline bool plausible_email(std::string_view e) {
    const auto at = e.find('@');
    if (e.empty() || e.size() > kMaxEmail || at == 0 || at == std::string_view::npos ||
        at + 1 >= e.size()) {
        return false;
    }
    if (e.find('@', at + 1) != std::string_view::npos) return false;
    return std::none_of(e.begin(), e.end(), [](char c) {
        return std::isspace(static_cast<unsigned char>(c)) != 0 ||
               static_cast<unsigned char>(c) < 0x20;
    });
}

}  // namespace awp::api::auth_policy
