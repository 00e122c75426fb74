#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "core/error.h"
#include "server/api_error.h"
#include "server/http_worker_pool.h"
#include "server/job_builder.h"
#include "server/listen_address.h"
#include "server/openai_request.h"
#include "server/rejection_log.h"
#include "server/response_builder.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

// The error this worker thread last answered with, for the log line that the logger writes once
// the response is sent (on the same thread; the body may be compressed by then).
thread_local std::optional<ApiError> t_answered_error;

void send_error(httplib::Response& res, const ApiError& error) {
  send_json(res, error.status(), error.to_json());
  if (error.status() == 429 || error.status() == 503) res.set_header("Retry-After", "1");  // seconds
  t_answered_error = error;
}

constexpr int kListenBacklog = 1024;  // pending connections (capped by net.core.somaxconn)

bool is_generation_path(const std::string& path) {
  return path == "/v1/chat/completions" || path == "/v1/completions";
}

// RFC 9112 section 6.3: Content-Length is 1*DIGIT, and several must agree. cpp-httplib 0.11 reads
// the value with strtoull, so "-5" becomes 2^64 - 5 and the request waits for that many bytes until
// the read timeout, then gets a misleading 413. Returns the offending value, or nullopt when valid.
std::optional<std::string> invalid_content_length(const httplib::Request& req) {
  const size_t count = req.get_header_value_count("Content-Length");
  std::string first;
  for (size_t i = 0; i < count; ++i) {
    const std::string value = req.get_header_value("Content-Length", i);
    const bool digits = !value.empty() && value.size() <= 19 &&  // < 10^19 fits in 64 bits
                        value.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (i > 0 && value != first)) return value;
    if (i == 0) first = value;
  }
  return std::nullopt;
}

// The body as JSON; 415 for a non-JSON content type, 400 for malformed JSON.
ojson parse_body(const httplib::Request& req) {
  const std::string type = req.get_header_value("Content-Type");
  if (!type.empty() && type.rfind("application/json", 0) != 0) {
    throw ApiError(415, "Content-Type must be application/json, got " + type, "", "invalid_request_error",
                   "unsupported_media_type");
  }
  try {
    return ojson::parse(req.body);
  } catch (const nlohmann::json::exception& e) {
    throw ApiError(400, std::string("malformed JSON body: ") + e.what(), "", "invalid_request_error",
                   "invalid_json");
  }
}

}  // namespace

HttpServer::HttpServer(ServerOptions options, Engine& engine, const Tokenizer& tokenizer,
                       const ChatTemplate& chat_template, metrics::ServerMetrics& metrics)
    : options_(std::move(options)),
      engine_(engine),
      tokenizer_(tokenizer),
      chat_template_(chat_template),
      metrics_(metrics),
      server_(std::make_unique<httplib::Server>()) {
  register_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::bind() {
  int listen_fd = -1;
  server_->set_socket_options([&listen_fd](socket_t sock) {
    // SO_REUSEADDR only. cpp-httplib's default also sets SO_REUSEPORT, which lets a second server
    // bind the same port and silently take part of the traffic (and bypass its --api-key).
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = static_cast<int>(sock);
  });
  bound_port_ = options_.port == 0 ? server_->bind_to_any_port(options_.host)
                                   : (server_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (bound_port_ < 0) {
    const int bind_errno = errno;  // meaningful only when the address resolved
    std::string reason = listen_address_problem(options_.host, options_.port);
    if (reason.empty()) reason = bind_error_reason(bind_errno);
    throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " + reason);
  }
  // cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed in the shared
  // library): a burst of connections then overflows it and the kernel drops SYNs, which clients
  // retry only after a second. Linux lets listen() raise the backlog of a listening socket.
  if (listen_fd >= 0) ::listen(listen_fd, kListenBacklog);
  bound_ = true;
  workers_ = std::make_unique<HttpWorkerPool>(static_cast<size_t>(std::max(options_.http_threads, 1)));
}

bool HttpServer::listen() {
  if (!bound_) bind();
  // httplib's stop() does nothing before listening starts, so a stop (e.g. SIGTERM during warm-up)
  // is remembered here. A stop() between this check and httplib marking itself running is still
  // lost (a window of a few instructions).
  if (stop_requested_.load()) return true;
  return server_->listen_after_bind();
}

void HttpServer::stop() {
  stop_requested_.store(true);
  server_->stop();
}

void HttpServer::register_routes() {
  httplib::Server& s = *server_;
  // The workers bind() started; httplib owns (and deletes) the task queue once listening.
  s.new_task_queue = [this]() -> httplib::TaskQueue* {
    if (workers_) return workers_.release();
    return new HttpWorkerPool(static_cast<size_t>(std::max(options_.http_threads, 1)));  // listen() again
  };
  s.set_payload_max_length(options_.max_body_bytes);
  // Every SSE delta is a small write; with Nagle's algorithm on, a delta written while the
  // previous one is unacknowledged waits for the peer's delayed ACK (~40 ms on Linux), which
  // inflated TTFT and bunched ITL on keep-alive connections.
  s.set_tcp_nodelay(true);
  s.set_read_timeout(10, 0);  // a client that stalls mid-request frees its thread
  s.set_write_timeout(60, 0);
  // A metrics scraper (the Endpoint Picker polls /metrics every 50 ms) keeps one connection, and
  // so one worker thread, instead of reconnecting after httplib's default of 5 requests; an idle
  // keep-alive connection still frees its thread after 5 s.
  s.set_keep_alive_max_count(10000);

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_answered_error.reset();  // in case the previous response on this thread was never logged
    // Runs after the headers are read and before the body is: a bad length cannot delimit the
    // body, so the connection is closed after the 400.
    // Answers from the headers alone and closes the connection: the body is not read.
    auto reject_and_close = [&res](const ApiError& error) {
      send_error(res, error);
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    };
    if (const std::optional<std::string> length = invalid_content_length(req)) {
      return reject_and_close(ApiError(400, "invalid Content-Length header '" + *length +
                                                "': expected one non-negative decimal number of bytes",
                                       "", "invalid_request_error", "invalid_content_length"));
    }
    // Decided from the headers, before httplib reads (or waits for) the body: a declared length
    // above the limit gets 413 at once instead of after the read timeout, and a POST that neither
    // declares a length nor is chunked (its body would end only when the client closes) gets 411
    // (RFC 9110 section 15.5.12).
    if (req.has_header("Content-Length")) {
      const unsigned long long declared = std::stoull(req.get_header_value("Content-Length"));  // validated above
      if (declared > options_.max_body_bytes) {
        return reject_and_close(ApiError(413, "request body of " + std::to_string(declared) +
                                                  " bytes exceeds the limit of " + std::to_string(options_.max_body_bytes) +
                                                  " bytes (--max-body-bytes)",
                                         "", "invalid_request_error", "request_too_large"));
      }
    } else if (req.method == "POST" && req.get_header_value("Transfer-Encoding").find("chunked") == std::string::npos) {
      return reject_and_close(ApiError(411, "a POST needs a Content-Length header (or chunked transfer encoding)", "",
                                       "invalid_request_error", "length_required"));
    }
    if (!options_.api_key.empty() && req.path.rfind("/v1/", 0) == 0 &&
        req.get_header_value("Authorization") != "Bearer " + options_.api_key) {
      send_error(res, ApiError(401, "Incorrect or missing API key (send 'Authorization: Bearer <key>')",
                               "", "invalid_request_error", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // httplib 0.11 adds "Keep-Alive" to every response not answering a "Connection: close" request;
  // a response that closes the connection must not advertise keep-alive as well.
  s.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.get_header_value("Connection") == "close") res.headers.erase("Keep-Alive");
  });

  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404 && req.method == "GET" && static_files_) {
      if (const StaticFile* file = static_files_(req.path)) {
        res.status = 200;
        res.set_content(std::string(file->body), std::string(file->content_type));
        return;
      }
    }
    const std::string message = res.status == 413 ? "request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes"
                                : res.status == 404 ? "no route for " + req.method + " " + req.path
                                                    : "HTTP error " + std::to_string(res.status);
    send_error(res, ApiError(res.status, message, "", res.status == 404 ? "not_found_error" : "invalid_request_error",
                             res.status == 413 ? "request_too_large" : ""));
  });

  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, e.what(), "", "server_error"));
    }
  });

  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    std::optional<ApiError> error = std::move(t_answered_error);
    t_answered_error.reset();
    // Generation responses that reached the engine are counted and logged by record_request.
    if (is_generation_path(req.path) && res.has_header("x-request-id")) return;
    metrics_.record_http_status(res.status);
    // Everything else answered with an error gets its log line here (a not-ready /ready is a probe
    // answer, not a rejected request).
    if (res.status < 400 || req.path == "/ready" || options_.log_format == "none") return;
    if (!error || error->status() != res.status) error.emplace(res.status, "HTTP " + std::to_string(res.status), "", "");
    const RejectedRequest rejected = rejected_request(*error, req.method, req.path);
    const std::string line = options_.log_format == "text" ? rejection_text_line(rejected)
                                                           : rejection_log_line(rejected, std::chrono::system_clock::now());
    std::fprintf(stderr, "%s\n", line.c_str());
  });

  s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}});
  });
  s.Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    if (accepting_requests()) {
      send_json(res, 200, {{"status", "ready"}});
    } else {
      send_error(res, ApiError(503, "model is loading or the server is draining", "", "service_unavailable"));
    }
  });
  auto model_object = [this](const std::string& name) -> nlohmann::json {
    return {{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "qwenserve"},
            {"max_model_len", engine_.context_tokens()}};
  };
  s.Get("/v1/models", [this, model_object](const httplib::Request&, httplib::Response& res) {
    std::vector<std::string> names{options_.served_model_name};
    names.insert(names.end(), options_.served_model_aliases.begin(), options_.served_model_aliases.end());
    nlohmann::json data = nlohmann::json::array();
    for (auto it = names.begin(); it != names.end(); ++it) {
      if (std::find(names.begin(), it, *it) == it) data.push_back(model_object(*it));  // each name once
    }
    send_json(res, 200, {{"object", "list"}, {"data", data}});
  });
  // GET /v1/models/{model} (OpenAI "Retrieve model"): the model object, or 404 model_not_found.
  s.Get(R"(/v1/models/(.+))", [this, model_object](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    send_json(res, 200, model_object(served_model_for(name, options_)));  // throws 404 for others
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const EngineStats st = engine_.stats();
    metrics_.set_num_requests_running(st.running);
    metrics_.set_num_requests_waiting(st.waiting);
    metrics_.set_kv_cache_usage(st.kv_cache_usage);
    res.set_content(metrics_.prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/stats", [this](const httplib::Request&, httplib::Response& res) {
    const EngineStats st = engine_.stats();
    metrics_.set_num_requests_running(st.running);
    metrics_.set_num_requests_waiting(st.waiting);
    metrics_.set_kv_cache_usage(st.kv_cache_usage);
    nlohmann::json body = metrics_.stats_json();
    body["kv_blocks"] = {{"total", st.kv_blocks_total},
                         {"referenced", st.kv_blocks_referenced},
                         {"cached", st.kv_blocks_cached}};
    body["preemptions"] = st.preemptions_total;
    send_json(res, 200, body);
  });

  const JobContext job_context{options_, tokenizer_, chat_template_, engine_.context_tokens()};
  // Admission happens before any response byte: a rejected request (400 / 429 / 503, with
  // Retry-After for the last two) never gets a 200, streaming or not.
  auto run_job = [this](GenerationJob job, QueueSlot slot, httplib::Response& res) {
    job.log_format = options_.log_format == "text"   ? GenerationJob::LogFormat::kText
                     : options_.log_format == "none" ? GenerationJob::LogFormat::kNone
                                                     : GenerationJob::LogFormat::kJson;
    std::vector<ChoiceState> choices = submit_job(job, engine_, metrics_, &slot);
    res.set_header("x-request-id", job.id);
    if (!job.stream) {
      send_json(res, 200, run_generation(std::move(job), std::move(choices), tokenizer_, metrics_));
      return;
    }
    // With --max-queue-wait the stream starts only once the request runs, so that a queue
    // timeout is still a 429 (without it, queued streams get keep-alive comments meanwhile).
    if (engine_.options().max_queue_wait_s > 0) await_admission(job, choices, metrics_);
    auto shared_job = std::make_shared<GenerationJob>(std::move(job));
    auto shared_choices = std::make_shared<std::vector<ChoiceState>>(std::move(choices));
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [this, shared_job, shared_choices](size_t, httplib::DataSink& sink) {
          stream_generation(std::move(*shared_job), std::move(*shared_choices), tokenizer_, metrics_,
                            [&sink](const std::string& bytes) {
                              return sink.is_writable() && sink.write(bytes.data(), bytes.size());
                            },
                            options_.keepalive_ms);
          sink.done();
          return true;
        });
  };
  // Load shedding before any parsing, templating or tokenizing: a place in the waiting queue is
  // reserved first, so an overloaded or draining server answers 429 / 503 with almost no work,
  // even to a burst that arrives all at once.
  auto admission_precheck = [this] {
    if (!accepting_requests()) {
      metrics_.record_admission_rejection();
      throw ApiError(503, "the server is not ready (loading or draining); retry later", "",
                     "service_unavailable", "not_ready");
    }
    QueueSlot slot = engine_.reserve_queue_slot();
    if (!slot) {
      metrics_.record_admission_rejection();
      throw ApiError(429, "server overloaded: " + std::to_string(engine_.options().max_queue) +
                              " requests already wait (--max-queue); retry later",
                     "", "rate_limit_error", "queue_full");
    }
    return slot;
  };
  s.Post("/v1/chat/completions", [this, job_context, run_job, admission_precheck](const httplib::Request& req, httplib::Response& res) {
    QueueSlot slot = admission_precheck();
    run_job(build_chat_job(parse_chat_request(parse_body(req), tokenizer_.vocab_size()), job_context), std::move(slot), res);
  });
  s.Post("/v1/completions", [this, job_context, run_job, admission_precheck](const httplib::Request& req, httplib::Response& res) {
    QueueSlot slot = admission_precheck();
    run_job(build_completion_job(parse_completion_request(parse_body(req), tokenizer_.vocab_size()), job_context), std::move(slot), res);
  });
  s.Post("/tokenize", [this, job_context](const httplib::Request& req, httplib::Response& res) {
    const ojson body = parse_body(req);
    std::string text;
    if (body.contains("messages")) {
      const ChatRequest chat = parse_chat_request(body, tokenizer_.vocab_size());
      text = render_chat_prompt(job_context, chat.messages, chat.tools, chat.chat_template_kwargs,
                                body.value("add_generation_prompt", true));
    } else if (body.contains("prompt") && body["prompt"].is_string()) {
      text = body["prompt"].get<std::string>();
    } else {
      throw invalid_param("prompt", "send a string 'prompt' or a 'messages' array");
    }
    const std::vector<int32_t> ids = tokenizer_.encode(text);
    send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine_.context_tokens()}});
  });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    const ojson body = parse_body(req);
    if (!body.contains("tokens") || !body["tokens"].is_array()) throw invalid_param("tokens", "tokens must be an array of token ids");
    std::vector<int32_t> ids;
    for (const auto& id : body["tokens"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tokenizer_.vocab_size()) {
        throw invalid_param("tokens", "token ids must be integers in [0, " + std::to_string(tokenizer_.vocab_size()) + ")");
      }
      ids.push_back(id.get<int32_t>());
    }
    send_json(res, 200, {{"prompt", tokenizer_.decode(ids)}});
  });
}

}  // namespace qs
