#include "engine/engine.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "engine/sequence.h"

namespace qs {

Engine::Engine(ModelRunner& runner, KvCache& cache, const Tokenizer& tokenizer,
               EngineOptions options)
    : runner_(runner), cache_(cache), tokenizer_(tokenizer), options_(options) {
  options_.max_batched_tokens = std::min(options_.max_batched_tokens, runner.max_batch_tokens());
  options_.max_num_seqs = static_cast<int32_t>(
      std::min<int64_t>(options_.max_num_seqs, options_.max_batched_tokens));
  const auto vocab = static_cast<size_t>(runner.config().vocab_size);
  logits_.resize(static_cast<size_t>(options_.max_num_seqs) * vocab);
  logprobs_.resize(vocab);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RequestStream> Engine::submit(EngineRequest request) {
  auto seq = std::make_unique<EngineSequence>(std::move(request), tokenizer_,
                                        static_cast<int32_t>(runner_.config().vocab_size));
  auto stream = seq->stream;
  const int64_t needed = static_cast<int64_t>(seq->request.prompt_ids.size()) + seq->request.max_tokens;
  if (seq->request.prompt_ids.empty() || needed > runner_.max_context_tokens() ||
      KvCache::blocks_for_context(needed) > cache_.n_blocks()) {
    EngineEvent error;
    error.kind = EngineEvent::Kind::kError;
    error.error = "request needs " + std::to_string(needed) + " tokens of context, the engine has " +
                  std::to_string(runner_.max_context_tokens());
    stream->push(std::move(error));
    return stream;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) {
      EngineEvent error;
      error.kind = EngineEvent::Kind::kError;
      error.error = "the engine is shutting down";
      stream->push(std::move(error));
      return stream;
    }
    incoming_.push_back(std::move(seq));
    n_waiting_.fetch_add(1);
  }
  cv_.notify_one();
  return stream;
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.running = n_running_.load();
  s.waiting = n_waiting_.load();
  s.kv_cache_usage = cache_.n_blocks() > 0
                         ? static_cast<double>(n_used_blocks_.load()) / cache_.n_blocks()
                         : 0.0;
  return s;
}

void Engine::finish(EngineSequence& seq, const std::string& reason) {
  EngineEvent event;
  event.kind = EngineEvent::Kind::kFinished;
  // Text held back by the decoder (incomplete UTF-8) or the stop matcher (a possible stop-string
  // prefix) can no longer grow: release it, unless it completes a stop string after all.
  const StopMatcher::Result tail = seq.stop.push(seq.decoder.flush());
  event.text = tail.text + (tail.stopped ? std::string() : seq.stop.flush());
  event.finish_reason = tail.stopped ? "stop" : reason;
  event.prompt_tokens = static_cast<int64_t>(seq.request.prompt_ids.size());
  event.completion_tokens = static_cast<int64_t>(seq.output_ids.size());
  // Free the blocks before telling the client: once it sees the end, the KV is back in the pool.
  seq.blocks.release_all(cache_.pool());
  seq.finished = true;
  seq.stream->push(std::move(event));
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (running_.empty() && waiting_.empty()) {
        cv_.wait(lock, [this] { return stop_ || !incoming_.empty(); });
      }
      if (stop_) break;
      while (!incoming_.empty()) {
        waiting_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
    }
    admit_waiting();
    try {
      step();
    } catch (const std::exception& e) {
      // A failed step fails the sequences in it, never the process.
      for (auto& seq : running_) {
        EngineEvent error;
        error.kind = EngineEvent::Kind::kError;
        error.error = std::string("engine step failed: ") + e.what();
        seq->blocks.release_all(cache_.pool());
        seq->finished = true;
        seq->stream->push(std::move(error));
      }
    }
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [](const auto& s) { return s->finished; }),
                   running_.end());
    n_running_.store(static_cast<int64_t>(running_.size()));
    n_waiting_.store(static_cast<int64_t>(waiting_.size()));
    n_used_blocks_.store(cache_.n_blocks() - cache_.pool().n_free());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto* queue : {&incoming_, &waiting_}) {
    for (auto& seq : *queue) finish(*seq, "cancelled");
    queue->clear();
  }
  for (auto& seq : running_) finish(*seq, "cancelled");
  running_.clear();
  n_running_.store(0);
  n_waiting_.store(0);
}

void Engine::admit_waiting() {
  // Cancelled requests leave the queue without running.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->stream->cancelled()) {
      finish(**it, "cancelled");
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < options_.max_num_seqs) {
    EngineSequence& seq = *waiting_.front();
    const auto needed = static_cast<int32_t>(seq.request.prompt_ids.size() + seq.request.max_tokens);
    if (!seq.blocks.reserve(needed, cache_.pool())) break;  // FIFO: wait for blocks to free up
    EngineEvent admitted;
    admitted.queue_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() -
                                                                  seq.request.arrival).count();
    admitted.prompt_tokens = static_cast<int64_t>(seq.request.prompt_ids.size());
    seq.stream->push(std::move(admitted));
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

}  // namespace qs
