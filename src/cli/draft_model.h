// The draft model of speculative decoding for `generate` and `serve`: loaded beside the target,
// checked against its tokenizer, and run on its own CPU backend instance with its own paged KV
// cache (engine/draft_model_proposer.h drives it).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "cli/runtime.h"
#include "tokenizer/tokenizer.h"

namespace qs::cli {

struct DraftModel {
  RuntimeModel model;
  std::unique_ptr<Backend> backend;  // prepared, with KV storage
  int32_t kv_blocks = 0;
  std::string describe() const;      // "draft model PATH (N layers, hidden H), K KV blocks"
};

/// Loads the draft model at `path` with the target's --threads, --no-mmap, --mlock and
/// --kv-cache-type (never --quantize: the draft is run as stored), refuses it when its vocabulary
/// or tokenizer differs from the target's (engine/draft_model_check.h: both files and the
/// difference named), and prepares a CPU backend for batches of `limits.max_batch_tokens`,
/// `limits.max_seqs` sequences, contexts of limits.max_context_tokens (capped by the draft's
/// max_position_embeddings) and `kv_blocks` KV blocks. Throws qs::Error.
DraftModel load_draft_model(const std::string& path, const RuntimeOptions& target_options,
                            const LoadedModel& target, const Tokenizer& target_tokenizer,
                            const BackendLimits& limits, int32_t kv_blocks, int worker_nice = 0);

}  // namespace qs::cli
