// Jinja chat templates (chat/chat_template.h, src/jinja/): parse + render of a fuzzed template
// with fuzzed data, and the real Qwen3 template with fuzzed messages.
//
// Input layout (FuzzedDataProvider): a mode byte; mode 0: a template source, then a JSON context;
// mode 1: JSON for the `messages` / `tools` of the Qwen3 template (and the fixture templates).
// Invariants: a bad template or context only throws qs::Error; a template and context that are
// valid UTF-8 render to valid UTF-8 (string slicing, filters, truncation must not split a
// character).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"
#include "fuzz_support.h"

namespace {

using json = nlohmann::ordered_json;
using qs::fuzz::check;

json parse_or(const std::string& text, json fallback) {
  // nlohmann rejects invalid UTF-8 in strings, so a parsed context is valid UTF-8.
  json value = json::parse(text, nullptr, false);
  if (value.is_discarded()) return fallback;
  return value;
}

void render_checked(const qs::ChatTemplate& tmpl, const json& context, bool source_valid) {
  try {
    const std::string out = tmpl.render(context);
    if (source_valid) check(qs::fuzz::is_valid_utf8(out), "rendered template is not valid UTF-8");
  } catch (const qs::Error&) {
  }
}

const std::vector<qs::ChatTemplate>& fixture_templates() {
  static const std::vector<qs::ChatTemplate> templates = [] {
    std::vector<qs::ChatTemplate> out;
    for (const char* name : {"chatml_tools", "llama3_style", "mistral_style", "qwen3"}) {
      out.emplace_back(qs::fuzz::read_source_file(std::string("tests/fixtures/chat/templates/") + name + ".jinja"));
    }
    return out;
  }();
  return templates;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  qs::fuzz::load_qwen3();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint8_t mode = in.ConsumeIntegral<uint8_t>() % 2;
  if (mode == 0) {
    const std::string source = in.ConsumeRandomLengthString(4096);
    json context = parse_or(in.ConsumeRemainingBytesAsString(),
                            json{{"messages", json::array({{{"role", "user"}, {"content", "hi \xc3\xa9"}}})}});
    if (!context.is_object()) context = json{{"value", context}};
    std::optional<qs::ChatTemplate> tmpl;
    try {
      tmpl.emplace(source);
    } catch (const qs::Error&) {
      return 0;
    }
    render_checked(*tmpl, context, qs::fuzz::is_valid_utf8(source));
    return 0;
  }
  const bool add_generation_prompt = in.ConsumeBool();
  const bool enable_thinking = in.ConsumeBool();
  json value = parse_or(in.ConsumeRemainingBytesAsString(), json::array());
  json context = json::object();
  if (value.is_object() && value.contains("messages")) {
    context = value;
  } else {
    context["messages"] = value;
  }
  context["add_generation_prompt"] = add_generation_prompt;
  context["enable_thinking"] = enable_thinking;
  context["bos_token"] = "";
  context["eos_token"] = "<|im_end|>";
  render_checked(qs::fuzz::qwen3_chat_template(), context, true);
  for (const qs::ChatTemplate& tmpl : fixture_templates()) render_checked(tmpl, context, true);
  return 0;
}
