// POST /tokenize and POST /detokenize (vLLM's routes of the same names).
#pragma once

#include <httplib.h>

#include "server/job_builder.h"
#include "tokenizer/tokenizer.h"

namespace qs {

/// POST /tokenize: {"prompt": string} or a chat body ({"messages": [...], optional "tools",
/// "chat_template_kwargs", "add_generation_prompt" (default true), "continue_final_message"},
/// rendered with the chat template as render_chat_prompt does) -> 200 {"tokens": [ids], "count":
/// n, "max_model_len": ctx.context_tokens}.
/// Throws ApiError 415 / 400 for the body (parse_json_body), 400 param "prompt" when neither a
/// string prompt nor messages are given, 400 for invalid messages (parse_chat_request) or a
/// conversation the template rejects.
void handle_tokenize(const httplib::Request& req, const JobContext& ctx, httplib::Response& res);

/// POST /detokenize: {"tokens": [ids]} -> 200 {"prompt": decoded text}. Throws ApiError 400
/// param "tokens" unless tokens is an array of integers in [0, vocab_size).
void handle_detokenize(const httplib::Request& req, const Tokenizer& tokenizer, httplib::Response& res);

}  // namespace qs
