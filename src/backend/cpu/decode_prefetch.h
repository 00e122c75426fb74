// Chooses, once at load, whether the packed matmul kernels issue software prefetches in one-token
// products (decode), by timing both on the model's own packed matrices.
//
// Why measured and not fixed: the same kernels stream a 4B model's one-token matmuls 1.17-1.19x
// faster WITHOUT software prefetch on an AMD EPYC Zen 4 VM (the hardware prefetchers keep up and
// the extra instructions only get in the way), while on the Intel machine the distances were tuned
// on they made decode 1.2-1.3x faster (kernels/packed_rows_avx512_vnni.cc), and on a Zen 5 VM
// (session 21) this measurement gave Q4_K_M 9.1 / 10.8 ms with against 12.7 / 19.3 ms without and
// Q8_0 within 5% either way. Calls of 2+ tokens prefetch on all of them, so only decode depends on
// this choice.
//
// QS_CPU_DECODE_PREFETCH=1 / =0 in the environment forces the choice and skips the measurement.
#pragma once

#include <string>

#include "backend/cpu/kernels/matmul.h"
#include "core/thread_pool.h"
#include "model/model_weights.h"

namespace qs {

struct DecodePrefetchChoice {
  bool prefetch = true;     // what was set with kernels::set_packed_decode_prefetch
  bool measured = false;    // false: forced by the environment, or too few packed bytes to measure
  double ms_with = 0;       // median wall time of one pass over the sampled matrices, ms
  double ms_without = 0;
  double sampled_mib = 0;   // packed weight bytes per pass, MiB
  std::string describe() const;  // e.g. "decode prefetch on (one-token matmuls over 519 MiB: 12.7 ms without, 9.1 ms with)"
};

/// Times one-token products (x: a constant vector) over the packed matrices of the first layers of
/// `weights` (model order, up to ~512 MiB per pass, so the weights stream from memory as in decode)
/// with and without the kernels' software prefetch, alternating, 1 warm-up + 5 timed passes each;
/// prefetch goes off only when its median is at least 5% slower (the default stays on where the
/// difference is noise). Sets kernels::set_packed_decode_prefetch and returns what it chose and
/// measured. Does nothing (keeps the current setting) when fewer than 256 MiB are packed: those
/// matrices stay partly in the last-level cache, unlike a large model's. `scratch` must hold one
/// token of the widest matrix. Throws what kernels::matmul throws.
DecodePrefetchChoice choose_decode_prefetch(const ModelWeights& weights, ThreadPool& pool,
                                            kernels::MatmulScratch& scratch);

}  // namespace qs
