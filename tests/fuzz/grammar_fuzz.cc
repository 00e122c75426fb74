// Structured-output grammars (src/constrained/): GrammarCompiler on a fuzzed JSON Schema, regex,
// choice list or GBNF source over a small byte-level vocabulary, then a GrammarMatcher driven by
// fuzzed tokens.
//
// Input layout (FuzzedDataProvider): the source kind (last byte), the source text (a string from
// the front), then token picks.
// Invariants: a bad source only throws qs::Error (compile limits keep every compile small, and a
// mask past CompileLimits::max_mask_steps or a state past max_live_parses throws instead of
// running for seconds); at
// every step the allowed-token bitmask agrees with the exact parser (a token is in the mask iff
// accept_token takes it); a stop token is allowed iff can_terminate(); after rollback(k) the mask
// is the one computed k steps earlier.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constrained/grammar_compiler.h"
#include "constrained/grammar_matcher.h"
#include "core/error.h"
#include "fuzz_support.h"

namespace {

using qs::fuzz::check;
namespace qc = qs::constrained;

// Every single byte, some multi-byte tokens a JSON / text model has, and a stop token (last id).
std::shared_ptr<const qc::TokenVocabulary> vocabulary() {
  static const std::shared_ptr<const qc::TokenVocabulary> vocab = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"{\"", "\":", "\": \"", "\",", "\"}", "true", "false", "null", "  ", "\n", "12", "3.5", "-0",
                          "e+10", "abc", "name", "\"name\"", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "[1,", "]}",
                          "\\u00", "\\n", "yes", "no"}) {
      tokens.emplace_back(t);
    }
    tokens.emplace_back();  // the stop token: no bytes
    const int32_t stop = static_cast<int32_t>(tokens.size()) - 1;
    const int32_t rows = static_cast<int32_t>(tokens.size()) + 3;  // padded logits rows
    return std::make_shared<const qc::TokenVocabulary>(std::move(tokens), std::vector<int32_t>{stop},
                                                       std::vector<int32_t>{}, rows);
  }();
  return vocab;
}

bool allowed(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id / 32] >> (id % 32)) & 1u; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int kind = in.ConsumeIntegralInRange<int>(0, 4);
  const std::string text = in.ConsumeRandomLengthString(2048);
  qc::CompileLimits limits;
  limits.max_symbols = 20'000;
  limits.max_parser_states = 20'000;
  limits.max_seconds = 2;
  limits.max_schema_depth = 32;
  limits.max_repeat = 256;
  limits.max_mask_steps = 200'000;  // a mask past it throws qs::Error (a 400 / failed request)
  qc::GrammarCompiler compiler(vocabulary(), limits, 0);
  qc::GrammarSource source{static_cast<qc::GrammarKind>(kind), text};
  std::shared_ptr<const qc::CompiledGrammar> grammar;
  try {
    grammar = compiler.compile(source);
  } catch (const qs::Error&) {
    return 0;
  }
  const std::shared_ptr<const qc::TokenVocabulary>& vocab = vocabulary();
  const int32_t stop = vocab->stop_ids().front();
  qc::GrammarMatcher matcher(grammar);
  std::vector<std::vector<uint32_t>> masks;  // masks[k]: the mask after k accepted tokens
  for (int step = 0; step < 64 && in.remaining_bytes() > 0 && !matcher.is_terminated(); ++step) {
    std::vector<uint32_t> mask(static_cast<size_t>(matcher.mask_words()));
    try {
      matcher.fill_next_token_bitmask(mask.data());
    } catch (const qs::Error&) {
      return 0;  // the mask work limit: the engine fails that request
    }
    check(allowed(mask, stop) == matcher.can_terminate(), "stop token in the mask != can_terminate()");
    for (int32_t id = vocab->size(); id < vocab->rows(); ++id) check(!allowed(mask, id), "padding row allowed");
    masks.resize(std::max(masks.size(), matcher.num_accepted() + 1));
    masks[matcher.num_accepted()] = mask;
    const int32_t id = in.ConsumeIntegralInRange<int32_t>(0, vocab->size() - 1);
    const bool in_mask = allowed(mask, id);
    bool accepted = false;
    try {
      accepted = matcher.accept_token(id);
    } catch (const qs::Error&) {
      return 0;  // the live-parse limit: the engine fails that request
    }
    check(in_mask == accepted, "token " + std::to_string(id) + ": mask says " + (in_mask ? "allowed" : "rejected") +
                                   ", accept_token says " + (accepted ? "accepted" : "rejected"));
  }
  const size_t n = matcher.num_accepted();
  if (n > 0 && !matcher.is_terminated()) {
    const size_t back = 1 + in.ConsumeIntegralInRange<size_t>(0, n - 1);
    matcher.rollback(back);
    std::vector<uint32_t> mask(static_cast<size_t>(matcher.mask_words()));
    matcher.fill_next_token_bitmask(mask.data());  // computed (or cached) before: within the limit
    check(matcher.num_accepted() == n - back, "rollback left the wrong number of tokens");
    if (n - back < masks.size()) check(mask == masks[n - back], "mask after rollback differs from the mask at that step");
  }
  return 0;
}
