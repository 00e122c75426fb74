// The engine thread: drives the Backend through the step runner, owns the KV block manager and
// the scheduler; runs continuous batching.
//
// Each step (engine_step.cc): drop cancelled / timed-out sequences, let the Scheduler plan the
// step (decode tokens of running sequences first, then prefill chunks up to
// `max_batched_tokens`, then FIFO admission with prefix-cache reuse; preemption by recompute
// when KV blocks run out), run one forward, sample, detokenize, apply stop strings and output
// guards, and push events. Other threads only call submit()/try_submit() and read their
// RequestStream; cancellation is a flag the engine checks every step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "engine/output_guard.h"
#include "engine/prefill_budget.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/mask_workers.h"
#include "engine/step_costs.h"
#include "engine/draft_proposer.h"
#include "engine/ngram_proposer.h"
#include "engine/step_runner.h"
#include "engine/ttft_predictor.h"
#include "kv/block_manager.h"
#include "tokenizer/tokenizer.h"

namespace qs {

struct EngineSequence;

struct EngineOptions {
  int32_t max_num_seqs = 16;         // sequences running at once
  int64_t max_batched_tokens = 512;  // tokens per forward step (decode + prefill chunks)
  bool prefix_caching = true;        // reuse the KV of cached full-block prefixes
  int64_t max_queue = 0;             // > 0: submissions beyond this many waiting get kQueueFull
  double max_queue_wait_s = 0;       // > 0: waiting longer than this to start -> kQueueTimeout
  OutputGuardOptions guard;          // degenerate-output guard
  int thread_nice = 0;               // > 0: the engine thread lowers its own priority (Linux nice)
  double prefill_slack = 0.5;        // a step with prefill next to decodes may take (1 + slack)
                                     // decode-only steps (engine/prefill_budget.h); 0: no cap
  int64_t prefill_min_chunk = 16;    // tokens: the cap's floor (engine/prefill_budget.h)
  double itl_limit_s = 0;            // > 0: ITL limit (--slo-itl-ms) that may lower that floor
  int mask_threads = 2;              // workers computing structured-output masks during a step
  SpecDecodeOptions spec;            // speculative decoding (n-gram prompt lookup); off by default
};

struct EngineStats {
  int64_t running = 0;
  int64_t waiting = 0;               // submitted (or preempted) and not running
  int64_t in_flight = 0;             // submitted and not yet ended (one counter: no gap between
                                     // the waiting and running gauges; use it to drain)
  double kv_cache_usage = 0;         // referenced blocks / all blocks, 0..1
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_referenced = 0;  // held by running sequences
  int64_t kv_blocks_cached = 0;      // unreferenced but holding a cached prefix (evictable)
  int64_t preemptions_total = 0;
  int64_t prefix_cache_queries_tokens = 0;  // prompt tokens looked up at first admission
  int64_t prefix_cache_hits_tokens = 0;     // of those, tokens served from the cache
  int64_t prefill_computed_tokens = 0;      // prompt tokens actually run through the model
  // Engine-thread time per step, summed over steps, seconds: the backend's forward (incl. its
  // sampling) and the host work after it (detokenizing, stop strings, guards, events).
  double forward_seconds_total = 0;
  double output_seconds_total = 0;
  int64_t steps_total = 0;
  // Structured outputs: the engine thread's wait for grammar masks after Backend::launch returned
  // (the masks run on MaskWorkers during the step; this is what they add beyond it), summed over
  // the steps that computed masks, the number of those steps, and the longest wait of one step.
  // On the CPU backend (forward inside launch) it is exactly the masks' cost to the step; on an
  // asynchronous backend it also counts mask time that overlapped the device (an upper bound).
  double mask_wait_seconds_total = 0;
  int64_t mask_steps_total = 0;
  double mask_wait_max_seconds = 0;
  // Speculative decoding: draft tokens verified, and of those accepted (vLLM's
  // spec_decode num_draft_tokens / num_accepted_tokens).
  int64_t spec_draft_tokens_total = 0;
  int64_t spec_accepted_tokens_total = 0;
  // The proposer's time on the engine thread (n-gram lookup, or the draft model's forward steps),
  // summed over the steps that asked it for drafts, and the number of those steps.
  double spec_propose_seconds_total = 0;
  int64_t spec_propose_steps_total = 0;
};

/// Outcome of try_submit: a stream to read, or why the request was turned away.
struct SubmitResult {
  std::shared_ptr<RequestStream> stream;  // null when rejected
  EngineErrorCode rejection = EngineErrorCode::kNone;
  std::string message;
};


/// A place in the waiting queue reserved before the costly preparation of a request (parsing,
/// chat template, tokenization), so that a burst beyond --max-queue is turned away at once rather
/// than after that work. Released on destruction unless try_submit consumed it. Move-only.
class QueueSlot {
 public:
  QueueSlot() = default;
  QueueSlot(QueueSlot&& other) noexcept : counter_(std::exchange(other.counter_, nullptr)) {}
  QueueSlot& operator=(QueueSlot&&) = delete;
  ~QueueSlot() {
    if (counter_ != nullptr) counter_->fetch_sub(1);
  }
  explicit operator bool() const { return counter_ != nullptr; }

 private:
  friend class Engine;
  explicit QueueSlot(std::atomic<int64_t>* counter) : counter_(counter) {}
  std::atomic<int64_t>* counter_ = nullptr;
};

class Engine {
 public:
  /// Starts the engine thread. `backend` (prepared, with KV storage) and `tokenizer` must outlive
  /// the engine. Its BlockManager hands out the block ids [0, backend.kv_blocks()).
  /// `draft_backend`: the draft model's own backend (prepared, with KV storage, outliving the
  /// engine), required when options.spec.draft_model. Throws qs::Error when draft_model is set
  /// without a draft backend or the draft's logits rows differ from the target's.
  Engine(Backend& backend, const Tokenizer& tokenizer, EngineOptions options, Backend* draft_backend = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queues a request. Rejects it immediately (no stream) when prompt + max_tokens can never fit
  /// the context or the KV cache (kInvalid; the message gives both numbers), when max_queue
  /// requests already wait (kQueueFull), or while shutting down (kShuttingDown). Thread-safe.
  /// With a reserved `slot` the queue limit was already checked and the slot becomes the
  /// request's place in the queue.
  SubmitResult try_submit(EngineRequest request, QueueSlot* slot = nullptr);
  /// Reserves a place in the waiting queue; an empty slot (false) when max_queue requests already
  /// wait. Thread-safe, lock-free.
  QueueSlot reserve_queue_slot();
  /// try_submit, with a rejection delivered as a kError event on the returned stream.
  std::shared_ptr<RequestStream> submit(EngineRequest request);

  /// Stops the engine thread; running and waiting requests end with a kAborted error.
  void shutdown();

  /// Published after every step (and on submission for `waiting`).
  EngineStats stats() const;
  /// The load as of the last step (ttft_predictor.h) plus what was submitted since (`taken`:
  /// moved into the scheduler for the step in progress; `incoming`: not yet taken) and the age
  /// of the step in progress. Never waits for a step: the engine holds the snapshot's mutex only
  /// to replace it. Thread-safe.
  LoadSnapshot load_snapshot() const;
  /// Tokens one sequence may hold: the backend's context limit, capped by the KV cache size.
  int64_t context_tokens() const;
  /// Logits rows per token (the backend's vocab_rows(), e.g. 151936): a request's grammar must
  /// be compiled for this many rows.
  int32_t vocab_rows() const { return backend_.vocab_rows(); }
  const EngineOptions& options() const { return options_; }

 private:
  void loop();
  void drop_expired_and_cancelled();
  bool step();
  void finish(EngineSequence& seq, const std::string& reason, const std::string& stop_cause);
  void fail(EngineSequence& seq, EngineErrorCode code, const std::string& message);
  void retire(EngineSequence& seq);
  void emit_token(EngineSequence& seq, const StepOutput& out, int32_t row);
  // Speculative decoding (engine_spec.cc): drafts for decoding sequences before schedule(); the
  // grammar masks of a verify chunk's rows; emission of a verify chunk's accepted tokens.
  void propose_drafts();
  void choose_adaptive_drafts();  // --spec-adaptive: decoding_[i].k from engine/draft_length.h
  void fill_verify_masks(EngineSequence& seq, int32_t row, int64_t n_draft);
  void emit_verified(EngineSequence& seq, const StepOutput& out, int32_t row, int64_t n_draft);
  bool token_is_blank(int32_t token);
  void publish_stats();
  void publish_load();  // the LoadSnapshot for load_snapshot()

  Backend& backend_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;
  BlockManager blocks_;
  Scheduler scheduler_;
  PrefillBudget prefill_budget_;  // engine thread only
  StepRunner step_runner_;        // engine thread only
  MaskWorkers mask_workers_;      // grammar masks while the backend runs a step
  uint64_t next_seq_id_ = 1;      // guarded by mutex_

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<EngineSequence>> incoming_;  // guarded by mutex_
  bool stop_ = false;                                     // guarded by mutex_

  // Engine-thread state.
  std::vector<std::unique_ptr<EngineSequence>> sequences_;  // every waiting or running sequence
  std::vector<int8_t> blank_token_;  // [vocab] -1 unknown, else is_blank_or_punct(token text)
  int64_t preemptions_ = 0, cache_queries_ = 0, cache_hits_ = 0, prefill_computed_ = 0;
  double forward_s_ = 0, output_s_ = 0;
  // Engine thread waiting for structured-output masks after launch() returned (MaskWorkers::join):
  // summed, the largest single wait, and the steps that computed masks.
  double mask_wait_s_ = 0, mask_wait_max_s_ = 0;
  int64_t mask_steps_ = 0;
  int64_t steps_ = 0;
  int64_t spec_draft_ = 0, spec_accepted_ = 0;
  std::vector<int32_t> verify_tokens_;  // a verify chunk's tokens + drafts (copied by StepRunner::add)
  std::unique_ptr<DraftProposer> proposer_;  // null when speculation is off
  std::vector<DraftRequest> draft_requests_;  // propose_drafts()'s asks, reused
  double spec_propose_s_ = 0;
  // propose_drafts(): the decoding sequences of this step and their draft counts (room-capped,
  // then chosen by choose_adaptive_drafts()).
  struct DecodingSequence {
    EngineSequence* seq;
    int32_t k;
  };
  std::vector<DecodingSequence> decoding_;
  std::vector<double> adaptive_a_;
  std::vector<int32_t> adaptive_k_max_, adaptive_below_, adaptive_k_;
  int64_t spec_propose_steps_ = 0;

  std::atomic<int64_t> n_running_{0};
  std::atomic<int64_t> n_waiting_{0};
  std::atomic<int64_t> n_in_flight_{0};
  std::atomic<int64_t> n_referenced_{0};
  std::atomic<int64_t> n_cached_{0};
  std::atomic<int64_t> preemptions_pub_{0}, cache_queries_pub_{0}, cache_hits_pub_{0}, prefill_pub_{0};
  std::atomic<double> forward_s_pub_{0}, output_s_pub_{0}, mask_wait_s_pub_{0}, mask_wait_max_s_pub_{0};
  std::atomic<int64_t> steps_pub_{0}, mask_steps_pub_{0};
  // TTFT prediction (ttft_predictor.h). Sums of requests the last snapshot does not hold: submitted
  // and not yet taken by the engine thread, and taken into the scheduler since the last publish
  // (added when taken, cleared by publish_load() under snapshot_mutex_).
  struct UnseenCounters {
    std::atomic<int64_t> sequences{0}, prompt_tokens{0}, max_tokens{0};
    void add(int64_t sign, int64_t prompt, int64_t max_tokens);
    UnseenRequests load() const;
  };
  UnseenCounters unseen_incoming_, unseen_taken_;
  std::atomic<int64_t> step_start_ns_{0};  // steady-clock ns at which the step in progress began
  StepCosts step_costs_;                   // engine thread only: learned step costs
  double output_ratio_ = -1;               // engine thread only: EMA of completion / max_tokens; < 0: none yet
  static constexpr size_t kOutputWindow = 64;  // finished sequences in LoadSnapshot::output_samples
  std::deque<double> output_window_;       // engine thread only: their completion / max_tokens, oldest first
  // Engine thread only, speculative decoding: EMAs over steps with decodes (weight 1/8) of the draft
  // tokens verified and of the tokens gained per decoding sequence (LoadSnapshot's fields).
  double spec_drafts_per_decode_ = 0, spec_tokens_per_decode_ = 1;
  std::atomic<int64_t> spec_draft_pub_{0}, spec_accepted_pub_{0}, spec_propose_steps_pub_{0};
  std::atomic<double> spec_propose_s_pub_{0};
  mutable std::mutex snapshot_mutex_;
  std::shared_ptr<const LoadSnapshot> snapshot_;  // guarded by snapshot_mutex_ (replaced, never modified)
  std::thread thread_;
};

}  // namespace qs
