// Element-wise kernels of the encoder, written so GCC vectorises them (no libm calls in loops).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace awp::embed::detail {

/// exp(x) for x in the float range: Cody-Waite reduction and Cephes' expf polynomial
/// (relative error about 1e-7). std::exp in these loops would cost more than the GEMMs around them.
inline float fast_exp(float x) {
    x = x < -87.0F ? -87.0F : (x > 88.0F ? 88.0F : x);
    constexpr float kMagic = 12582912.0F;  // 1.5 * 2^23: adding it rounds to an integer
    const float shifted = x * 1.44269504088896341F + kMagic;
    const float n = shifted - kMagic;
    const float r = x - n * 0.693359375F + n * 2.12194440e-4F;
    float p = 1.9875691500E-4F;
    p = p * r + 1.3981999507E-3F;
    p = p * r + 8.3334519073E-3F;
    p = p * r + 4.1665795894E-2F;
    p = p * r + 1.6666665459E-1F;
    p = p * r + 5.0000001201E-1F;
    const float y = p * r * r + r + 1.0F;
    const auto exponent = static_cast<std::uint32_t>(std::bit_cast<std::int32_t>(shifted) -
                                                     std::bit_cast<std::int32_t>(kMagic) + 127);
    return y * std::bit_cast<float>(exponent << 23U);
}

/// erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
inline float fast_erf(float x) {
    const float a = std::fabs(x);
    const float t = 1.0F / (1.0F + 0.3275911F * a);
    const float poly =
        t * (0.254829592F +
             t * (-0.284496736F + t * (1.421413741F + t * (-1.453152027F + t * 1.061405429F))));
    const float e = 1.0F - poly * fast_exp(-a * a);
    return std::copysign(e, x);
}

/// BERT's GELU: x * Phi(x) with the exact erf (Hugging Face "gelu", torch's default).
inline float gelu(float x) { return 0.5F * x * (1.0F + fast_erf(x * 0.70710678118654752F)); }

}  // namespace awp::embed::detail
