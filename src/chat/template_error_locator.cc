#include "chat/template_error_locator.h"

#include <exception>
#include <vector>

#include "core/error.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;
using Pointer = ojson::json_pointer;

constexpr int kMaxFieldDepth = 4;  // messages[i] . tool_calls [j] . function . arguments

ojson prefix(const ojson& array, size_t n) {
  ojson out = ojson::array();
  for (size_t i = 0; i < n; ++i) out.push_back(array[i]);
  return out;
}

// Renders variants of one failing context and classifies each outcome, within a render budget.
class Locator {
 public:
  enum class Outcome { kOk, kSame, kOther, kOutOfBudget };

  Locator(const ChatTemplate& tmpl, const std::string& error) : tmpl_(tmpl), error_(error) {}

  Outcome render(const ojson& context) {
    if (renders_ >= kMaxLocateRenders) return Outcome::kOutOfBudget;
    ++renders_;
    try {
      tmpl_.render(context);
      return Outcome::kOk;
    } catch (const Error& e) {
      return error_ == e.what() ? Outcome::kSame : Outcome::kOther;
    } catch (const std::exception&) {
      return Outcome::kOther;
    }
  }

  // Shortest n in [1, size] such that the array at `at` cut to n elements still fails the same
  // way (with all `size` elements it does; fewer than 1 is taken as not failing).
  size_t shortest_failing_prefix(ojson& context, const Pointer& at) {
    const ojson full = context.at(at);
    size_t lo = 0;
    size_t hi = full.size();
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      context.at(at) = prefix(full, mid);
      const Outcome outcome = render(context);
      if (outcome == Outcome::kOutOfBudget) break;
      (outcome == Outcome::kSame ? hi : lo) = mid;
    }
    context.at(at) = prefix(full, hi);
    return hi;
  }

  // Appends ".key" for the key of the object at `at` to blame, then narrows into its value. In
  // order of preference: the first key whose removal lets `context` render; whose value replaced
  // by "" does (a value of a type the template cannot use: a method called on a number gives the
  // same error as on a missing field); whose removal changes the error (the template used it).
  // False when no key is to blame.
  bool narrow_object(ojson& context, const Pointer& at, std::string& path, int depth) {
    const ojson value = context.at(at);
    std::vector<std::string> keys;
    for (const auto& [key, sub] : value.items()) {
      if (depth == 0 && key == "role") continue;  // a role-less message is usually just skipped
      keys.push_back(key);
    }
    std::string changed;  // first key whose removal gave another error
    for (const std::string& key : keys) {
      ojson trial = context;
      trial.at(at).erase(key);
      const Outcome outcome = render(trial);
      if (outcome == Outcome::kOutOfBudget) return false;
      if (outcome == Outcome::kOther && changed.empty()) changed = key;
      if (outcome == Outcome::kOk) return blame(context, at, key, path, depth);
    }
    for (const std::string& key : keys) {
      ojson trial = context;
      trial.at(at)[key] = "";
      const Outcome outcome = render(trial);
      if (outcome == Outcome::kOutOfBudget) return false;
      if (outcome == Outcome::kOk) return blame(context, at, key, path, depth);
    }
    return !changed.empty() && blame(context, at, changed, path, depth);
  }

  bool blame(ojson& context, const Pointer& at, const std::string& key, std::string& path, int depth) {
    path += "." + key;
    narrow_value(context, at / key, path, depth + 1);
    return true;
  }

  void narrow_value(ojson& context, const Pointer& at, std::string& path, int depth) {
    if (depth >= kMaxFieldDepth) return;
    const ojson& value = context.at(at);
    if (value.is_object()) {
      narrow_object(context, at, path, depth);
    } else if (value.is_array() && !value.empty()) {
      const size_t n = shortest_failing_prefix(context, at);
      path += '[';
      path += std::to_string(n - 1);
      path += ']';
      narrow_value(context, at / (n - 1), path, depth + 1);
    }
  }

 private:
  const ChatTemplate& tmpl_;
  const std::string& error_;
  int renders_ = 0;
};

}  // namespace

std::optional<TemplateErrorLocation> locate_template_error(const ChatTemplate& tmpl, const ojson& context,
                                                           const std::string& error) {
  if (!context.is_object() || !context.contains("messages")) return std::nullopt;
  const ojson& messages = context["messages"];
  if (!messages.is_array() || messages.empty()) return std::nullopt;
  Locator locator(tmpl, error);
  ojson probe = context;
  probe["messages"] = ojson::array();
  if (locator.render(probe) == Locator::Outcome::kSame) return std::nullopt;  // not the messages' fault
  probe["messages"] = messages;
  const Pointer at_messages("/messages");
  const size_t n = locator.shortest_failing_prefix(probe, at_messages);
  TemplateErrorLocation location;
  location.message_index = n - 1;
  location.path = "messages[" + std::to_string(n - 1) + "]";
  if (!probe["messages"][n - 1].is_object() ||
      !locator.narrow_object(probe, at_messages / (n - 1), location.path, 0)) {
    location.path += ".role";
  }
  return location;
}

}  // namespace qs
