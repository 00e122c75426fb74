#include "loadtest/workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace qs::loadtest {
namespace {

// Common English words; each is a single token (with its leading space) in Qwen's vocabulary.
constexpr const char* kWords[] = {
    "the",     "time",    "people",  "year",    "way",     "day",     "man",     "thing",
    "woman",   "life",    "child",   "world",   "school",  "state",   "family",  "student",
    "group",   "country", "problem", "hand",    "part",    "place",   "case",    "week",
    "company", "system",  "program", "question", "work",   "number",  "night",   "point",
    "home",    "water",   "room",    "mother",  "area",    "money",   "story",   "fact",
    "month",   "lot",     "right",   "study",   "book",    "eye",     "job",     "word",
    "business", "issue",  "side",    "kind",    "head",    "house",   "service", "friend",
    "father",  "power",   "hour",    "game",    "line",    "end",     "member",  "law",
    "car",     "city",    "name",    "team",    "minute",  "idea",    "body",    "back",
    "face",    "level",   "office",  "door",    "health",  "person",  "art",     "war",
    "history", "party",   "result",  "change",  "morning", "reason",  "research", "girl",
    "moment",  "air",     "teacher", "force",   "order",   "sound",   "light",   "table",
    "music",   "river",   "market",  "garden",  "paper",   "window",  "street",  "tree",
    "green",   "blue",    "red",     "small",   "large",   "good",    "new",     "old",
    "great",   "high",    "long",    "little",  "young",   "early",   "late",    "open",
    "make",    "take",    "see",     "come",    "think",   "look",    "want",    "give",
    "use",     "find",    "tell",    "ask",     "feel",    "try",     "leave",   "call",
    "keep",    "let",     "begin",   "show",    "hear",    "play",    "run",     "move",
    "live",    "believe", "bring",   "write",   "sit",     "stand",   "lose",    "pay",
    "meet",    "learn",   "read",    "grow",    "walk",    "win",     "talk",    "turn",
};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);
constexpr int kMaxFitRounds = 6;

int parse_int(const std::string& text, const std::string& option) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < 0) {
    throw Error(option + ": '" + text + "' is not a non-negative integer");
  }
  return value;
}

}  // namespace

LengthRange parse_length_range(const std::string& text, const std::string& option) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    const int n = parse_int(text, option);
    return {n, n};
  }
  LengthRange r{parse_int(text.substr(0, colon), option), parse_int(text.substr(colon + 1), option)};
  if (r.min_tokens > r.max_tokens) throw Error(option + ": range '" + text + "' has min > max");
  return r;
}

int sample_length(const LengthRange& range, std::mt19937_64& rng) {
  if (range.min_tokens == range.max_tokens) return range.min_tokens;
  return std::uniform_int_distribution<int>(range.min_tokens, range.max_tokens)(rng);
}

std::vector<double> arrival_times_s(size_t n, double rate, double burstiness, uint64_t seed) {
  std::vector<double> times(n, 0.0);
  if (std::isinf(rate)) return times;
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  double t = 0;
  for (size_t i = 0; i < n; ++i) {
    t += gap(rng);
    times[i] = t;
  }
  return times;
}

PromptBuilder::PromptBuilder(TokenCounter counter, uint64_t seed)
    : counter_(std::move(counter)), rng_(seed) {}

std::string PromptBuilder::words_text(const std::vector<int>& word_ids, size_t count) const {
  std::string text;
  for (size_t i = 0; i < count && i < word_ids.size(); ++i) {
    if (i > 0) text += ' ';
    text += kWords[word_ids[i]];
  }
  return text;
}

std::string PromptBuilder::build(int target_tokens) {
  measured_ = false;
  if (target_tokens <= 0) return "";
  // Enough words for any correction: a word is at least one token.
  std::vector<int> ids(static_cast<size_t>(target_tokens) * 2 + 8);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(kNumWords) - 1);
  for (int& id : ids) id = pick(rng_);
  size_t words = static_cast<size_t>(target_tokens);
  std::string best = words_text(ids, words);
  if (!counter_) return best;
  int best_error = std::numeric_limits<int>::max();
  for (int round = 0; round < kMaxFitRounds; ++round) {
    const std::string text = words_text(ids, words);
    const std::optional<int> count = counter_(text);
    if (!count) return best;  // no tokenizer: keep the one-token-per-word guess
    measured_ = true;
    const int error = *count - target_tokens;
    if (std::abs(error) < best_error) {
      best_error = std::abs(error);
      best = text;
    }
    if (error == 0) break;
    const long next = static_cast<long>(words) - error;
    words = static_cast<size_t>(std::clamp<long>(next, 1, static_cast<long>(ids.size())));
  }
  return best;
}

namespace {

// User messages of one JSONL line as turns; leading non-user messages as the prefix.
Conversation conversation_from_line(const nlohmann::json& line, const std::string& where,
                                    int max_turns) {
  if (!line.is_object() || !line.contains("messages") || !line["messages"].is_array()) {
    throw Error(where + ": expected an object with a \"messages\" array");
  }
  Conversation c;
  for (const auto& m : line["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      throw Error(where + ": every message needs a string \"role\"");
    }
    const std::string role = m["role"].get<std::string>();
    if (role == "user") {
      if (!m.contains("content") || !m["content"].is_string()) {
        throw Error(where + ": user message content must be a string");
      }
      if (static_cast<int>(c.turns.size()) < max_turns) {
        c.turns.push_back({m["content"].get<std::string>(), 0});
      }
    } else if (c.turns.empty() && role != "assistant") {
      c.prefix_messages.push_back(m);  // system / developer messages before the first user turn
    }
  }
  if (c.turns.empty()) throw Error(where + ": conversation has no user message");
  return c;
}

std::vector<Conversation> read_dataset(const std::string& path, int max_turns) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open dataset");
  std::vector<Conversation> out;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + ": invalid JSON: " + e.what());
    }
    out.push_back(conversation_from_line(j, where, max_turns));
  }
  if (out.empty()) throw Error(path + ": dataset has no conversations");
  return out;
}

}  // namespace

std::vector<Conversation> build_workload(const WorkloadOptions& options, PromptBuilder& prompts) {
  if (options.turns_per_user < 1) throw Error("--multi-turn must be >= 1");
  std::mt19937_64 rng(options.seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<Conversation> dataset;
  if (!options.dataset_path.empty()) dataset = read_dataset(options.dataset_path, options.turns_per_user);
  std::vector<Conversation> out;
  size_t remaining = options.num_requests;
  for (size_t i = 0; remaining > 0; ++i) {
    Conversation c;
    if (!dataset.empty()) {
      c = dataset[i % dataset.size()];
      if (c.turns.size() > remaining) c.turns.resize(remaining);
    } else {
      const size_t turns = std::min<size_t>(remaining, static_cast<size_t>(options.turns_per_user));
      for (size_t t = 0; t < turns; ++t) {
        c.turns.push_back({prompts.build(sample_length(options.input, rng)), 0});
      }
    }
    for (Turn& t : c.turns) t.max_tokens = sample_length(options.output, rng);
    remaining -= c.turns.size();
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace qs::loadtest
