#include "loadtest/sse_client.h"

#include <httplib.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "loadtest/sse_parser.h"

namespace qs::loadtest {
namespace {

constexpr size_t kMaxErrorBodyBytes = 400;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string transport_error_name(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "connect";
    case httplib::Error::ConnectionTimeout: return "connect_timeout";
    case httplib::Error::Read: return "read";
    case httplib::Error::Write: return "write";
    case httplib::Error::Canceled: return "canceled";
    default: return "transport";
  }
}

// Splits "http://host:port/prefix/" into ("http://host:port", "/prefix").
std::pair<std::string, std::string> split_url(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) throw Error("--url '" + url + "': expected http://host:port");
  const size_t slash = url.find('/', scheme + 3);
  std::string host = slash == std::string::npos ? url : url.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : url.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return {host, prefix};
}

// The text of a choice's chunk, or nullptr when it carries none. `reasoning` is set when the text
// is chat reasoning_content (counted as a token chunk but kept out of the conversation history).
const nlohmann::json* content_of(const nlohmann::json& choice, bool chat, bool& reasoning) {
  reasoning = false;
  auto non_empty = [](const nlohmann::json& obj, const char* key) -> const nlohmann::json* {
    const auto it = obj.find(key);
    if (it == obj.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) return nullptr;
    return &*it;
  };
  if (!chat) return non_empty(choice, "text");
  const auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) return nullptr;
  if (const nlohmann::json* content = non_empty(*delta, "content")) return content;
  reasoning = true;
  return non_empty(*delta, "reasoning_content");
}

}  // namespace

bool apply_chunk(const nlohmann::json& chunk, bool chat, Clock::time_point sent,
                 Clock::time_point now, std::optional<Clock::time_point>& last_content,
                 RequestRecord& record) {
  if (!chunk.is_object()) return true;
  if (chunk.contains("error")) {
    const auto& e = chunk["error"];
    record.error = e.is_object() && e.contains("message") && e["message"].is_string()
                       ? e["message"].get<std::string>()
                       : e.dump();
    return false;
  }
  const auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array() && !choices->empty()) {
    const auto& choice = (*choices)[0];
    bool reasoning = false;
    if (const nlohmann::json* content = content_of(choice, chat, reasoning)) {
      if (!last_content) {
        record.ttft_ms = ms_between(sent, now);
      } else {
        record.itl_ms.push_back(ms_between(*last_content, now));
      }
      last_content = now;
      ++record.content_chunks;
      if (!reasoning) record.text += content->get_ref<const std::string&>();
    }
    const auto finish = choice.find("finish_reason");
    if (finish != choice.end() && finish->is_string()) record.finish_reason = finish->get<std::string>();
  }
  const auto timings = chunk.find("timings");
  if (timings != chunk.end() && timings->is_object()) {
    const auto ms = [&](const char* name) {
      const auto it = timings->find(name);
      return it != timings->end() && it->is_number() ? it->get<double>() : std::nan("");
    };
    record.server_queue_ms = ms("queue_ms");
    record.server_prefill_ms = ms("prefill_ms");
    record.server_decode_ms = ms("decode_ms");
    record.server_predicted_ttft_ms = ms("predicted_ttft_ms");
  }
  const auto usage = chunk.find("usage");
  if (usage != chunk.end() && usage->is_object()) {
    if (usage->contains("completion_tokens") && (*usage)["completion_tokens"].is_number_integer()) {
      record.output_tokens = (*usage)["completion_tokens"].get<int>();
    }
    if (usage->contains("prompt_tokens") && (*usage)["prompt_tokens"].is_number_integer()) {
      record.prompt_tokens = (*usage)["prompt_tokens"].get<int>();
    }
  }
  return true;
}

StreamClient::StreamClient(const EndpointConfig& config) : config_(config) {
  auto [host, prefix] = split_url(config.url);
  const bool has_v1 = prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0;
  const std::string root = has_v1 ? prefix.substr(0, prefix.size() - 3) : prefix;
  path_ = root + "/v1" + (config.chat ? "/chat/completions" : "/completions");
  tokenize_path_ = root + "/tokenize";
  metrics_path_ = root + "/metrics";
  client_ = std::make_unique<httplib::Client>(host);
  if (!client_->is_valid()) throw Error("--url '" + config.url + "': unsupported URL");
  client_->set_keep_alive(true);
  client_->set_tcp_nodelay(true);  // no Nagle delay on the request (aiohttp, used by vLLM, does the same)
  client_->set_connection_timeout(10, 0);
  const auto timeout_s = static_cast<time_t>(std::ceil(config.timeout_s));
  client_->set_read_timeout(timeout_s, 0);
  client_->set_write_timeout(timeout_s, 0);
  if (!config.api_key.empty()) client_->set_bearer_token_auth(config.api_key);
}

StreamClient::~StreamClient() = default;

std::string StreamClient::metrics_text() {
  const auto res = client_->Get(metrics_path_);
  return res && res->status == 200 ? res->body : std::string();
}

nlohmann::json StreamClient::request_body(const nlohmann::json& messages, const std::string& prompt,
                                          int max_tokens) const {
  nlohmann::json body;
  if (!config_.model.empty()) body["model"] = config_.model;
  if (config_.chat) {
    body["messages"] = messages;
  } else {
    body["prompt"] = prompt;
  }
  body["max_tokens"] = max_tokens;
  body["stream"] = true;
  // include_timings: qwenserve's latency breakdown on the last chunk (other servers ignore it).
  body["stream_options"] = {{"include_usage", true}, {"include_timings", true}};
  // Ask for exactly max_tokens where the server supports it (vLLM); others ignore these fields.
  body["ignore_eos"] = true;
  body["min_tokens"] = max_tokens;
  body["temperature"] = 0;
  return body;
}

namespace {

// State of one response being read: the SSE parser feeding apply_chunk, and the error body of a
// non-200 reply.
struct StreamReader {
  StreamReader(bool chat, RequestRecord& record)
      : chat(chat), record(record), parser([this](const SseEvent& e) { on_event(e); }) {}
  StreamReader(const StreamReader&) = delete;  // the parser's handler points at this object
  StreamReader& operator=(const StreamReader&) = delete;

  void on_event(const SseEvent& event) {
    if (done || failed_payload) return;
    if (event.is_done()) {
      done = true;
      return;
    }
    const auto chunk = nlohmann::json::parse(event.data, nullptr, /*allow_exceptions=*/false);
    if (chunk.is_discarded()) {
      record.error = "unparsable SSE data: " + event.data.substr(0, kMaxErrorBodyBytes);
      failed_payload = true;
    } else if (!apply_chunk(chunk, chat, sent, Clock::now(), last_content, record)) {
      failed_payload = true;
    }
  }

  bool on_body(const char* data, size_t size) {
    if (status != 200) {
      const size_t room = kMaxErrorBodyBytes - std::min(kMaxErrorBodyBytes, error_body.size());
      error_body.append(data, std::min(room, size));
    } else {
      parser.feed(data, size);
    }
    return true;
  }

  // Sets record.status (and error) once the exchange is over.
  void finish(bool sent_ok, httplib::Error err) {
    if (record.output_tokens == 0) record.output_tokens = record.content_chunks;
    if (!sent_ok || err != httplib::Error::Success) {
      record.status = transport_error_name(err);
      record.error = err == httplib::Error::Connection
                         ? "could not connect (connection refused, or host unknown or unreachable)"
                         : httplib::to_string(err);
    } else if (status != 200) {
      record.status = std::to_string(status);
      record.error = error_body.empty() ? "HTTP " + record.status : error_body;
    } else if (failed_payload) {
      record.status = "stream_error";
    } else if (!done) {
      record.status = "incomplete";
      record.error = "stream ended without data: [DONE]";
    } else {
      record.status = "200";
    }
  }

  bool chat;
  RequestRecord& record;
  SseParser parser;
  Clock::time_point sent;
  std::optional<Clock::time_point> last_content;
  int status = -1;
  std::string error_body;
  bool failed_payload = false;
  bool done = false;
};

}  // namespace

RequestRecord StreamClient::generate(const nlohmann::json& messages, const std::string& prompt,
                                     int max_tokens, Clock::time_point run_start) {
  RequestRecord record;
  record.max_tokens = max_tokens;
  record.ttft_ms = std::numeric_limits<double>::quiet_NaN();
  StreamReader reader(config_.chat, record);
  httplib::Request req;
  req.method = "POST";
  req.path = path_;
  req.body = request_body(messages, prompt, max_tokens).dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.response_handler = [&](const httplib::Response& res) {
    reader.status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    return reader.on_body(data, size);
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  reader.sent = Clock::now();
  record.start_s = std::chrono::duration<double>(reader.sent - run_start).count();
  const bool sent_ok = client_->send(req, res, err);
  record.e2e_ms = ms_between(reader.sent, Clock::now());
  reader.finish(sent_ok, err);
  return record;
}

std::optional<int> StreamClient::count_tokens(const std::string& text) {
  if (tokenize_unavailable_) return std::nullopt;
  // "prompt" for qwenserve and vLLM, "content" for llama.cpp's server.
  nlohmann::json body = {{"prompt", text}, {"content", text}};
  if (!config_.model.empty()) body["model"] = config_.model;
  auto res = client_->Post(tokenize_path_, body.dump(), "application/json");
  std::optional<int> count;
  if (res && res->status == 200) {
    const auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (j.is_object() && j.contains("count") && j["count"].is_number_integer()) {
      count = j["count"].get<int>();
    } else if (j.is_object() && j.contains("tokens") && j["tokens"].is_array()) {
      count = static_cast<int>(j["tokens"].size());
    }
  }
  if (!count) tokenize_unavailable_ = true;  // do not ask again for every prompt
  return count;
}

}  // namespace qs::loadtest
