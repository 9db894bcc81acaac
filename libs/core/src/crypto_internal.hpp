// What crypto.cpp and crypto_jwt.cpp share: OpenSSL's and libjwt's views of a byte string.
#pragma once

#include <string>
#include <string_view>

namespace awp::core::crypto::detail {

inline const unsigned char* bytes(std::string_view s) noexcept {
    return reinterpret_cast<const unsigned char*>(s.data());
}
inline unsigned char* bytes(std::string& s) noexcept {
    return reinterpret_cast<unsigned char*>(s.data());
}

}  // namespace awp::core::crypto::detail
