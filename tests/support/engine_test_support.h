// Shared helpers of the engine tests: a byte-level tokenizer, event collection, greedy requests
// and a fixture with the in-memory random model.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "support/random_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace qs {

// 256 byte tokens + 44 special tokens (<|s0|> .. <|s43|>), id 299 is the EOS "<|s43|>".
inline TokenizerData byte_tokenizer_data() {
  TokenizerData data;
  for (int b = 0; b < 256; ++b) data.vocab.push_back(tokenizer_detail::bytes_to_byte_level(std::string(1, static_cast<char>(b))));
  for (int i = 0; i < 44; ++i) {
    data.vocab.emplace_back();
    data.added_tokens.push_back({256 + i, "<|s" + std::to_string(i) + "|>", true});
  }
  data.eos_id = 299;
  return data;
}

inline Tokenizer byte_tokenizer() { return Tokenizer(byte_tokenizer_data()); }

struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  std::string finish_reason;
  std::string error;
  // From the final event.
  std::string stop_cause;
  EngineErrorCode error_code = EngineErrorCode::kNone;
  int64_t cached_tokens = 0;
  int64_t prefill_computed_tokens = 0;
  int64_t preemptions = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  bool ended = false;  // a kFinished or kError event arrived
};

inline Collected collect(RequestStream& stream) {
  Collected c;
  EngineEvent e;
  while (stream.pop(e, std::chrono::milliseconds(30000))) {
    c.tokens.insert(c.tokens.end(), e.token_ids.begin(), e.token_ids.end());
    c.text += e.text;
    if (e.kind == EngineEvent::Kind::kDelta) continue;
    c.ended = true;
    c.stop_cause = e.stop_cause;
    c.error_code = e.error_code;
    c.cached_tokens = e.cached_tokens;
    c.prefill_computed_tokens = e.prefill_computed_tokens;
    c.preemptions = e.preemptions;
    c.spec_draft_tokens = e.spec_draft_tokens;
    c.spec_accepted_tokens = e.spec_accepted_tokens;
    if (e.kind == EngineEvent::Kind::kFinished) {
      c.finish_reason = e.finish_reason;
    } else {
      c.error = e.error;
    }
    break;
  }
  return c;
}

/// Submits every request to `engine` at once and returns their outputs in request order.
inline std::vector<Collected> run_all(Engine& engine, const std::vector<EngineRequest>& requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : requests) streams.push_back(engine.submit(r));
  std::vector<Collected> out;
  for (auto& s : streams) out.push_back(collect(*s));
  return out;
}

/// EngineOptions with the given sequence and per-step token limits, the rest at their defaults.
inline EngineOptions engine_options(int32_t max_num_seqs, int64_t max_batched_tokens) {
  EngineOptions options;
  options.max_num_seqs = max_num_seqs;
  options.max_batched_tokens = max_batched_tokens;
  return options;
}

inline EngineRequest greedy_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  EngineRequest r;
  r.prompt_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

// Stats once the engine has published a step with nothing running or waiting (the gauges are
// published at the end of each step).
inline EngineStats settled_stats(const Engine& engine) {
  EngineStats st = engine.stats();
  for (int i = 0; i < 400 && (st.running + st.waiting > 0 || st.kv_blocks_referenced > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    st = engine.stats();
  }
  return st;
}

/// A prepared CPU backend over `model` with `n_blocks` KV blocks of `kv` (2 threads unpinned,
/// batches of max_batch_tokens, contexts of max_context tokens, up to 64 sequences per step).
inline std::unique_ptr<Backend> cpu_test_backend(const RandomModel& model, KvDType kv, int32_t n_blocks,
                                                 int64_t max_batch_tokens = 32, int64_t max_context = 256,
                                                 int threads = 2) {
  auto backend = std::make_unique<CpuBackend>(CpuBackendOptions{threads, false, 0});
  backend->prepare(model.config, model.weights, BackendLimits{max_batch_tokens, max_context, 64});
  backend->allocate_kv(n_blocks, kv);
  return backend;
}

struct EngineFixture : ::testing::Test {
  RandomModel model{Architecture::kQwen3, DType::F32};
  Tokenizer tokenizer = byte_tokenizer();
  std::unique_ptr<Backend> backend = cpu_test_backend(model, KvDType::kF16, 128);
};

}  // namespace qs
