// Chat prompts as the chat template renders them for vLLM's add_generation_prompt and
// continue_final_message (Hugging Face apply_chat_template semantics: the prompt ends right after
// the final message's text, with no end-of-turn), checked against ChatML text written out here and
// tokenized by the Qwen tokenizer; and the context limit's 400s, which name the field to change.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/chat_template.h"
#include "server/api_error.h"
#include "server/job_builder.h"
#include "support/tokenizer_test_support.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

const char* kChatMl =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

struct Fixture {
  ServerOptions options;
  ChatTemplate chat_template{kChatMl};
  JobContext ctx{options, test::qwen_tokenizer(), chat_template, 4096, 0};
};

ChatRequest chat(ojson messages, bool add_generation_prompt = true, bool continue_final_message = false) {
  ChatRequest r;
  r.messages = std::move(messages);
  r.add_generation_prompt = add_generation_prompt;
  r.continue_final_message = continue_final_message;
  return r;
}

const ojson kUserHi = {{"role", "user"}, {"content", "Hi"}};

TEST(JobBuilder, GenerationPromptOpensTheAssistantTurn) {
  Fixture f;
  EXPECT_EQ(render_chat_prompt(f.ctx, chat(ojson::array({kUserHi}))), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat_prompt(f.ctx, chat(ojson::array({kUserHi}), false)), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(JobBuilder, ContinueFinalMessageEndsRightAfterItsText) {
  Fixture f;
  const ojson messages = ojson::array({kUserHi, {{"role", "assistant"}, {"content", "Once upon"}}});
  EXPECT_EQ(render_chat_prompt(f.ctx, chat(messages, false, true)),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon");
  // A template that trims the message: cut after the trimmed text.
  const ojson spaced = ojson::array({kUserHi, {{"role", "assistant"}, {"content", "Once upon "}}});
  ChatTemplate trimming("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}");
  const JobContext ctx{f.options, test::qwen_tokenizer(), trimming, 4096, 0};
  EXPECT_EQ(render_chat_prompt(ctx, chat(spaced, false, true)), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon");
}

TEST(JobBuilder, ContinueFinalMessageWithoutTextIs400) {
  Fixture f;
  const ojson messages = ojson::array({kUserHi, {{"role", "assistant"}, {"content", nullptr}}});
  try {
    render_chat_prompt(f.ctx, chat(messages, false, true));
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "continue_final_message");
  }
}

TEST(JobBuilder, TemplateErrorsNameTheMessageAndField) {
  // Mistral / Llama-2 style role alternation: the 400 names the message that breaks it.
  Fixture f;
  const ChatTemplate alternating(
      "{%- for m in messages %}{%- if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
      "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif %}"
      "{{- m.content }}{%- endfor %}");
  const JobContext ctx{f.options, test::qwen_tokenizer(), alternating, 4096, 0};
  const ojson a = {{"role", "assistant"}, {"content", "ok"}};
  try {
    render_chat_prompt(ctx, chat(ojson::array({kUserHi, a, kUserHi, kUserHi})));
    FAIL() << "rendered";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "messages[3].role");
    const std::string message = e.what();
    EXPECT_NE(message.find("messages[3].role"), std::string::npos) << message;
    EXPECT_NE(message.find("Conversation roles must alternate"), std::string::npos) << message;
  }
  // A field of a type the template cannot use (here a string method on a number).
  const ChatTemplate stripping("{%- for m in messages %}{{- m.content.strip() }}{%- endfor %}");
  const JobContext ctx2{f.options, test::qwen_tokenizer(), stripping, 4096, 0};
  try {
    render_chat_prompt(ctx2, chat(ojson::array({kUserHi, {{"role", "assistant"}, {"content", 7}}})));
    FAIL() << "rendered";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "messages[1].content") << e.what();
  }
}

TEST(JobBuilder, ChatJobUsesTheRenderedPrompt) {
  Fixture f;
  const ojson messages = ojson::array({kUserHi, {{"role", "assistant"}, {"content", "Once upon"}}});
  const GenerationJob job = build_chat_job(chat(messages, false, true), f.ctx);
  EXPECT_EQ(job.prompt_ids, test::qwen_tokenizer().encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon"));
  EXPECT_EQ(job.id.rfind("chatcmpl-", 0), 0u) << job.id;
  EXPECT_EQ(job.choices.size(), 1u);
}

TEST(JobBuilder, PromptPlusMaxTokensBeyondTheContextIs400NamingMaxTokens) {
  Fixture f;
  f.ctx.context_tokens = 64;
  CompletionRequest r;
  r.prompt_ids = std::vector<int32_t>(10, 9707);
  r.fields.max_tokens = 55;
  try {
    build_completion_job(r, f.ctx);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "max_tokens");
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  }
  r.fields.max_tokens = 54;
  EXPECT_EQ(build_completion_job(r, f.ctx).max_tokens, 54);
  r.prompt_ids = std::vector<int32_t>(64, 9707);
  r.fields.max_tokens.reset();
  try {
    build_completion_job(r, f.ctx);
    FAIL() << "a prompt filling the context accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "prompt");
  }
}

TEST(JobBuilder, MaxTokensCapBoundsTheDefaultAndMinTokensRaisesIt) {
  Fixture f;
  f.options.max_tokens_cap = 100;
  f.options.default_max_tokens = 512;
  CompletionRequest r;
  r.prompt_ids = std::vector<int32_t>(10, 9707);
  // No max_tokens: the default, but never above --max-tokens-cap ("upper bound for max_tokens").
  EXPECT_EQ(build_completion_job(r, f.ctx).max_tokens, 100);
  f.options.max_tokens_cap = 2048;
  EXPECT_EQ(build_completion_job(r, f.ctx).max_tokens, 512);
  // min_tokens above the default raises it (vLLM's default is the whole context left).
  f.options.max_tokens_cap = 4000;
  r.fields.min_tokens = 3000;
  EXPECT_EQ(build_completion_job(r, f.ctx).max_tokens, 3000);
}

TEST(JobBuilder, MinTokensBeyondWhatTheRequestCanHaveIs400) {
  Fixture f;
  f.options.max_tokens_cap = 100;
  CompletionRequest r;
  r.prompt_ids = std::vector<int32_t>(10, 9707);
  r.fields.min_tokens = 90;
  EXPECT_EQ(build_completion_job(r, f.ctx).max_tokens, 100);
  EXPECT_EQ(build_completion_job(r, f.ctx).choices[0].min_tokens, 90);
  for (const std::optional<int32_t> max_tokens : {std::optional<int32_t>(), std::optional<int32_t>(150)}) {
    r.fields.max_tokens = max_tokens;
    r.fields.min_tokens = 120;  // above the cap, with or without max_tokens
    try {
      build_completion_job(r, f.ctx);
      FAIL() << "accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), "min_tokens");
      EXPECT_NE(std::string(e.what()).find("100"), std::string::npos) << e.what();
    }
  }
  // The context left after the prompt bounds it too.
  f.options.max_tokens_cap = 10000;
  f.ctx.context_tokens = 64;
  r.fields.max_tokens.reset();
  r.fields.min_tokens = 60;
  EXPECT_THROW(build_completion_job(r, f.ctx), ApiError);
  r.fields.min_tokens = 54;
  EXPECT_EQ(build_completion_job(r, f.ctx).max_tokens, 54);
}

TEST(JobBuilder, NChoicesGetOneEngineRequestEach) {
  Fixture f;
  CompletionRequest r;
  r.prompt_text = "Hello, world";
  r.fields.n = 3;
  const GenerationJob job = build_completion_job(r, f.ctx);
  EXPECT_EQ(job.id.rfind("cmpl-", 0), 0u) << job.id;
  ASSERT_EQ(job.choices.size(), 3u);
  EXPECT_NE(job.choices[0].id, job.choices[1].id);
  EXPECT_EQ(job.prompt_ids, (std::vector<int32_t>{9707, 11, 1879}));
}

}  // namespace
}  // namespace qs
