// Backend conformance, sampling and errors (issue 10 item 7): the SamplingBatch / StepOutput
// contract of backend/sampling_batch.h and the error contract of backend/backend.h, for every
// registered backend, through the Backend interface only. Expected values come from the raw logits
// rows the backend returns (argmax, log_softmax in double, computed here) or from recomputes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "backend/factory/backend_factory.h"
#include "core/error.h"
#include "support/backend_conformance.h"

namespace qs {
namespace {

constexpr int32_t kVocab = 300;
// Tokens whose embedding (= lm_head) rows are identical: their raw logits tie exactly.
constexpr int32_t kTied[] = {5, 100, 299};

int32_t argmax_lowest(const float* l, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) best = l[i] > l[best] ? i : best;
  return best;
}

std::vector<double> log_softmax_double(const float* l, int32_t n) {
  double max = -INFINITY, sum = 0;
  for (int32_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(l[i]));
  for (int32_t i = 0; i < n; ++i) sum += std::exp(l[i] - max);
  std::vector<double> out(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) out[i] = l[i] - max - std::log(sum);
  return out;
}

SamplingRow row_of(uint64_t seq, float temperature, uint64_t seed = 0, uint64_t draws = 0) {
  SamplingRow r;
  r.seq_id = seq;
  r.temperature = temperature;
  r.seed = seed;
  r.draws = draws;
  return r;
}

// Appends a mask row allowing exactly `ids`; returns its index.
int32_t add_mask(SamplingBatch& s, const std::vector<int32_t>& ids) {
  s.vocab_rows = kVocab;
  const size_t base = s.allowed_mask.size();
  s.allowed_mask.resize(base + static_cast<size_t>(s.mask_words()), 0u);
  for (int32_t id : ids) s.allowed_mask[base + id / 32] |= 1u << (id % 32);
  return static_cast<int32_t>(base / s.mask_words());
}

class BackendConformanceSampling : public ::testing::TestWithParam<std::string> {
 protected:
  BackendConformanceSampling() {
    // Copy embedding row 5 over rows 100 and 299 (F32, tied lm_head): exact logit ties.
    uint8_t* embed = model_.buffers.front()->data();
    for (int32_t id : {100, 299}) std::memcpy(embed + id * 64 * 4, embed + 5 * 64 * 4, 64 * 4);
    backend_ = conformance_backend(GetParam(), model_, KvDType::kF32, 32, BackendLimits{128, 256, 16}, 1);
  }
  BackendTolerances tol() const { return tolerances_for(GetParam()); }
  // Sequence s: 8 prompt tokens in block s, the last one's logits row.
  TestChunk chunk(int32_t s) const { return {conformance_tokens(8, kVocab, 100 + s), 0, {s}, 1, static_cast<uint64_t>(s)}; }
  std::vector<float> raw(int32_t s) { return step_logits(*backend_, {chunk(s)}); }
  int32_t sample_one(int32_t s, const SamplingRow& row, SamplingBatch sampling = {}) {
    sampling.rows = {row};
    return run_step(*backend_, {chunk(s)}, sampling).sampled.at(0);
  }

  RandomModel model_{Architecture::kQwen3, DType::F32};
  std::unique_ptr<Backend> backend_;
};

// Greedy (temperature 0, or top_k 1 at any temperature) is the argmax of the raw row, ties to the
// lowest id (tied tokens allowed alone by a mask).
TEST_P(BackendConformanceSampling, GreedyIsArgmaxWithLowestIdOnTies) {
  for (int32_t s = 0; s < 4; ++s) {
    const std::vector<float> l = raw(s);
    ASSERT_EQ(l.size(), static_cast<size_t>(kVocab));
    ASSERT_EQ(l[5], l[100]);
    ASSERT_EQ(l[5], l[299]);
    EXPECT_EQ(sample_one(s, row_of(s, 0.0f)), argmax_lowest(l.data(), kVocab)) << "sequence " << s;
    SamplingRow top1 = row_of(s, 1.0f, 7 + s);
    top1.top_k = 1;
    EXPECT_EQ(sample_one(s, top1), argmax_lowest(l.data(), kVocab)) << "top_k 1, sequence " << s;
    SamplingBatch tied;
    SamplingRow masked = row_of(s, 0.0f);
    masked.mask_row = add_mask(tied, {299, 100, 5});
    EXPECT_EQ(sample_one(s, masked, tied), 5) << "tie, sequence " << s;
    masked.temperature = 1.0f;
    masked.top_k = 1;
    EXPECT_EQ(sample_one(s, masked, tied), 5) << "tie with top_k 1, sequence " << s;
  }
}

// Only allowed ids are sampled (greedy: the argmax over them; temperature 1 and 3, many seeds); a
// single allowed id always comes out, even the least likely token; rows of one batch use their
// own mask rows.
TEST_P(BackendConformanceSampling, AllowedMaskRestrictsEverySample) {
  const std::vector<float> l = raw(0);
  const int32_t best = argmax_lowest(l.data(), kVocab);
  std::vector<int32_t> allowed = {0, 31, 32, 63, 64, 298};  // word edges
  for (int32_t id : conformance_tokens(12, kVocab, 5)) allowed.push_back(id);
  std::erase(allowed, best);
  const std::set<int32_t> allowed_set(allowed.begin(), allowed.end());
  int32_t best_allowed = *allowed_set.begin();
  for (int32_t id : allowed_set) best_allowed = l[id] > l[best_allowed] ? id : best_allowed;
  const int32_t least = static_cast<int32_t>(std::min_element(l.begin(), l.end()) - l.begin());

  SamplingBatch masks;
  const int32_t many = add_mask(masks, allowed), one = add_mask(masks, {least});
  SamplingRow greedy = row_of(0, 0.0f);
  greedy.mask_row = many;
  EXPECT_EQ(sample_one(0, greedy, masks), best_allowed);
  greedy.mask_row = one;
  EXPECT_EQ(sample_one(0, greedy, masks), least);
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    for (float t : {1.0f, 3.0f}) {
      SamplingRow r = row_of(0, t, seed, seed % 3);
      r.mask_row = many;
      const int32_t token = sample_one(0, r, masks);
      EXPECT_TRUE(allowed_set.count(token)) << "token " << token << " seed " << seed << " T " << t;
      seen.insert(token);
      r.mask_row = one;
      EXPECT_EQ(sample_one(0, r, masks), least) << "seed " << seed << " T " << t;
    }
  }
  EXPECT_GE(seen.size(), 2u) << "temperature sampling under the mask never varied";

  // One batch, three sequences, three masks (one of them: none).
  SamplingBatch batch = masks;
  batch.rows = {row_of(1, 1.0f, 3), row_of(2, 0.0f), row_of(3, 0.0f)};
  batch.rows[0].mask_row = one;
  batch.rows[1].mask_row = many;
  const StepOutput out = run_step(*backend_, {chunk(1), chunk(2), chunk(3)}, batch);
  const std::vector<float> l3 = raw(3), l2 = raw(2);
  int32_t best2 = *allowed_set.begin();
  for (int32_t id : allowed_set) best2 = l2[id] > l2[best2] ? id : best2;
  EXPECT_EQ(out.sampled.at(0), least);
  EXPECT_EQ(out.sampled.at(1), best2);
  EXPECT_EQ(out.sampled.at(2), argmax_lowest(l3.data(), kVocab));
}

// Logit bias is added to the raw logits before the argmax (the expected token is the argmax of
// raw + bias computed here); it changes neither the raw row nor the logprobs.
TEST_P(BackendConformanceSampling, LogitBiasShiftsTheArgmax) {
  const std::vector<float> l = raw(0);
  const int32_t best = argmax_lowest(l.data(), kVocab);
  const int32_t least = static_cast<int32_t>(std::min_element(l.begin(), l.end()) - l.begin());
  const std::vector<std::vector<std::pair<int32_t, float>>> cases = {
      {{least, l[best] - l[least] + 0.5f}}, {{best, -100.0f}}, {{best, -100.0f}, {7, 3.0f}, {8, 2.0f}}, {{42, 0.0f}}};
  for (const auto& bias : cases) {
    SamplingBatch s;
    SamplingRow r = row_of(0, 0.0f);
    r.want_logits = true;
    r.n_logprobs = 0;
    r.bias_len = static_cast<int64_t>(bias.size());
    std::vector<float> biased = l;
    for (const auto& [id, v] : bias) {
      s.bias_ids.push_back(id);
      s.bias_values.push_back(v);
      biased[id] += v;
    }
    s.rows = {r};
    const StepOutput out = run_step(*backend_, {chunk(0)}, s);
    const int32_t expected = argmax_lowest(biased.data(), kVocab);
    EXPECT_EQ(out.sampled.at(0), expected) << "bias on " << bias.front().first;
    expect_same_logits(tol(), out.logits, l, kVocab, "raw row under bias");
    EXPECT_NEAR(out.sampled_logprob.at(0), log_softmax_double(l.data(), kVocab)[expected], tol().logprob_abs);
  }
}

// (seed, draws) names the random stream: steps with draws 0..15 in order give the same tokens as
// a fresh backend asked for draws 15..0 out of order, alone or inside batches of other rows.
TEST_P(BackendConformanceSampling, SeedAndDrawsNameTheStreamWhateverTheBatch) {
  auto stream = [&](Backend& b, uint64_t seed, uint64_t draws, std::vector<TestChunk> others) {
    SamplingBatch s;
    std::vector<TestChunk> chunks = {chunk(1)};
    s.rows = {row_of(1, 5.0f, seed, draws)};
    for (size_t i = 0; i < others.size(); ++i) {
      chunks.push_back(others[i]);
      s.rows.push_back(i % 2 ? row_of(others[i].seq_id, 0.0f) : row_of(others[i].seq_id, 1.0f, 1000 + draws, draws));
    }
    if (draws % 2) {  // the row of interest last
      std::rotate(chunks.begin(), chunks.begin() + 1, chunks.end());
      std::rotate(s.rows.begin(), s.rows.begin() + 1, s.rows.end());
      return run_step(b, chunks, s).sampled.back();
    }
    return run_step(b, chunks, s).sampled.front();
  };
  std::vector<int32_t> in_order;
  for (uint64_t k = 0; k < 16; ++k) in_order.push_back(stream(*backend_, 42, k, {}));
  EXPECT_GE(std::set<int32_t>(in_order.begin(), in_order.end()).size(), 2u) << "draws does not advance the stream";
  std::vector<int32_t> other_seed;
  for (uint64_t k = 0; k < 16; ++k) other_seed.push_back(stream(*backend_, 43, k, {}));
  EXPECT_NE(other_seed, in_order) << "seeds 42 and 43 gave the same 16 draws";

  auto fresh = conformance_backend(GetParam(), model_, KvDType::kF32, 32, BackendLimits{128, 256, 16}, 1);
  for (uint64_t k = 16; k-- > 0;) {
    EXPECT_EQ(stream(*fresh, 42, k, {}), in_order[k]) << "draws " << k << " out of order";
    EXPECT_EQ(stream(*fresh, 42, k, {chunk(2), chunk(3)}), in_order[k]) << "draws " << k << " in a batch";
    EXPECT_EQ(stream(*backend_, 42, k, {chunk(4)}), in_order[k]) << "draws " << k << " replayed";
  }
}

// Logprobs are log_softmax of the raw row (computed here in double), whatever mask, bias or
// temperature the row samples with; top logprobs are the k best, sorted, ties lower id first;
// raw rows come back only where asked.
TEST_P(BackendConformanceSampling, LogprobsAndRawRows) {
  const std::vector<float> l0 = raw(0), l1 = raw(1);
  SamplingBatch s;
  s.vocab_rows = kVocab;
  SamplingRow all = row_of(0, 1.0f, 9);
  all.n_logprobs = kVocab;
  all.mask_row = add_mask(s, {3, 200, 100});
  all.bias_len = 1;
  s.bias_ids = {200};
  s.bias_values = {5.0f};
  SamplingRow top5 = row_of(1, 0.0f);
  top5.n_logprobs = 5;
  top5.want_logits = true;
  SamplingRow only = row_of(2, 0.7f, 4);
  only.n_logprobs = 0;
  SamplingRow none = row_of(3, 0.0f);
  s.rows = {all, top5, only, none};
  const StepOutput out = run_step(*backend_, {chunk(0), chunk(1), chunk(2), chunk(3)}, s);
  const std::vector<float> l2 = raw(2);

  const std::vector<float>* rows[] = {&l0, &l1};
  for (size_t r = 0; r < 2; ++r) {
    const std::vector<double> ref = log_softmax_double(rows[r]->data(), kVocab);
    const int32_t k = r == 0 ? kVocab : 5;
    EXPECT_NEAR(out.sampled_logprob.at(r), ref[out.sampled.at(r)], tol().logprob_abs) << "row " << r;
    ASSERT_EQ(out.top_len.at(r), k) << "row " << r;
    const TopLogprob* top = out.top.data() + out.top_begin.at(r);
    std::set<int32_t> listed;
    double worst_listed = INFINITY;
    for (int32_t i = 0; i < k; ++i) {
      EXPECT_NEAR(top[i].logprob, ref[top[i].token], tol().logprob_abs) << "row " << r << " rank " << i;
      if (i > 0) {
        EXPECT_TRUE(top[i - 1].logprob > top[i].logprob ||
                    (top[i - 1].logprob == top[i].logprob && top[i - 1].token < top[i].token))
            << "row " << r << " rank " << i;
      }
      listed.insert(top[i].token);
      worst_listed = std::min(worst_listed, ref[top[i].token]);
    }
    EXPECT_EQ(listed.size(), static_cast<size_t>(k)) << "row " << r << ": a token listed twice";
    for (int32_t id = 0; id < kVocab; ++id) {
      if (!listed.count(id)) {
        EXPECT_LE(ref[id], worst_listed + 2 * tol().logprob_abs) << "row " << r << " left out " << id;
      }
    }
  }
  // The full list (row 0) has the three tied tokens in id order.
  const TopLogprob* full = out.top.data() + out.top_begin.at(0);
  std::vector<int32_t> tied_order;
  for (int32_t i = 0; i < kVocab; ++i) {
    if (full[i].token == 5 || full[i].token == 100 || full[i].token == 299) tied_order.push_back(full[i].token);
  }
  EXPECT_EQ(tied_order, std::vector<int32_t>(std::begin(kTied), std::end(kTied)));
  EXPECT_TRUE(out.sampled.at(0) == 3 || out.sampled.at(0) == 200 || out.sampled.at(0) == 100);

  EXPECT_NEAR(out.sampled_logprob.at(2), log_softmax_double(l2.data(), kVocab)[out.sampled.at(2)], tol().logprob_abs);
  EXPECT_EQ(out.top_len.at(2), 0);
  EXPECT_EQ(out.top_len.at(3), 0);
  EXPECT_EQ(out.sampled_logprob.at(3), 0.0f);
  EXPECT_EQ(out.logits_row, (std::vector<int32_t>{-1, 0, -1, -1}));
  expect_same_logits(tol(), out.logits, l1, kVocab, "want_logits row");
}

// Invalid batches and sampling rows throw qs::Error from forward() (one case from StepBatchBuilder,
// which refuses a table that does not cover the new positions); the backend then computes the next
// valid step as if nothing had happened.
TEST_P(BackendConformanceSampling, InvalidStepsThrowAndLeaveTheBackendUsable) {
  RandomModel m(Architecture::kQwen3, DType::F32);
  auto b = conformance_backend(GetParam(), m, KvDType::kF32, 4, BackendLimits{8, 64, 4}, 1);
  const TestChunk good = {{1, 2, 3, 4, 5}, 0, {1}, 5, 0};
  const std::vector<float> expected = step_logits(*b, {good});
  auto greedy_rows = [](size_t n) {
    SamplingBatch s;
    for (size_t i = 0; i < n; ++i) s.rows.push_back(row_of(0, 0.0f));
    return s;
  };
  auto bad_sampling = [&](SamplingRow row, SamplingBatch s = {}) {
    s.rows = {row};
    return run_step(*b, {{{7}, 0, {2}, 1, 0}}, s);
  };
  SamplingRow bias_row = row_of(0, 0.0f);
  bias_row.bias_len = 1;
  SamplingBatch bias_out_of_vocab, bias_too_big, empty_mask;
  bias_out_of_vocab.bias_ids = {kVocab};
  bias_out_of_vocab.bias_values = {1.0f};
  bias_too_big.bias_ids = {3};
  bias_too_big.bias_values = {1000.0f};
  SamplingRow masked = row_of(0, 0.0f);
  masked.mask_row = add_mask(empty_mask, {});
  SamplingRow bad_mask_row = masked;
  bad_mask_row.mask_row = 1;
  SamplingRow bias_range = bias_row;
  bias_range.bias_begin = 3;
  SamplingRow negative_t = row_of(0, -1.0f);
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"token outside the vocabulary", [&] { step_logits(*b, {{{kVocab}, 0, {0}, 1}}); }},
      {"negative token", [&] { step_logits(*b, {{{-1}, 0, {0}, 1}}); }},
      {"position beyond the context", [&] { step_logits(*b, {{{5}, 64, {0, 1, 2, 3, 0}, 1}}); }},
      {"block id outside the cache", [&] { step_logits(*b, {{{5}, 0, {4}, 1}}); }},
      {"block id -1 in the table", [&] { step_logits(*b, {{{5, 6}, 15, {-1, 2}, 1}}); }},
      {"block table too short (refused by StepBatchBuilder)", [&] { step_logits(*b, {{{5}, 16, {0}, 1}}); }},
      {"more tokens than max_batch_tokens", [&] { step_logits(*b, {{std::vector<int32_t>(9, 1), 0, {0}, 1}}); }},
      {"more sequences than max_seqs",
       [&] { step_logits(*b, {{{1}, 0, {0}, 1}, {{2}, 0, {1}, 1}, {{3}, 0, {2}, 1}, {{4}, 0, {3}, 1}, {{5}, 0, {0}, 1}}); }},
      {"two sampling rows for one logits row", [&] { run_step(*b, {{{7}, 0, {2}, 1}}, greedy_rows(2)); }},
      {"no sampling row for one logits row", [&] { run_step(*b, {{{7}, 0, {2}, 1}}, greedy_rows(0)); }},
      {"sampling vocab_rows mismatch", [&] { SamplingBatch s = greedy_rows(1); s.vocab_rows = 7; run_step(*b, {{{7}, 0, {2}, 1}}, s); }},
      {"mask row out of range", [&] { bad_sampling(bad_mask_row, empty_mask); }},
      {"mask allowing nothing", [&] { bad_sampling(masked, empty_mask); }},
      {"bias id outside the vocabulary", [&] { bad_sampling(bias_row, bias_out_of_vocab); }},
      {"bias value above 100", [&] { bad_sampling(bias_row, bias_too_big); }},
      {"bias range outside bias_ids", [&] { bad_sampling(bias_range, bias_out_of_vocab); }},
      {"negative temperature", [&] { bad_sampling(negative_t); }},
  };
  for (const auto& [what, run] : cases) {
    EXPECT_THROW(run(), Error) << what;
    expect_same_logits(tol(), step_logits(*b, {good}), expected, kVocab, "valid step after: " + what);
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, BackendConformanceSampling, ::testing::ValuesIn(registered_backends()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace qs
