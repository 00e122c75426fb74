// What the HTTP layer hands the engine, and what flows back: one RequestStream per generation.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "constrained/compiled_grammar.h"
#include "sampling/sampling_params.h"

namespace qs {

using SteadyClock = std::chrono::steady_clock;

struct EngineRequest {
  std::string id;
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  int32_t max_tokens = 16;                // generated tokens at most (already fitted to context)
  std::vector<std::string> stop_strings;  // text stops (not returned)
  std::vector<int32_t> stop_token_ids;    // token stops, e.g. <|im_end|> (not returned as text)
  // vLLM's min_tokens: while the output is shorter than this, stop_token_ids are suppressed
  // (kSuppressLogitBias: a grammar that allows nothing else still ends) and stop strings are not
  // checked. 0: off.
  int32_t min_tokens = 0;
  // vLLM's ignore_eos: the caller has already left the end-of-sequence tokens out of
  // stop_token_ids; here it also turns the output guard off, since the client asked for exactly
  // max_tokens tokens (a benchmark), loops included.
  bool ignore_eos = false;
  int32_t top_logprobs = -1;              // -1: no logprobs; else 0..20 alternatives per token
  bool skip_special_tokens = true;        // drop special tokens from the text
  SteadyClock::time_point arrival = SteadyClock::now();
  double timeout_s = 0;                   // > 0: arrival + timeout_s ends it with kTimeout
  int32_t priority = 0;                   // queue order: lower is sooner, ties FIFO (vLLM's)
  // Structured output: when set, every sampled token must follow this grammar (compiled by the
  // caller, e.g. the HTTP thread, with a vocabulary whose rows are the backend's vocab_rows() and
  // whose stop ids are among stop_token_ids). The sequence owns a GrammarMatcher; a stop token is
  // allowed only where the grammar may end, and accepting one finishes the sequence with "stop".
  std::shared_ptr<const constrained::CompiledGrammar> grammar;
};

/// Why a request failed (EngineEvent::kError) or was turned away at submission; the server maps
/// each to an HTTP status.
enum class EngineErrorCode {
  kNone,
  kInvalid,       // can never run: prompt + max_tokens exceed the context or the KV cache (400)
  kQueueFull,     // --max-queue requests already wait (429)
  kQueueTimeout,  // waited longer than --max-queue-wait to start (429)
  kTimeout,       // the request's timeout passed (408)
  kShuttingDown,  // the engine is stopping: not admitted (503)
  kAborted,       // admitted, then cut when the engine stopped (503: the client may retry elsewhere)
  kGrammar,       // structured output cannot go on: a token mask passed the grammar's work limit (400)
  kInternal,      // a failed step (500)
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;                                // natural log of the model's probability
  std::vector<std::pair<int32_t, float>> top;       // most likely alternatives, best first
};

struct EngineEvent {
  enum class Kind { kDelta, kFinished, kError };
  Kind kind = Kind::kDelta;
  std::string text;                      // new UTF-8 text (complete characters, stops withheld)
  std::vector<int32_t> token_ids;        // tokens sampled since the previous event
  std::vector<TokenLogprob> logprobs;    // one per token in token_ids when requested
  std::string finish_reason;             // kFinished: "stop", "length", "cancelled"
  std::string stop_cause;                // kFinished: stop_token, stop_string, max_tokens,
                                         // degenerate_blank_run, degenerate_repetition, cancelled
  std::string error;                     // kError: what went wrong
  EngineErrorCode error_code = EngineErrorCode::kNone;  // kError: the kind of failure
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;         // total so far
  double queue_ms = -1;                  // set once: arrival -> admission into the running set
  // Set on the final event (kFinished / kError):
  int64_t cached_tokens = 0;             // prompt tokens whose KV came from the prefix cache
  int64_t prefill_computed_tokens = 0;   // prompt tokens actually computed (recomputes included)
  int64_t preemptions = 0;               // times the sequence was preempted and recomputed
  int64_t spec_draft_tokens = 0;         // speculative decoding: draft tokens verified
  int64_t spec_accepted_tokens = 0;      // of those, accepted
};

/// Single-producer (engine) / single-consumer (HTTP thread) event channel with a cancel flag.
class RequestStream {
 public:
  void push(EngineEvent event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    cv_.notify_one();
  }
  /// Waits up to `timeout` for the next event; false on timeout.
  bool pop(EngineEvent& out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return false;
    out = std::move(events_.front());
    events_.pop_front();
    return true;
  }
  /// Asks the engine to stop this generation and free its KV blocks at the next step.
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<EngineEvent> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace qs
