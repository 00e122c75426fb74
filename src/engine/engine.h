// The engine thread: owns the model runner and KV cache, runs continuous batching.
//
// Each step admits waiting requests whose KV blocks fit (prompt + max_tokens reserved up front),
// then builds one Batch of the decode token of every running sequence plus prefill chunks of new
// ones up to `max_batched_tokens` (decode first, so running streams keep their ITL while long
// prompts prefill in chunks), runs one forward, samples, detokenizes, applies stop strings and
// pushes events. Other threads only call submit() and read their RequestStream; cancellation is
// a flag the engine checks every step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/request.h"
#include "kv/kv_cache.h"
#include "model/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace qs {

struct EngineSequence;

struct EngineOptions {
  int32_t max_num_seqs = 16;         // sequences running at once
  int64_t max_batched_tokens = 512;  // tokens per forward step (decode + prefill chunks)
};

struct EngineStats {
  int64_t running = 0;
  int64_t waiting = 0;
  double kv_cache_usage = 0;  // used blocks / all blocks, 0..1
};

class Engine {
 public:
  /// Starts the engine thread. `runner`, `cache` and `tokenizer` must outlive the engine.
  Engine(ModelRunner& runner, KvCache& cache, const Tokenizer& tokenizer, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queues a request; events arrive on the returned stream. Thread-safe. A request whose
  /// prompt + max_tokens can never fit the KV cache gets an immediate kError event.
  std::shared_ptr<RequestStream> submit(EngineRequest request);

  /// Stops the engine thread; running and waiting requests finish with "cancelled".
  void shutdown();

  EngineStats stats() const;
  /// Tokens of context the model runner supports.
  int64_t context_tokens() const { return runner_.max_context_tokens(); }

 private:
  void loop();
  void admit_waiting();
  bool step();
  void finish(EngineSequence& seq, const std::string& reason);
  void emit_token(EngineSequence& seq, const float* logits_row);

  ModelRunner& runner_;
  KvCache& cache_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<EngineSequence>> incoming_;  // guarded by mutex_
  bool stop_ = false;                               // guarded by mutex_

  // Engine-thread state.
  std::deque<std::unique_ptr<EngineSequence>> waiting_;
  std::vector<std::unique_ptr<EngineSequence>> running_;
  std::vector<float> logits_;     // [max_num_seqs, vocab]
  std::vector<float> logprobs_;   // [vocab] scratch

  std::atomic<int64_t> n_running_{0};
  std::atomic<int64_t> n_waiting_{0};
  std::atomic<int64_t> n_used_blocks_{0};
  std::thread thread_;
};

}  // namespace qs
