// choose_decode_prefetch (backend/cpu/decode_prefetch.h): the environment override, and no
// measurement below 256 MiB of packed weights. The timing decision itself depends on the machine
// and is reported, not asserted (its effect is measured by bench, see the header).
#include "backend/cpu/decode_prefetch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "backend/cpu/kernels/packed_rows.h"

namespace qs {
namespace {

// Restores the process-wide setting and the environment after each test.
class DecodePrefetchTest : public ::testing::Test {
 protected:
  void SetUp() override { before_ = kernels::packed_decode_prefetch(); }
  void TearDown() override {
    kernels::set_packed_decode_prefetch(before_);
    unsetenv("QS_CPU_DECODE_PREFETCH");
  }
  bool before_ = true;
};

// One layer whose q_proj is a small packed Q8_0 matrix [16, 32].
struct SmallModel {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(kernels::packed_matrix_bytes(DType::Q8_0, 16, 32));
  TensorView view{"q", DType::Q8_0, {16, 32}, bytes.data(), bytes.size()};
  ModelWeights weights;
  SmallModel() {
    view.layout = TensorLayout::kPackedRows16;
    LayerWeights layer{};
    layer.q_proj = &view;
    weights.layers.push_back(layer);
  }
};

TEST_F(DecodePrefetchTest, EnvironmentForcesTheChoiceWithoutMeasuring) {
  SmallModel m;
  ThreadPool pool(1);
  kernels::MatmulScratch scratch(1, 32, 1);
  setenv("QS_CPU_DECODE_PREFETCH", "0", 1);
  kernels::set_packed_decode_prefetch(true);
  DecodePrefetchChoice c = choose_decode_prefetch(m.weights, pool, scratch);
  EXPECT_FALSE(c.prefetch);
  EXPECT_FALSE(c.measured);
  EXPECT_FALSE(kernels::packed_decode_prefetch());
  EXPECT_EQ(c.describe(), "decode prefetch off");
  setenv("QS_CPU_DECODE_PREFETCH", "1", 1);
  c = choose_decode_prefetch(m.weights, pool, scratch);
  EXPECT_TRUE(c.prefetch);
  EXPECT_TRUE(kernels::packed_decode_prefetch());
}

TEST_F(DecodePrefetchTest, SmallModelsKeepTheCurrentSettingUnmeasured) {
  SmallModel m;
  ThreadPool pool(1);
  kernels::MatmulScratch scratch(1, 32, 1);
  for (bool setting : {false, true}) {
    kernels::set_packed_decode_prefetch(setting);
    const DecodePrefetchChoice c = choose_decode_prefetch(m.weights, pool, scratch);
    EXPECT_FALSE(c.measured);
    EXPECT_EQ(c.prefetch, setting);
    EXPECT_EQ(kernels::packed_decode_prefetch(), setting);
  }
}

}  // namespace
}  // namespace qs
