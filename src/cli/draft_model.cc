#include "cli/draft_model.h"

#include <algorithm>
#include <new>

#include "core/error.h"
#include "engine/draft_model_check.h"

namespace qs::cli {

std::string DraftModel::describe() const {
  const ModelConfig& c = model.model->config;
  return "draft model " + model.model->path + " (" + std::to_string(c.num_hidden_layers) + " layers, hidden " +
         std::to_string(c.hidden_size) + ", cpu), " + std::to_string(kv_blocks) + " KV blocks";
}

DraftModel load_draft_model(const std::string& path, const RuntimeOptions& target_options,
                            const LoadedModel& target, const Tokenizer& target_tokenizer,
                            const BackendLimits& limits, int32_t kv_blocks, int worker_nice) {
  RuntimeOptions options = target_options;
  options.model_path = path;
  options.quantize.clear();
  options.device = "cpu";
  DraftModel draft;
  draft.model = load_runtime_model(options);
  const LoadedModel& loaded = *draft.model.model;
  const auto tokenizer = load_tokenizer(loaded);
  check_draft_model_compatible(target.path, target.config, target_tokenizer, loaded.path, loaded.config, *tokenizer);
  draft.backend = make_backend(options.backend_options(worker_nice));
  BackendLimits draft_limits = limits;
  draft_limits.max_context_tokens =
      std::min<int64_t>(limits.max_context_tokens, std::max<int64_t>(loaded.config.max_position_embeddings, 1));
  draft_limits.max_batch_tokens = std::min(draft_limits.max_batch_tokens, draft_limits.max_context_tokens);
  draft.backend->prepare(loaded.config, loaded.weights, draft_limits);
  try {
    draft.backend->allocate_kv(kv_blocks, parse_kv_dtype(options.kv_cache_type));
  } catch (const std::bad_alloc&) {
    throw Error("cannot allocate the draft model's KV cache (" + std::to_string(kv_blocks) + " blocks)");
  }
  draft.kv_blocks = kv_blocks;
  return draft;
}

}  // namespace qs::cli
