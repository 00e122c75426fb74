// Running backends in tests without the engine: one step from explicit sequences, raw logits back.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace qs {

/// One sequence's part of a test step: tokens computed at positions [first_position, +size),
/// its block table, and how many trailing tokens want logits.
struct TestChunk {
  std::vector<int32_t> tokens;
  int32_t first_position = 0;
  std::vector<int32_t> block_table;
  int32_t n_logits = 0;
  uint64_t seq_id = 0;
};

/// Runs one step of `backend` over `chunks` with greedy sampling rows that want the raw logits;
/// returns the logits rows [sum n_logits, vocab_rows] in chunk order. Throws what the backend
/// throws.
inline std::vector<float> step_logits(Backend& backend, const std::vector<TestChunk>& chunks) {
  StepBatchBuilder builder;
  SamplingBatch sampling;
  sampling.vocab_rows = backend.vocab_rows();
  for (const TestChunk& c : chunks) {
    builder.add_sequence(c.tokens, c.first_position, c.block_table, c.n_logits);
    for (int32_t j = 0; j < c.n_logits; ++j) {
      SamplingRow row;
      row.seq_id = c.seq_id;
      row.temperature = 0.0f;
      row.want_logits = true;
      sampling.rows.push_back(row);
    }
  }
  StepBatch batch;
  builder.build(batch);
  StepOutput out;
  backend.forward(batch, sampling, out);
  return out.logits;
}

/// Consecutive block ids [first, first + n).
inline std::vector<int32_t> block_range(int32_t first, int32_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = first + i;
  return ids;
}

}  // namespace qs
