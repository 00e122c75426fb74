#include "server/response_builder.h"

#include <random>

#include "chat/output_parser.h"
#include "chat/tool_call_stream.h"
#include "server/generation_job.h"

namespace qs {
namespace {

using json = nlohmann::json;

std::string tool_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % 36];
  return id;
}

// Raw bytes of a token; ids past the tokenizer's vocabulary (embedding padding rows) have none.
std::string token_bytes_or_empty(const Tokenizer& tokenizer, int32_t token) {
  return token < tokenizer.vocab_size() ? tokenizer.token_bytes(token) : std::string();
}

json bytes_array(const std::string& bytes) {
  json out = json::array();
  for (unsigned char b : bytes) out.push_back(static_cast<int>(b));
  return out;
}

// Chat logprobs entry: {"token", "logprob", "bytes", "top_logprobs": [...]}.
json chat_logprob(const TokenLogprob& lp, const Tokenizer& tokenizer) {
  auto entry = [&](int32_t token, float logprob) {
    const std::string bytes = token_bytes_or_empty(tokenizer, token);
    return json{{"token", bytes}, {"logprob", logprob}, {"bytes", bytes_array(bytes)}};
  };
  json out = entry(lp.token, lp.logprob);
  json top = json::array();
  for (const auto& [token, logprob] : lp.top) top.push_back(entry(token, logprob));
  out["top_logprobs"] = top;
  return out;
}

// Characters (Unicode code points) in UTF-8 bytes: the bytes that are not continuation bytes
// (10xxxxxx), so a token holding part of a character counts only the part that starts it.
size_t utf8_chars(std::string_view bytes) {
  size_t n = 0;
  for (const unsigned char b : bytes) n += (b & 0xC0u) != 0x80u ? 1 : 0;
  return n;
}

// Completions logprobs: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. text_offset
// is where each token starts in the choice's text in characters (as OpenAI's and vLLM's, which
// count Python str characters); `text_offset` is the offset of the first token and, on return,
// of the token after the last.
json completion_logprobs(const std::vector<TokenLogprob>& lps, const Tokenizer& tokenizer, size_t& text_offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const auto& lp : lps) {
    const std::string bytes = token_bytes_or_empty(tokenizer, lp.token);
    tokens.push_back(bytes);
    token_logprobs.push_back(lp.logprob);
    json alternatives = json::object();
    for (const auto& [token, logprob] : lp.top) alternatives[token_bytes_or_empty(tokenizer, token)] = logprob;
    top.push_back(alternatives);
    offsets.push_back(text_offset);
    text_offset += utf8_chars(bytes);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top},
          {"text_offset", offsets}};
}

json tool_calls_json(const std::vector<chat::ToolCall>& calls) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back({{"index", i},
                   {"id", tool_call_id()},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  }
  return out;
}

json chat_message(const GenerationJob& job, const ChoiceState& c, std::string& finish_reason) {
  json message = {{"role", "assistant"}};
  std::string content = c.text;
  if (job.split_reasoning) {
    chat::ReasoningSplit split = chat::split_reasoning(content);
    if (!split.reasoning_content.empty()) message["reasoning_content"] = split.reasoning_content;
    content = split.content;
  }
  if (job.parse_tool_calls) {
    chat::ToolCallParse parsed = chat::parse_tool_calls(content);
    if (!parsed.tool_calls.empty()) {
      json calls = tool_calls_json(parsed.tool_calls);
      for (auto& call : calls) call.erase("index");
      message["tool_calls"] = calls;
      content = parsed.content;
      // A generation cut by max_tokens stays "length" (OpenAI: the output was truncated; a
      // further call may have been cut), whatever calls were complete before the cut.
      if (finish_reason != "length") finish_reason = "tool_calls";
    }
  }
  message["content"] = content.empty() && message.contains("tool_calls") ? json(nullptr) : json(content);
  return message;
}

}  // namespace

std::string sse_data(const json& payload) {
  return "data: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json usage_json(const GenerationJob& job, const std::vector<ChoiceState>& choices) {
  int64_t completion = 0;
  for (const auto& c : choices) completion += c.completion_tokens;
  const auto prompt = static_cast<int64_t>(job.prompt_ids.size());
  const int64_t cached = choices.empty() ? 0 : choices.front().cached_tokens;
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json build_response(const GenerationJob& job, const std::vector<ChoiceState>& choices,
                    const Tokenizer& tokenizer) {
  json out_choices = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceState& c = choices[i];
    std::string finish_reason = c.finish_reason;
    json choice = {{"index", i}};
    if (job.api == GenerationJob::Api::kChat) {
      choice["message"] = chat_message(job, c, finish_reason);
      json lp = nullptr;
      if (job.logprobs) {
        lp = json{{"content", json::array()}};
        for (const auto& entry : c.logprobs) lp["content"].push_back(chat_logprob(entry, tokenizer));
      }
      choice["logprobs"] = lp;
    } else {
      const std::string prefix = job.echo ? job.prompt_text : std::string();
      choice["text"] = prefix + c.text;
      size_t offset = utf8_chars(prefix);
      choice["logprobs"] = job.logprobs ? completion_logprobs(c.logprobs, tokenizer, offset) : json(nullptr);
    }
    choice["finish_reason"] = finish_reason;
    if (job.report_stop_cause) choice["stop_cause"] = c.stop_cause;
    out_choices.push_back(choice);
  }
  return {{"id", job.id},
          {"object", job.api == GenerationJob::Api::kChat ? "chat.completion" : "text_completion"},
          {"created", job.created},
          {"model", job.model},
          {"choices", out_choices},
          {"usage", usage_json(job, choices)}};
}

StreamEncoder::StreamEncoder(const GenerationJob& job, const Tokenizer& tokenizer, size_t n_choices)
    : job_(job), tokenizer_(tokenizer), text_offsets_(n_choices, 0) {
  for (size_t i = 0; i < n_choices; ++i) {
    splitters_.push_back(job.split_reasoning ? std::make_unique<chat::ReasoningStreamSplitter>() : nullptr);
    tool_parsers_.push_back(job.parse_tool_calls ? std::make_unique<chat::ToolCallStreamParser>() : nullptr);
  }
}

StreamEncoder::~StreamEncoder() = default;

json StreamEncoder::chunk(json choice) const {
  json c = {{"id", job_.id},
            {"object", job_.api == GenerationJob::Api::kChat ? "chat.completion.chunk" : "text_completion"},
            {"created", job_.created},
            {"model", job_.model},
            {"choices", json::array({std::move(choice)})}};
  if (job_.include_usage) c["usage"] = nullptr;
  return c;
}

std::string StreamEncoder::role_chunks() {
  if (job_.api != GenerationJob::Api::kChat) return {};
  std::string out;
  for (size_t i = 0; i < splitters_.size(); ++i) {
    out += sse_data(chunk({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                           {"logprobs", nullptr}, {"finish_reason", nullptr}}));
  }
  return out;
}

std::string StreamEncoder::event_chunks(size_t index, const EngineEvent& event, const ChoiceState& state) {
  std::string out;
  if (event.kind == EngineEvent::Kind::kError) {
    // The fields the same failure has in a non-streaming error body (engine_api_error).
    const ApiError error = engine_api_error(event.error_code, event.error, job_.structured_param);
    return sse_data({{"error", {{"message", event.error}, {"type", error.type()},
                                {"param", error.param().empty() ? json(nullptr) : json(error.param())},
                                {"code", error.code().empty() ? json(nullptr) : json(error.code())}}}});
  }
  const bool finished = event.kind == EngineEvent::Kind::kFinished;
  if (job_.api == GenerationJob::Api::kCompletion) {
    if (event.text.empty() && !finished) return {};
    json choice = {{"index", index}, {"text", event.text}, {"finish_reason", nullptr}};
    choice["logprobs"] = job_.logprobs ? completion_logprobs(event.logprobs, tokenizer_, text_offsets_[index]) : json(nullptr);
    if (finished) choice["finish_reason"] = state.finish_reason;
    return sse_data(chunk(choice));
  }
  std::string reasoning, content = event.text;
  if (splitters_[index]) {
    chat::ReasoningDelta d = splitters_[index]->push(event.text);
    if (finished) {
      chat::ReasoningDelta rest = splitters_[index]->flush();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
    }
    reasoning = std::move(d.reasoning);
    content = std::move(d.content);
  }
  json tool_deltas = json::array();
  if (tool_parsers_[index]) {
    chat::ToolStreamOutput t = tool_parsers_[index]->push(content);
    if (finished) {
      chat::ToolStreamOutput rest = tool_parsers_[index]->flush();
      t.content += rest.content;
      t.calls.insert(t.calls.end(), rest.calls.begin(), rest.calls.end());
    }
    content = std::move(t.content);
    for (const chat::ToolCallDelta& d : t.calls) {
      // One entry per call index in a chunk, as OpenAI streams them: a later fragment of the call
      // the previous entry already carries is appended to that entry's arguments.
      if (!d.first && !tool_deltas.empty() && tool_deltas.back()["index"] == d.index) {
        json& args = tool_deltas.back()["function"]["arguments"];
        args = args.get<std::string>() + d.arguments;
        continue;
      }
      if (d.first) {
        tool_deltas.push_back({{"index", d.index}, {"id", tool_call_id()}, {"type", "function"},
                               {"function", {{"name", d.name}, {"arguments", d.arguments}}}});
      } else {
        tool_deltas.push_back({{"index", d.index}, {"function", {{"arguments", d.arguments}}}});
      }
    }
  }
  json delta = json::object();
  if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
  if (!content.empty()) delta["content"] = content;
  if (!tool_deltas.empty()) delta["tool_calls"] = std::move(tool_deltas);
  json lp = nullptr;
  if (job_.logprobs && !event.logprobs.empty()) {
    lp = json{{"content", json::array()}};
    for (const auto& entry : event.logprobs) lp["content"].push_back(chat_logprob(entry, tokenizer_));
  }
  if (!delta.empty() || !lp.is_null()) {
    out += sse_data(chunk({{"index", index}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", nullptr}}));
  }
  if (finished) {
    std::string finish_reason = state.finish_reason;
    if (tool_parsers_[index] && tool_parsers_[index]->n_calls() > 0 && finish_reason != "length") finish_reason = "tool_calls";
    json finish = {{"index", index}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
    if (job_.report_stop_cause) finish["stop_cause"] = state.stop_cause;
    out += sse_data(chunk(std::move(finish)));
  }
  return out;
}

std::string StreamEncoder::final_chunks(const std::vector<ChoiceState>& choices, const json* timings) {
  std::string out;
  if (job_.include_usage || timings != nullptr) {
    json last = {{"id", job_.id},
                 {"object", job_.api == GenerationJob::Api::kChat ? "chat.completion.chunk" : "text_completion"},
                 {"created", job_.created},
                 {"model", job_.model},
                 {"choices", json::array()}};
    if (job_.include_usage) last["usage"] = usage_json(job_, choices);
    if (timings != nullptr) last["timings"] = *timings;
    out += sse_data(last);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace qs
