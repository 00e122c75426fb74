// qwenserve_grammar_walk: random walks over constrained-decoding masks, for the independent
// validator (tests/constrained/validate_walks.mjs checks the outputs with ajv / RegExp).
//
//   qwenserve_grammar_walk TOKENIZER_DIR CASES.json > walks.jsonl
//
// CASES.json: [{"name": str, "kind": "json_schema"|"json_object"|"regex"|"choices"|"gbnf",
//               "source": str or JSON value (schemas / choice lists may be given as JSON),
//               "seeds": int (default 4), "max_tokens": int (default 256)}, ...]
// Per case and seed, starting from the grammar's start state: fill the bitmask, pick one allowed
// token uniformly at random (std::mt19937_64 seeded with the seed), accept it; stop when a stop
// token was picked or after max_tokens. One JSON line per walk: {"name", "seed", "finished",
// "tokens", "text", "valid_utf8"}; a case whose compile fails prints {"name", "error"} once.
// Exit code 1 when a mask is empty or accept_token refuses a token its mask allowed.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "constrained/grammar_compiler.h"
#include "constrained/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += len;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace qs::constrained;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR CASES.json\n", argv[0]);
    return 2;
  }
  qs::Tokenizer tok(qs::load_tokenizer_json(std::string(argv[1]) + "/tokenizer.json"));
  std::vector<int32_t> stops;
  for (const char* s : {"<|im_end|>", "<|endoftext|>"}) {
    if (auto id = tok.token_to_id(s)) stops.push_back(*id);
  }
  auto vocab = TokenVocabulary::from_tokenizer(tok, 151936, stops);
  GrammarCompiler compiler(vocab);
  std::ifstream in(argv[2]);
  const nlohmann::ordered_json cases = nlohmann::ordered_json::parse(in);
  std::vector<uint32_t> mask(static_cast<size_t>(vocab->mask_words()));
  int status = 0;
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    const std::string kind = c.at("kind");
    std::string text = c.contains("source") ? (c["source"].is_string() ? c["source"].get<std::string>()
                                                                       : c["source"].dump())
                                            : "";
    GrammarSource src = kind == "json_schema" ? GrammarSource::json_schema(text)
                        : kind == "json_object" ? GrammarSource::json_object()
                        : kind == "regex"       ? GrammarSource::regex(text)
                        : kind == "choices"     ? GrammarSource{GrammarKind::kChoices, text}
                                                : GrammarSource::gbnf(text);
    std::shared_ptr<const CompiledGrammar> g;
    try {
      g = compiler.compile(src);
    } catch (const std::exception& e) {
      std::cout << nlohmann::json{{"name", name}, {"error", e.what()}}.dump() << "\n";
      continue;
    }
    const int seeds = c.value("seeds", 4);
    const int max_tokens = c.value("max_tokens", 256);
    for (int seed = 0; seed < seeds; ++seed) {
      GrammarMatcher m(g);
      std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919 + 17);
      std::string out;
      int n = 0;
      bool finished = false;
      std::vector<int32_t> allowed;
      for (; n < max_tokens && !finished; ++n) {
        m.fill_next_token_bitmask(mask.data());
        allowed.clear();
        for (int32_t id = 0; id < vocab->rows(); ++id) {
          if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
        }
        if (allowed.empty()) {
          std::cerr << name << ": empty mask after " << n << " tokens: " << out << "\n";
          status = 1;
          break;
        }
        const int32_t id = allowed[rng() % allowed.size()];
        if (!m.accept_token(id)) {
          std::cerr << name << ": allowed token " << id << " refused after: " << out << "\n";
          status = 1;
          break;
        }
        if (vocab->is_stop(id)) finished = true;
        else out += vocab->bytes(id);
      }
      std::cout << nlohmann::json{{"name", name}, {"seed", seed}, {"finished", finished},
                                  {"tokens", n}, {"valid_utf8", valid_utf8(out)},
                                  {"text", out}}
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    }
  }
  return status;
}
