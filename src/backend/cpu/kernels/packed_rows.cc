#include "backend/cpu/kernels/packed_rows.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "core/error.h"
#include "formats/blocks.h"

namespace qs::kernels {

namespace {

// 4-bit level of element e (0..255) of a Q4_K block (see BlockQ4_K).
inline uint8_t q4_k_level(const BlockQ4_K& x, int e) {
  const int c = e / 64, l = e % 64;
  return l < 32 ? x.qs[32 * c + l] & 0x0F : x.qs[32 * c + l - 32] >> 4;
}

// 6-bit level (0..63) of element e of a Q6_K block (see BlockQ6_K).
inline uint8_t q6_k_level(const BlockQ6_K& x, int e) {
  const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
  const uint8_t* ql = x.ql + 64 * h;
  const uint8_t* qh = x.qh + 32 * h;
  const uint8_t low = (quarter & 1) ? ql[l + 32] : ql[l];
  const uint8_t nibble = quarter < 2 ? low & 0x0F : low >> 4;
  return static_cast<uint8_t>(nibble | ((qh[l] >> (2 * quarter)) & 3) << 4);
}

// The 12 scale bytes of a Q4_K block from its 6-bit scales and mins (the inverse of
// unpack_scale_min_k4).
void pack_scales_mins_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t s[12]) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | (m[j + 4] & 0x0F) << 4);
  }
}

void pack_q4_k(const BlockQ4_K* const rows[16], int64_t b, PackedQ4K16& o) {
  for (int r = 0; r < 16; ++r) {
    const BlockQ4_K& x = rows[r][b];
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) unpack_scale_min_k4(j, x.scales, &sc[j], &m[j]);
    for (int j = 0; j < 8; ++j) {
      o.sc[j][r] = sc[j];
      o.m[j / 2][r][j % 2] = m[j];
      for (int v = 0; v < 4; ++v) {
        for (int i = 0; i < 4; ++i) {
          const int e = 32 * j + 4 * v + i;
          o.qs[j][v][4 * r + i] = static_cast<uint8_t>(q4_k_level(x, e) | q4_k_level(x, e + 16) << 4);
        }
      }
    }
    o.d[r] = x.d;
    o.dmin[r] = x.dmin;
  }
}

void pack_q6_k(const BlockQ6_K* const rows[16], int64_t b, PackedQ6K16& o) {
  for (int r = 0; r < 16; ++r) {
    const BlockQ6_K& x = rows[r][b];
    uint8_t q[256];
    for (int e = 0; e < 256; ++e) q[e] = q6_k_level(x, e);
    for (int k = 0; k < 16; ++k) {
      o.sc[k][r] = x.scales[k];
      for (int i = 0; i < 4; ++i) {
        for (int p = 0; p < 2; ++p) {
          const int e = 16 * k + 4 * p + i;
          o.ql[k][p][4 * r + i] = static_cast<uint8_t>((q[e] & 0x0F) | (q[e + 8] & 0x0F) << 4);
        }
        uint8_t h = 0;
        for (int v = 0; v < 4; ++v) h = static_cast<uint8_t>(h | (q[16 * k + 4 * v + i] >> 4) << (2 * v));
        o.qh[k][4 * r + i] = h;
      }
    }
    o.d[r] = x.d;
  }
}

void pack_q8_0(const BlockQ8_0* const rows[16], int64_t b, PackedQ8016& o) {
  for (int r = 0; r < 16; ++r) {
    const BlockQ8_0& x = rows[r][b];
    for (int v = 0; v < 8; ++v) {
      for (int i = 0; i < 4; ++i) o.qs[v][4 * r + i] = static_cast<uint8_t>(x.qs[4 * v + i]) ^ 0x80u;
    }
    o.d[r] = x.d;
  }
}

template <typename Block, typename Packed, void (*kPack)(const Block* const[16], int64_t, Packed&)>
void pack_groups(const uint8_t* src, int64_t rows, int64_t cols, int64_t group_begin, int64_t group_end,
                 int64_t block_elems, uint8_t* dst) {
  const int64_t nb = cols / block_elems;
  const size_t row_stride = static_cast<size_t>(nb) * sizeof(Block);
  for (int64_t g = group_begin; g < group_end; ++g) {
    const Block* r16[16];
    for (int r = 0; r < 16; ++r) {
      const int64_t row = std::min(rows - 1, g * 16 + r);
      r16[r] = reinterpret_cast<const Block*>(src + static_cast<size_t>(row) * row_stride);
    }
    auto* out = reinterpret_cast<Packed*>(dst + static_cast<size_t>(g) * static_cast<size_t>(nb) * sizeof(Packed));
    for (int64_t b = 0; b < nb; ++b) kPack(r16, b, out[b]);
  }
}

}  // namespace

namespace {
std::atomic<bool> g_decode_prefetch{true};
}  // namespace

void set_packed_decode_prefetch(bool on) { g_decode_prefetch.store(on, std::memory_order_relaxed); }
bool packed_decode_prefetch() { return g_decode_prefetch.load(std::memory_order_relaxed); }

bool packable_dtype(DType dtype) { return dtype == DType::Q4_K || dtype == DType::Q6_K || dtype == DType::Q8_0; }

size_t packed_block_bytes(DType dtype) {
  switch (dtype) {
    case DType::Q4_K: return sizeof(PackedQ4K16);
    case DType::Q6_K: return sizeof(PackedQ6K16);
    case DType::Q8_0: return sizeof(PackedQ8016);
    default: throw Error("no 16-row packed layout for type " + std::string(dtype_name(dtype)));
  }
}

int64_t packed_block_elements(DType dtype) { return dtype == DType::Q8_0 ? kBlockQ8_0 : kBlockK; }

size_t packed_group_bytes(DType dtype, int64_t cols) {
  const size_t block = packed_block_bytes(dtype);  // throws for other types
  const int64_t elems = packed_block_elements(dtype);
  if (cols <= 0 || cols % elems != 0) {
    throw Error("packed layout: " + std::to_string(cols) + " columns is not a multiple of " + std::to_string(elems));
  }
  return block * static_cast<size_t>(cols / elems);
}

size_t packed_matrix_bytes(DType dtype, int64_t rows, int64_t cols) {
  if (rows <= 0) throw Error("packed layout: a matrix needs at least one row");
  return packed_group_bytes(dtype, cols) * static_cast<size_t>((rows + kPackedRows - 1) / kPackedRows);
}

void pack_rows16(DType dtype, const uint8_t* src, int64_t rows, int64_t cols, int64_t group_begin, int64_t group_end,
                 uint8_t* dst) {
  packed_group_bytes(dtype, cols);  // validates type and width
  switch (dtype) {
    case DType::Q4_K: pack_groups<BlockQ4_K, PackedQ4K16, pack_q4_k>(src, rows, cols, group_begin, group_end, kBlockK, dst); break;
    case DType::Q6_K: pack_groups<BlockQ6_K, PackedQ6K16, pack_q6_k>(src, rows, cols, group_begin, group_end, kBlockK, dst); break;
    default: pack_groups<BlockQ8_0, PackedQ8016, pack_q8_0>(src, rows, cols, group_begin, group_end, kBlockQ8_0, dst); break;
  }
}

void prepare_packed_activations(DType dtype, const void* act, int64_t n, int32_t* extra) {
  if (dtype == DType::Q8_0) {
    const auto* a = static_cast<const BlockQ8_0A*>(act);
    for (int64_t b = 0; b < n / kBlockQ8_0; ++b) {
      int32_t sum = 0;
      for (int i = 0; i < kBlockQ8_0; ++i) sum += a[b].qs[i];
      extra[b] = -128 * sum;
    }
    return;
  }
  const auto* a = static_cast<const BlockQ8_K*>(act);
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    int32_t* e = extra + kPackedExtraPer256 * b;
    if (dtype == DType::Q6_K) {
      for (int k = 0; k < 16; ++k) e[k] = -32 * a[b].bsums[k];
    } else {
      for (int k = 0; k < 4; ++k) {
        const int32_t s0 = a[b].bsums[4 * k] + a[b].bsums[4 * k + 1];      // sub-block 2k (|s| <= 4064)
        const int32_t s1 = a[b].bsums[4 * k + 2] + a[b].bsums[4 * k + 3];  // sub-block 2k + 1
        e[k] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(s0)) |
                                    static_cast<uint32_t>(static_cast<uint16_t>(s1)) << 16);
      }
      for (int k = 4; k < 16; ++k) e[k] = 0;
    }
  }
}

void unpack_row16(DType dtype, const uint8_t* packed, int64_t cols, int64_t r, uint8_t* out) {
  const size_t group = packed_group_bytes(dtype, cols);
  const uint8_t* g = packed + static_cast<size_t>(r / kPackedRows) * group;
  const int lane = static_cast<int>(r % kPackedRows);
  const int64_t nb = cols / packed_block_elements(dtype);
  for (int64_t b = 0; b < nb; ++b) {
    if (dtype == DType::Q4_K) {
      const auto& p = reinterpret_cast<const PackedQ4K16*>(g)[b];
      BlockQ4_K& x = reinterpret_cast<BlockQ4_K*>(out)[b];
      uint8_t sc[8], m[8];
      for (int j = 0; j < 8; ++j) {
        sc[j] = p.sc[j][lane];
        m[j] = p.m[j / 2][lane][j % 2];
      }
      pack_scales_mins_k4(sc, m, x.scales);
      uint8_t q[256];
      for (int j = 0; j < 8; ++j) {
        for (int v = 0; v < 4; ++v) {
          for (int i = 0; i < 4; ++i) {
            const uint8_t byte = p.qs[j][v][4 * lane + i];
            q[32 * j + 4 * v + i] = byte & 0x0F;
            q[32 * j + 16 + 4 * v + i] = byte >> 4;
          }
        }
      }
      for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) x.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | q[64 * c + 32 + l] << 4);
      }
      x.d = p.d[lane];
      x.dmin = p.dmin[lane];
    } else if (dtype == DType::Q6_K) {
      const auto& p = reinterpret_cast<const PackedQ6K16*>(g)[b];
      BlockQ6_K& x = reinterpret_cast<BlockQ6_K*>(out)[b];
      uint8_t q[256];
      for (int k = 0; k < 16; ++k) {
        x.scales[k] = p.sc[k][lane];
        for (int i = 0; i < 4; ++i) {
          for (int p2 = 0; p2 < 2; ++p2) {
            const uint8_t byte = p.ql[k][p2][4 * lane + i];
            q[16 * k + 4 * p2 + i] = byte & 0x0F;
            q[16 * k + 8 + 4 * p2 + i] = byte >> 4;
          }
          for (int v = 0; v < 4; ++v) {
            q[16 * k + 4 * v + i] = static_cast<uint8_t>(q[16 * k + 4 * v + i] | ((p.qh[k][4 * lane + i] >> (2 * v)) & 3) << 4);
          }
        }
      }
      std::memset(x.ql, 0, sizeof x.ql);
      std::memset(x.qh, 0, sizeof x.qh);
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
        uint8_t* ql = x.ql + 64 * h + ((quarter & 1) ? 32 : 0);
        ql[l] = static_cast<uint8_t>(ql[l] | (q[e] & 0x0F) << (quarter < 2 ? 0 : 4));
        x.qh[32 * h + l] = static_cast<uint8_t>(x.qh[32 * h + l] | (q[e] >> 4) << (2 * quarter));
      }
      x.d = p.d[lane];
    } else {
      const auto& p = reinterpret_cast<const PackedQ8016*>(g)[b];
      BlockQ8_0& x = reinterpret_cast<BlockQ8_0*>(out)[b];
      for (int v = 0; v < 8; ++v) {
        for (int i = 0; i < 4; ++i) x.qs[4 * v + i] = static_cast<int8_t>(p.qs[v][4 * lane + i] ^ 0x80u);
      }
      x.d = p.d[lane];
    }
  }
}

}  // namespace qs::kernels
