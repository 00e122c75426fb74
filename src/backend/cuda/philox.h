// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3" (SC 2011), as in Random123 and cuRAND: 10 rounds over a 128-bit counter with a
// 64-bit key. Header-only and usable from host and device code (QS_HD), so the device sampler and
// the CPU tests (known-answer vectors of Random123's kat_vectors) run the same arithmetic.
//
// The CUDA sampler names a row's draw by (seed, draws): key = seed, counter = (draws, 0), and
// turns the first two 32-bit outputs into a double in [0, 1) with 53 random bits.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define QS_HD __host__ __device__ __forceinline__
#else
#define QS_HD inline
#endif

namespace qs::philox {

struct Block {
  uint32_t v[4];
};

QS_HD uint32_t mulhi32(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

/// Philox4x32 with 10 rounds: counter (c0..c3), key (k0, k1).
QS_HD Block philox4x32_10(Block ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = mulhi32(kM0, ctr.v[0]), lo0 = kM0 * ctr.v[0];
    const uint32_t hi1 = mulhi32(kM1, ctr.v[2]), lo1 = kM1 * ctr.v[2];
    ctr = Block{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

/// The uniform double in [0, 1) of draw number `draw` of the stream named by `seed`.
QS_HD double uniform(uint64_t seed, uint64_t draw) {
  const Block out = philox4x32_10(
      Block{{static_cast<uint32_t>(draw), static_cast<uint32_t>(draw >> 32), 0u, 0u}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(out.v[0]) << 21) ^ (out.v[1] >> 11);  // 53 bits
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace qs::philox
