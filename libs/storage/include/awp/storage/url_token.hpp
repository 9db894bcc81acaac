// Signed URL tokens (docs/storage.md, "Signed URLs"): an HS256 token bound to one object
// ("bucket/name"), one scope (a download or an upload) and an expiry, signed with a key of its
// own derived from JWT_SECRET, so a URL token is never an access token and no access token is a
// URL token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "awp/core/error.hpp"

namespace awp::storage {

inline constexpr std::string_view kScopeDownload = "download";
inline constexpr std::string_view kScopeUpload = "upload";

/// The key URL tokens are signed with: HKDF-SHA256(ikm = JWT_SECRET, salt =
/// "awp-storage-url-v1", info = "hs256", 32 bytes).
[[nodiscard]] std::string url_signing_key(std::string_view jwt_secret);

struct url_claims {
    std::string scope;  ///< kScopeDownload or kScopeUpload
    std::string url;    ///< "bucket/name" (the decoded name)
    long long exp = 0;  ///< seconds since the epoch
    // Upload tokens: what the signer was allowed, carried to the upload.
    bool upsert = false;
    std::string owner;   ///< the signer's user ("" = none)
    std::string tenant;  ///< the signer's tenant ("" = none)
};

/// Why a token was refused; message() is the platform's wording.
class url_token_error : public core::error {
public:
    enum class kind { invalid, expired, wrong_scope, wrong_object };
    url_token_error(kind k, const std::string& message) : core::error(message), kind_(k) {}
    [[nodiscard]] kind what_kind() const noexcept { return kind_; }

private:
    kind kind_;
};

/// A token for `c` (its exp is the expiry), signed with `key`.
[[nodiscard]] std::string sign_url_token(const url_claims& c, std::string_view key);

/// The claims of `token` when it verifies under `key`, has not expired, is of `scope` and names
/// exactly `url`; throws url_token_error otherwise.
[[nodiscard]] url_claims verify_url_token(std::string_view token, std::string_view key,
                                          std::string_view scope, std::string_view url);

}  // namespace awp::storage
