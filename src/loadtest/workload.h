// What the load generator sends: prompt/output lengths, random-word prompts sized to a token
// count, conversations read from a JSONL dataset, and Poisson/gamma arrival times.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace qs::loadtest {

// A token count, fixed ("256") or drawn uniformly from an inclusive range ("128:512").
struct LengthRange {
  int min_tokens = 0;
  int max_tokens = 0;
};

// Parses "N" or "A:B" (0 <= A <= B); throws qs::Error naming `option` otherwise.
LengthRange parse_length_range(const std::string& text, const std::string& option);
int sample_length(const LengthRange& range, std::mt19937_64& rng);

// Arrival times in seconds from the start for `n` requests at a mean rate of `rate` requests/s.
// Inter-arrival gaps are gamma-distributed with shape k = `burstiness` and scale 1 / (rate * k),
// so the mean gap is 1 / rate for any k (vLLM benchmark_serving's --burstiness): k = 1 is a Poisson
// process (exponential gaps), k < 1 is burstier, k > 1 more uniform. The first request starts at
// t = gap_0. rate = +inf sends everything at t = 0.
std::vector<double> arrival_times_s(size_t n, double rate, double burstiness, uint64_t seed);

// Returns the number of tokens of a text, or nullopt when it cannot (no tokenizer available).
using TokenCounter = std::function<std::optional<int>(const std::string& text)>;

// Prompts of random common English words (mostly one token each with their leading space in
// byte-level BPE vocabularies such as Qwen's). With a TokenCounter the word count is corrected
// (up to a few rounds) until the text has exactly `target_tokens` tokens or the closest count
// found; without one, one word per token is assumed.
class PromptBuilder {
 public:
  PromptBuilder(TokenCounter counter, uint64_t seed);
  std::string build(int target_tokens);
  // True when the last build() was measured by the TokenCounter.
  bool measured() const { return measured_; }

 private:
  std::string words_text(const std::vector<int>& word_ids, size_t count) const;

  TokenCounter counter_;
  std::mt19937_64 rng_;
  bool measured_ = false;
};

struct Turn {
  std::string user_text;  // the new user message of this turn
  int max_tokens = 0;     // requested output length
};

// One simulated user: optional leading messages (e.g. a system message from the dataset) and the
// turns it sends one after another; each turn's request carries the whole history so far
// (previous user messages and the server's replies).
struct Conversation {
  std::vector<nlohmann::json> prefix_messages;
  std::vector<Turn> turns;
};

struct WorkloadOptions {
  size_t num_requests = 0;  // total requests (turns) over all conversations
  int turns_per_user = 1;   // --multi-turn K
  LengthRange input;        // new-user-message tokens per turn (random prompts)
  LengthRange output;       // max_tokens per turn
  std::string dataset_path;  // JSONL of {"messages":[...]}; empty: random prompts
  uint64_t seed = 0;
};

// ceil(num_requests / K) conversations whose turns add up to exactly num_requests (the last one
// may be shorter). From a dataset, each line's user messages in order are its turns (at most K;
// lines are reused cyclically), messages before the first user message are kept as the prefix,
// and the dataset's own assistant messages are dropped (the server's replies take their place).
std::vector<Conversation> build_workload(const WorkloadOptions& options, PromptBuilder& prompts);

}  // namespace qs::loadtest
