// Degenerate-output guard: stops a generation that has fallen into a loop a sampler cannot leave
// (common with greedy decoding and small or quantized models), instead of burning the whole
// max_tokens budget. Two rules, checked after every generated token:
//   - blank run: more than `max_blank_run` consecutive tokens whose text is only whitespace or
//     ASCII punctuation (e.g. "\n\n\n...", "....", "----");
//   - repetition: the last `ngram_repeats * n` tokens are one n-gram (1 <= n <= max_ngram)
//     repeated `ngram_repeats` times in a row ("the the the ...", "A B C A B C ...").
// The engine then finishes the sequence with finish_reason "length" and the stop cause
// ("degenerate_blank_run" / "degenerate_repetition") in the request's log line.
// O(max_ngram) time per token: one run counter per period n.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace qs {

struct OutputGuardOptions {
  bool enabled = true;
  int32_t max_blank_run = 64;  // consecutive blank/punctuation-only tokens allowed; 0: rule off
  int32_t ngram_repeats = 16;  // repeats of one n-gram that trip the guard; 0: rule off
  int32_t max_ngram = 32;      // longest n-gram (period) checked, tokens
};

/// True when `text` is non-empty and every byte is ASCII whitespace or punctuation.
bool is_blank_or_punct(std::string_view text);

class OutputGuard {
 public:
  explicit OutputGuard(OutputGuardOptions options = {});

  /// Feeds one generated token; `blank` says whether its text is blank/punctuation-only (see
  /// is_blank_or_punct). Returns the stop cause once a rule trips ("degenerate_blank_run" or
  /// "degenerate_repetition"), else an empty view.
  std::string_view push(int32_t token, bool blank);

 private:
  OutputGuardOptions options_;
  std::vector<int32_t> history_;     // ring of the last max_ngram tokens
  int64_t n_tokens_ = 0;
  int64_t blank_run_ = 0;
  std::vector<int64_t> periodic_run_;  // [max_ngram + 1]: run of i with token[i] == token[i - n]
};

}  // namespace qs
