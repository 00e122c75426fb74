// prompt_flops against the operation count worked out by hand from Qwen3-4B-Instruct-2507's
// config.json (hidden 2560, 36 layers, 32 query / 8 KV heads of 128, intermediate 9728, vocab
// 151936).
#include "cli/bench_flops.h"

#include <gtest/gtest.h>

namespace qs::cli {
namespace {

TEST(BenchFlops, Qwen3FourBPromptCountsMatricesLogitsAndCausalAttention) {
  ModelConfig c;
  c.hidden_size = 2560;
  c.num_hidden_layers = 36;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 9728;
  c.vocab_size = 151936;
  // Per layer: q 2560x4096, k and v 2560x1024, o 4096x2560, gate/up/down 2560x9728 each
  // = 10,485,760 + 5,242,880 + 10,485,760 + 74,711,040 = 100,925,440 weights.
  // pp512: 2 * 512 * 36 * 100,925,440 = 3,720,515,420,160 (matrices)
  //      + 2 * 151,936 * 2560          =       777,912,320 (one logits row)
  //      + 4 * 36 * 4096 * 512 * 513/2 =    77,460,406,272 (attention)
  EXPECT_DOUBLE_EQ(prompt_flops(c, 512), 3720515420160.0 + 777912320.0 + 77460406272.0);
  // One token: its own position only.
  EXPECT_DOUBLE_EQ(prompt_flops(c, 1), 2.0 * 36 * 100925440.0 + 777912320.0 + 4.0 * 36 * 4096);
}

}  // namespace
}  // namespace qs::cli
