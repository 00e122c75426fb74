// `qwenserve generate`: stream a completion of a prompt, then report prompt/generated token
// counts, TTFT and prefill/decode speed.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/number_validators.h"
#include "cli/commands.h"
#include "cli/draft_model.h"
#include "cli/runtime.h"
#include "cli/spec_flags.h"
#include "core/error.h"
#include "engine/generator.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace qs::cli {
namespace {

struct GenerateOptions {
  RuntimeOptions runtime;
  std::string prompt;
  bool chat = false;
  std::string system;
  int32_t max_tokens = 128;
  float temperature = 0.8f;
  float top_p = 0.95f;
  int32_t top_k = 40;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  std::optional<uint64_t> seed;
  bool json = false;
  SpecFlags spec;
};

// ChatML, the format of Qwen's chat template for a plain (no tools) conversation.
std::string chatml_prompt(const std::string& system, const std::string& user) {
  std::string text;
  if (!system.empty()) text += "<|im_start|>system\n" + system + "<|im_end|>\n";
  text += "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
  return text;
}

std::vector<int32_t> stop_tokens(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  if (auto eos = tokenizer.eos_id()) ids.push_back(*eos);
  for (const char* literal : {"<|im_end|>", "<|endoftext|>"}) {
    if (auto id = tokenizer.token_to_id(literal)) ids.push_back(*id);
  }
  return ids;
}

int run_generate(const GenerateOptions& opt) {
  std::string draft_path;
  const SpecDecodeOptions spec = opt.spec.resolve(&draft_path);  // a bad --speculative-config fails before loading
  Runtime rt = make_runtime(opt.runtime);
  const auto tokenizer = load_tokenizer(*rt.model);
  DraftModel draft;
  if (spec.draft_model) {
    // KV for one sequence of the context plus the k - 1 drafts computed past it.
    draft = load_draft_model(draft_path, opt.runtime, *rt.model, *tokenizer, rt.backend->limits(),
                             static_cast<int32_t>(kv_blocks_for_context(rt.ctx_tokens + kMaxDraftTokens)));
    if (!opt.json) std::fprintf(stderr, "%s\n", draft.describe().c_str());
  }
  const std::string text = opt.chat ? chatml_prompt(opt.system, opt.prompt) : opt.prompt;
  const std::vector<int32_t> prompt_ids = tokenizer->encode(text);
  const int64_t model_vocab = rt.model->config.vocab_size;
  for (const int32_t id : prompt_ids) {
    if (id < 0 || id >= model_vocab) {
      throw Error(rt.model->path + ": the tokenizer (" + rt.model->tokenizer_source() +
                  ") gives prompt token id " + std::to_string(id) +
                  ", outside the model's vocabulary of " + std::to_string(model_vocab) +
                  " tokens (tokenizer and weights do not match)");
    }
  }

  GenerationOptions gen;
  gen.max_tokens = opt.max_tokens;
  gen.sampling.temperature = opt.temperature;
  gen.sampling.top_p = opt.top_p;
  gen.sampling.top_k = opt.top_k;
  gen.sampling.min_p = opt.min_p;
  gen.sampling.repetition_penalty = opt.repetition_penalty;
  gen.sampling.seed = opt.seed;
  gen.stop_token_ids = stop_tokens(*tokenizer);
  gen.spec = spec;

  IncrementalDecoder decoder(*tokenizer);
  std::string full_text;
  auto emit = [&](const std::string& piece) {
    full_text += piece;
    if (!opt.json && !piece.empty()) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
  };
  Generator generator(*rt.backend, draft.backend.get());
  const GenerationResult result = generator.run(prompt_ids, gen, [&](int32_t token) {
    const bool is_stop = std::find(gen.stop_token_ids.begin(), gen.stop_token_ids.end(), token) !=
                         gen.stop_token_ids.end();
    // Embedding rows past the tokenizer's vocabulary (Qwen pads 151669 tokens to 151936 rows)
    // have no text: a model may still sample them.
    if (!is_stop && token < tokenizer->vocab_size()) emit(decoder.feed(token));
  });
  emit(decoder.flush());

  if (opt.json) {
    nlohmann::json out = {
        {"text", full_text},
        {"token_ids", result.output_ids},
        {"prompt_token_ids", prompt_ids},
        {"finish_reason", result.finish_reason},
        {"prompt_tokens", prompt_ids.size()},
        {"generated_tokens", result.output_ids.size()},
        {"timings",
         {{"ttft_ms", result.ttft_ms},
          {"prefill_ms", result.prefill_ms},
          {"decode_ms", result.decode_ms},
          {"prefill_tokens_per_second", result.prefill_tokens_per_second()},
          {"decode_tokens_per_second", result.decode_tokens_per_second()}}},
    };
    if (gen.spec.enabled()) {
      out["speculative"] = {{"method", gen.spec.draft_model ? "draft_model" : "ngram"},
                            {"draft_tokens", result.spec_draft_tokens},
                            {"accepted_tokens", result.spec_accepted_tokens},
                            {"decode_steps", result.decode_steps},
                            {"propose_ms", result.spec_propose_ms},
                            {"propose_steps", result.spec_propose_steps}};
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr,
                 "prompt tokens: %zu, generated tokens: %zu, finish: %s\n"
                 "TTFT: %.1f ms, prefill: %.2f tokens/s, decode: %.2f tokens/s (threads: %d)\n",
                 prompt_ids.size(), result.output_ids.size(), result.finish_reason.c_str(),
                 result.ttft_ms, result.prefill_tokens_per_second(),
                 result.decode_tokens_per_second(), rt.threads);
    if (gen.spec.enabled()) {
      const double rate = result.spec_draft_tokens > 0
                              ? static_cast<double>(result.spec_accepted_tokens) / static_cast<double>(result.spec_draft_tokens)
                              : 0.0;
      const double propose_ms_per_step =
          result.spec_propose_steps > 0 ? result.spec_propose_ms / static_cast<double>(result.spec_propose_steps) : 0.0;
      std::fprintf(stderr, "speculative (%s): %lld drafts, %lld accepted (%.2f), %lld decode steps, drafting %.2f ms per step\n",
                   gen.spec.draft_model ? "draft model" : "ngram", static_cast<long long>(result.spec_draft_tokens),
                   static_cast<long long>(result.spec_accepted_tokens), rate, static_cast<long long>(result.decode_steps),
                   propose_ms_per_step);
    }
  }
  return 0;
}

}  // namespace

Command register_generate(CLI::App& app) {
  auto opt = std::make_shared<GenerateOptions>();
  opt->runtime.add_to(app);
  app.add_option("-p,--prompt", opt->prompt, "Prompt text")->required();
  app.add_flag("--chat", opt->chat, "Wrap the prompt as one user turn in ChatML");
  app.add_option("--system", opt->system, "System message (with --chat)");
  app.add_option("-n,--max-tokens", opt->max_tokens, "Tokens to generate at most")
      ->check(kPositive)->capture_default_str();
  app.add_option("--temperature", opt->temperature, "Sampling temperature; 0 = greedy")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--top-p", opt->top_p, "Nucleus sampling mass")->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--top-k", opt->top_k, "Keep the k most likely tokens; 0 = off")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--min-p", opt->min_p, "Drop tokens below min_p * p_max")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--repetition-penalty", opt->repetition_penalty, "CTRL repetition penalty")
      ->check(kPositive)->capture_default_str();
  app.add_option("--seed", opt->seed, "RNG seed (same seed, same tokens)")->check(kSeed);
  app.add_flag("--json", opt->json, "Print one JSON object instead of streaming text");
  opt->spec.add_to(app);
  return [opt] { return run_generate(*opt); };
}

}  // namespace qs::cli
