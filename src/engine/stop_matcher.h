// Streaming stop-string matcher: text goes in as it is decoded; only text that can no longer be
// the start of a stop string comes out, so no part of a stop string ever leaks to the client, even
// when it spans several tokens (OpenAI `stop` semantics: the stop string itself is not returned).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qs {

class StopMatcher {
 public:
  /// Empty strings in `stop_strings` are ignored.
  explicit StopMatcher(std::vector<std::string> stop_strings);

  struct Result {
    std::string text;      // safe to emit now (complete UTF-8 if the input was)
    bool stopped = false;  // a stop string was found; `text` ends right before it
  };

  /// Appends `delta` and returns what can be emitted. After a stop, further calls return nothing.
  /// With `may_stop` false (vLLM's min_tokens: no stop check before the output has min_tokens
  /// tokens) a complete stop string is passed through as text; only a suffix that may still begin
  /// one is held back, so a later call can match a stop string that ends in its own delta.
  Result push(std::string_view delta, bool may_stop = true);
  /// End of generation: returns the held-back text (it cannot complete a stop string any more).
  std::string flush();

 private:
  std::vector<std::string> stop_strings_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace qs
