// What a backend needs to turn logits rows into tokens (SamplingBatch), and what it hands back
// (StepOutput). One SamplingRow per logits row of the StepBatch (logits_indices order).
//
// Per row, in the order vLLM applies them (sampling/sampler.h has the formulas):
//   1. allowed-token bitmask (structured outputs): tokens whose bit is 0 get -inf;
//   2. logit bias (sparse), 3. repetition penalty over prompt + output tokens,
//   4. frequency / presence penalties over output tokens;
//   5. temperature == 0 or top_k == 1: argmax (ties: lowest id); else softmax(l / T), top-k,
//      top-p, min-p, one draw.
// Logprobs (when n_logprobs >= 0) are log_softmax of the raw logits, before any step above: the
// model's own distribution, as OpenAI reports them.
//
// RNG: a row's random stream is named by (seed, draws): `draws` outputs of the seed's generator
// have been used by earlier steps of the sequence. The CPU backend runs std::mt19937_64(seed) and
// keeps each sequence's generator between steps (a mismatch re-seeds and discards `draws`
// outputs); a GPU backend may use a counter-based generator (Philox at offset `draws`). Greedy
// rows draw nothing. A speculative verify chunk gives one sequence k + 1 consecutive rows with
// draws d, d + 1, .., d + k (row j samples the token after the chunk's first j drafts, with the
// penalty history and mask of that position); each row is sampled independently, exactly as a
// one-token step at that position would be, and the engine accepts or rejects the drafts.
//
// Sampled drafts (a draft model drawing x ~ q; sampling/rejection_sampler.h): a verify row j < k
// whose draft was sampled names its draft token and q (draft_probs_row, a dense row of
// SamplingBatch::draft_probs); the backend computes the row's processed distribution p (steps
// 1-5 without the draw), takes the row's one draw u and emits x when u * q(x) < p(x), else a
// token drawn from normalize(max(0, p - q)) with the rescaled u (Leviathan et al. 2023,
// Algorithm 1). Greedy rows ignore q (argmax). A backend that ignores draft_probs_row samples
// the row from p as a one-token step would: still exactly p (the engine accepts while the
// sampled token equals the draft), only with a lower acceptance rate.
// want_probs asks for the row's processed distribution (a draft model's q) back in
// StepOutput::probs, and the token drawn from it (one draw, inverse CDF over ascending ids).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>


namespace qs {

struct SamplingRow {
  uint64_t seq_id = 0;          // stable id of the sequence (caches per-sequence state)
  // The scalar fields of SamplingParams (sampling/sampling_params.h has their ranges).
  float temperature = 1.0f;     // 0: greedy
  int32_t top_k = 0;            // <= 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;            // the seed in use (params.seed or one drawn at submission)
  uint64_t draws = 0;           // RNG outputs used by this sequence so far
  int32_t n_logprobs = -1;      // -1: none; 0: the sampled token's logprob; k: plus the top k
  bool want_logits = false;     // copy the raw logits row into StepOutput::logits
  int32_t mask_row = -1;        // row of SamplingBatch::allowed_mask, -1: every token allowed
  // Token history for penalties, as [begin, begin + n) ranges of SamplingBatch::history
  // (filled only when a penalty is active).
  int64_t prompt_begin = 0, prompt_len = 0, output_begin = 0, output_len = 0;
  // Sparse logit bias: [begin, begin + n) of SamplingBatch::bias_ids / bias_values.
  int64_t bias_begin = 0, bias_len = 0;
  // Speculative verification of a sampled draft: the draft token x and its draft distribution
  // q, row draft_probs_row of SamplingBatch::draft_probs (-1: none, sample the row plainly).
  int32_t draft_token = -1;
  int32_t draft_probs_row = -1;
  bool want_probs = false;      // copy the processed distribution into StepOutput::probs
};

struct SamplingBatch {
  std::vector<SamplingRow> rows;           // [n_logits]
  int32_t vocab_rows = 0;                  // logits per row (the model's, e.g. 151936)
  // [n_mask_rows, mask_words()] u32; bit (id % 32) of word (id / 32) set = token id allowed.
  std::vector<uint32_t> allowed_mask;
  std::vector<int32_t> history;            // token ids referenced by rows' prompt/output ranges
  std::vector<int32_t> bias_ids;           // sparse logit bias
  std::vector<float> bias_values;
  std::vector<float> draft_probs;          // [n_draft_rows, vocab_rows] f32: draft distributions q

  int32_t mask_words() const { return (vocab_rows + 31) / 32; }
  void clear() {
    rows.clear(); allowed_mask.clear(); history.clear(); bias_ids.clear(); bias_values.clear(); draft_probs.clear();
  }
};

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0;
};

struct StepOutput {
  std::vector<int32_t> sampled;            // [n_logits] sampled token id per row
  std::vector<float> sampled_logprob;      // [n_logits] (rows with n_logprobs >= 0; else 0)
  // Top logprobs of row r: top[top_begin[r], top_begin[r] + top_len[r]), best first, ties lower id
  std::vector<TopLogprob> top;
  std::vector<int32_t> top_begin, top_len; // [n_logits]
  // Raw logits rows for rows with want_logits, in row order: [n_rows_wanting, vocab_rows] f32.
  std::vector<float> logits;
  std::vector<int32_t> logits_row;         // [n_logits] row into `logits`, -1 when not wanted
  // Processed distributions of rows with want_probs, in row order: [n_rows_wanting, vocab_rows]
  // f32 (each sums to 1; one-hot for greedy rows), and each row's index into it (-1: none).
  std::vector<float> probs;
  std::vector<int32_t> probs_row;          // [n_logits]

  void clear() {
    sampled.clear(); sampled_logprob.clear(); top.clear(); top_begin.clear(); top_len.clear(); logits.clear();
    logits_row.clear(); probs.clear(); probs_row.clear();
  }
};

}  // namespace qs
