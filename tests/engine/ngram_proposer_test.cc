// N-gram prompt lookup: the longest key wins, the newest occurrence is used, the continuation
// wraps with the match's period, and nothing is proposed without a match.
#include <gtest/gtest.h>

#include <vector>

#include "engine/ngram_proposer.h"

namespace qs {
namespace {

using Ids = std::vector<int32_t>;

Ids propose(const Ids& tokens, int32_t n_max, int32_t n_min, int32_t k) {
  Ids out = {99};  // cleared by propose_ngram
  propose_ngram(tokens, n_max, n_min, k, out);
  return out;
}

TEST(NgramProposer, ProposesWhatFollowedTheLastOccurrenceOfTheKey) {
  // Key [2, 3] occurs at 1 (followed by 4 5 6) and at 6 (followed by 9 ...): the newest wins.
  const Ids tokens = {1, 2, 3, 4, 5, 6, 2, 3, 9, 8, 7, 2, 3};
  EXPECT_EQ(propose(tokens, 2, 1, 3), (Ids{9, 8, 7}));
  EXPECT_EQ(propose(tokens, 2, 1, 1), (Ids{9}));
}

TEST(NgramProposer, LongerKeysWinOverShorterOnes) {
  // Key [5, 3] (n = 2) matches at 0 -> 7 7; key [3] alone would match the newer 3 at 4 -> 1.
  const Ids tokens = {5, 3, 7, 7, 3, 1, 0, 5, 3};
  EXPECT_EQ(propose(tokens, 2, 1, 2), (Ids{7, 7}));
  EXPECT_EQ(propose(tokens, 1, 1, 2), (Ids{1, 0}));
  // ngram_min 2: without a 2-token match nothing is proposed.
  EXPECT_TRUE(propose({4, 1, 2, 8, 9, 2}, 3, 2, 2).empty());
  EXPECT_EQ(propose({4, 1, 2, 8, 9, 2}, 3, 1, 2), (Ids{8, 9}));
}

TEST(NgramProposer, ContinuationRepeatsWithTheMatchPeriod) {
  // A loop of period 3 (a b c a b c a b): the newest match of [a b] is 3 back, so the drafts run
  // on periodically: c a b c a.
  const Ids tokens = {10, 11, 12, 10, 11, 12, 10, 11};
  EXPECT_EQ(propose(tokens, 2, 1, 5), (Ids{12, 10, 11, 12, 10}));
  // A run of one token: period 1.
  EXPECT_EQ(propose({3, 5, 5, 5}, 3, 1, 4), (Ids{5, 5, 5, 5}));
}

TEST(NgramProposer, NothingWithoutAMatchOrRoom) {
  EXPECT_TRUE(propose({1, 2, 3, 4}, 3, 1, 4).empty());
  EXPECT_TRUE(propose({7}, 3, 1, 4).empty());
  EXPECT_TRUE(propose({}, 3, 1, 4).empty());
  EXPECT_TRUE(propose({1, 2, 1, 2}, 3, 1, 0).empty());
  // Keys never longer than tokens.size() - 1.
  EXPECT_EQ(propose({2, 2}, 8, 1, 2), (Ids{2, 2}));
}

}  // namespace
}  // namespace qs
