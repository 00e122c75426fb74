// Degenerate-output guard: trips on crafted blank runs and n-gram loops, not on normal text.
#include <gtest/gtest.h>

#include <string>

#include "engine/output_guard.h"

namespace qs {
namespace {

// Feeds `text` one byte per token (the token id is the byte); returns the first cause and the
// number of tokens fed until then (or all of them).
std::pair<std::string, size_t> feed_bytes(OutputGuard& guard, const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const std::string piece(1, text[i]);
    const std::string_view cause = guard.push(static_cast<unsigned char>(text[i]), is_blank_or_punct(piece));
    if (!cause.empty()) return {std::string(cause), i + 1};
  }
  return {"", text.size()};
}

TEST(OutputGuard, ClassifiesBlankAndPunctuation) {
  EXPECT_TRUE(is_blank_or_punct(" \n\t"));
  EXPECT_TRUE(is_blank_or_punct("...!?"));
  EXPECT_TRUE(is_blank_or_punct("----"));
  EXPECT_FALSE(is_blank_or_punct(""));
  EXPECT_FALSE(is_blank_or_punct(" a"));
  EXPECT_FALSE(is_blank_or_punct("7"));
  EXPECT_FALSE(is_blank_or_punct("\xe4\xbd\xa0"));  // 你
}

TEST(OutputGuard, TripsOnMoreThanTheAllowedBlankRun) {
  OutputGuardOptions o;
  o.ngram_repeats = 0;  // blank rule alone
  OutputGuard guard(o);
  // Varied punctuation and spaces, no letters: the 65th token trips (more than 64).
  std::string blank;
  const std::string pool = " .,;:!?-\n\t()[]";
  for (int i = 0; i < 100; ++i) blank += pool[(i * 7) % pool.size()];
  const auto [cause, n] = feed_bytes(guard, blank);
  EXPECT_EQ(cause, "degenerate_blank_run");
  EXPECT_EQ(n, 65u);
}

TEST(OutputGuard, BlankRunResetsOnText) {
  OutputGuardOptions o;
  o.ngram_repeats = 0;
  OutputGuard guard(o);
  std::string text;
  for (int i = 0; i < 10; ++i) text += std::string(60, ' ') + "x";  // 60 blanks then a letter
  EXPECT_EQ(feed_bytes(guard, text).first, "");
}

TEST(OutputGuard, TripsOnTheSixteenthRepeatOfAnNgram) {
  for (const std::string gram : {"a", "ab", "the cat ", "0123456789abcdefghijklmnopqrstu"}) {
    OutputGuard guard;
    std::string text = "Once upon a time.";  // 17 tokens, no suffix that continues a gram
    for (int i = 0; i < 20; ++i) text += gram;
    const auto [cause, n] = feed_bytes(guard, text);
    EXPECT_EQ(cause, "degenerate_repetition") << gram;
    // Tripped exactly when the 16th copy is complete (a shorter period may trip earlier only if
    // the gram itself is periodic, which none of these is).
    EXPECT_EQ(n, 17 + 16 * gram.size()) << gram;
  }
}

TEST(OutputGuard, FifteenRepeatsDoNotTrip) {
  OutputGuard guard;
  std::string text;
  for (int i = 0; i < 15; ++i) text += "ab";
  text += "c";
  for (int i = 0; i < 15; ++i) text += "ab";
  EXPECT_EQ(feed_bytes(guard, text).first, "");
}

TEST(OutputGuard, NormalTextAndCodeDoNotTrip) {
  OutputGuard guard;
  const std::string prose =
      "The sky appears blue because molecules in the atmosphere scatter shorter wavelengths of "
      "sunlight more strongly than longer ones. This is called Rayleigh scattering; at sunset the "
      "light travels through more air, so the blues are scattered away and reds remain.\n\n";
  const std::string code =
      "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n"
      "for i in range(10):\n    print(i, fib(i))\n";
  const std::string table = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n";
  std::string all;
  for (int i = 0; i < 3; ++i) all += prose + code + table;
  EXPECT_EQ(feed_bytes(guard, all).first, "");
}

TEST(OutputGuard, DisabledNeverTrips) {
  OutputGuardOptions o;
  o.enabled = false;
  OutputGuard guard(o);
  EXPECT_EQ(feed_bytes(guard, std::string(500, 'a')).first, "");
  EXPECT_EQ(feed_bytes(guard, std::string(500, ' ')).first, "");
}

}  // namespace
}  // namespace qs
