#include "server/http_server.h"
#include "server/structured_output.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "core/error.h"
#include "server/api_error.h"
#include "server/http_worker_pool.h"
#include "server/job_builder.h"
#include "server/listen_address.h"
#include "server/request_deadline.h"
#include "server/routes/cors.h"
#include "server/routes/fallback_route.h"
#include "server/anthropic_api.h"
#include "server/routes/api_translation_routes.h"
#include "server/routes/generation_routes.h"
#include "server/routes/health_routes.h"
#include "server/routes/http_reply.h"
#include "server/routes/metrics_routes.h"
#include "server/routes/model_routes.h"
#include "server/routes/pre_routing.h"
#include "server/routes/tokenize_routes.h"

namespace qs {
namespace {

constexpr int kListenBacklog = 1024;  // pending connections (capped by net.core.somaxconn)

// A generation that reached the engine carries its id; the engine side counts and logs it.
bool reached_engine(const httplib::Request& req, const httplib::Response& res) {
  return (req.path == "/v1/chat/completions" || req.path == "/v1/completions" || req.path == "/v1/responses" ||
          req.path == "/v1/messages") &&
         res.has_header("x-request-id");
}

}  // namespace

HttpServer::HttpServer(ServerOptions options, Engine& engine, const Tokenizer& tokenizer,
                       const ChatTemplate& chat_template, metrics::ServerMetrics& metrics)
    : options_(std::move(options)),
      engine_(engine),
      tokenizer_(tokenizer),
      chat_template_(chat_template),
      metrics_(metrics),
      rejection_logger_(options_.log_format),
      grammars_(std::make_unique<LazyGrammarCompiler>(tokenizer_, engine_.vocab_rows(), default_stop_token_ids(tokenizer_))),
      generation_(std::make_unique<GenerationRouteContext>(GenerationRouteContext{
          options_, engine_, metrics_, JobContext{options_, tokenizer_, chat_template_, engine_.context_tokens(), 0, grammars_.get(), &metrics_},
          [this] { return accepting_requests(); },
          options_.response_cache_bytes > 0 ? std::make_shared<ResponseCache>(options_.response_cache_bytes) : nullptr})),
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
  request_deadline::configure({options_.request_head_timeout_s, options_.request_body_timeout_s}, options_.max_body_bytes);
  bound_ = true;
  workers_ = std::make_unique<HttpWorkerPool>(static_cast<size_t>(std::max(options_.http_threads, 1)), kMaxHttpThreads);
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

void HttpServer::answer_error(const httplib::Request& req, httplib::Response& res, const ApiError& error) const {
  send_error(res, error);
  const bool anthropic = is_anthropic_path(req.path);
  const nlohmann::json anthropic_body = anthropic ? anthropic_error_json(error) : nlohmann::json();
  if (anthropic) send_json(res, error.status(), anthropic_body);  // Anthropic's shape
  // RFC 9110 section 11.6.1: a 401 names the scheme it wants.
  if (error.status() == 401) res.set_header("WWW-Authenticate", "Bearer");
  // A not-ready /ready is a probe answer, not a rejected request.
  if (!reached_engine(req, res) && req.path != "/ready") {
    // The log line names the error type the client got (Anthropic's on its paths).
    const ApiError logged = anthropic ? ApiError(error.status(), error.what(), error.param(),
                                                 anthropic_body["error"]["type"].get<std::string>(), error.code())
                                      : error;
    rejection_logger_.log(logged, req.method, req.path, client_request_id(req));
  }
}

void HttpServer::register_routes() {
  httplib::Server& s = *server_;
  // The workers bind() started; httplib owns (and deletes) the task queue once listening.
  s.new_task_queue = [this]() -> httplib::TaskQueue* {
    if (workers_) return workers_.release();
    return new HttpWorkerPool(static_cast<size_t>(std::max(options_.http_threads, 1)), kMaxHttpThreads);  // listen() again
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

  // Runs after the headers are read and before the body is.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const bool chunked = !req.has_header("Content-Length") && has_chunked_body(req);
    request_deadline::head_received(req.has_header("Content-Length") ? req.get_header_value("Content-Length") != "0"
                                                                     : req.has_header("Transfer-Encoding"),
                                    chunked, is_anthropic_path(req.path));
    if (const std::optional<HeaderRejection> rejection = check_request_headers(req, options_)) {
      answer_error(req, res, rejection->error);
      if (rejection->close_connection) {
        res.set_header("Connection", "close");
        // httplib 0.11 closes only on the request's own "Connection: close": without this it would
        // read the unread body as the next request (answering it with a 414 or 431).
        request_deadline::close_after_response();
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    if (body_read_until_close(req)) {  // PUT / PATCH / DELETE without framing (a POST got its 411 above)
      // httplib would wait for the client to close (the 10-s read timeout). No route takes these
      // methods, so the route table's answer (404, or 405 with Allow) is given now.
      res.status = 404;
      if (const std::optional<ApiError> error = fallback_reply(req, res, static_files_, options_.max_body_bytes, route_methods_)) {
        answer_error(req, res, *error);
      }
      res.set_header("Connection", "close");
      request_deadline::close_after_response();
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!is_cors_preflight(req, options_.allowed_origins)) return httplib::Server::HandlerResponse::Unhandled;
    if (const std::optional<ApiError> refused = answer_cors_preflight(req, res, options_.allowed_origins)) {
      answer_error(req, res, *refused);
    }
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib 0.11 adds "Keep-Alive" to every response not answering a "Connection: close" request;
  // a response that closes the connection must not advertise keep-alive as well. CORS headers go
  // on every response to an allowed origin, errors and streams included.
  s.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (res.get_header_value("Connection") == "close") res.headers.erase("Keep-Alive");
    // httplib adds its own "Connection: close" when the request asked for it: one is enough.
    if (res.get_header_value_count("Connection") > 1) {
      const std::string value = res.get_header_value("Connection");
      res.headers.erase("Connection");
      res.set_header("Connection", value);
    }
    // The client's X-Request-Id comes back on every answer, rejections included (a generation
    // has set it already: the client's, else its response id).
    if (!res.has_header("x-request-id")) {
      if (const std::string id = client_request_id(req); !id.empty()) res.set_header("x-request-id", id);
    }
    // Anthropic's SDKs read the id as request-id (the error's requestID, the message's _request_id).
    if (is_anthropic_path(req.path) && res.has_header("x-request-id") && !res.has_header("request-id")) {
      res.set_header("request-id", res.get_header_value("x-request-id"));
    }
    add_cors_headers(req, res, options_.allowed_origins);
  });
  // Any status >= 400 that no handler gave a body: no route, body too large while reading, ...
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    request_deadline::body_received();
    if (!res.body.empty()) return;
    // The 431 / 413 the connection already got is what is logged and counted (httplib's 400 for the
    // request it read half of goes to a closed connection).
    if (const int sent = request_deadline::replied_status(); sent != 0) {
      res.status = sent;
      answer_error(req, res, sent == 431 ? ApiError(431, "request head larger than " + std::to_string(request_deadline::kMaxHeadBytes) + " bytes",
                                                    "", "invalid_request_error", "request_header_too_large")
                                         : ApiError(413, "chunked request body larger than " + std::to_string(options_.max_body_bytes) +
                                                             " bytes (--max-body-bytes)",
                                                    "", "invalid_request_error", "request_too_large"));
      return;
    }
    // A request line httplib refused (an unknown method) leaves the path unset: its target names it
    // (for the log line, and Anthropic's error shape under /v1/messages).
    std::optional<httplib::Request> with_path;
    if (req.path.empty() && !req.target.empty()) {
      with_path = req;
      with_path->path = req.target.substr(0, req.target.find('?'));
    }
    const httplib::Request& named = with_path ? *with_path : req;
    if (const std::optional<ApiError> error = fallback_reply(named, res, static_files_, options_.max_body_bytes, route_methods_)) {
      answer_error(named, res, *error);
    }
    // httplib closes only on the request's own "Connection: close" (see the pre-routing handler).
    if (res.get_header_value("Connection") == "close") request_deadline::close_after_response();
  });
  // Handlers report errors by throwing ApiError; anything else is a 500.
  s.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    request_deadline::body_received();
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      answer_error(req, res, e);
    } catch (const std::exception& e) {
      answer_error(req, res, ApiError(500, e.what(), "", "server_error"));
    }
  });
  // Runs once the response is written. Generation responses that reached the engine are counted
  // by record_request; error log lines were written by answer_error.
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    request_deadline::response_sent();  // the deadline for the next request's head starts now
    if (!reached_engine(req, res)) metrics_.record_http_status(res.status);
  });

  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  // Every route is registered through these, so route_methods_ knows each path's methods (405).
  auto get = [this, &s](const std::string& pattern, httplib::Server::Handler handler) {
    route_methods_.add("GET", pattern);
    s.Get(pattern, std::move(handler));
  };
  auto post = [this, &s](const std::string& pattern, httplib::Server::Handler handler) {
    route_methods_.add("POST", pattern);
    s.Post(pattern, std::move(handler));
  };
  get("/health", [](Req, Res res) { handle_health(res); });
  get("/ready", [this](Req, Res res) { handle_ready(ready_.load(), draining_.load(), res); });
  get("/v1/models", [this](Req, Res res) { handle_list_models(options_, engine_.context_tokens(), created_unix_s_, res); });
  get(R"(/v1/models/(.+))", [this](Req req, Res res) {
    handle_retrieve_model(req.matches[1], options_, engine_.context_tokens(), created_unix_s_, res);
  });
  get("/metrics", [this](Req, Res res) { handle_metrics(engine_.stats(), metrics_, res); });
  get("/stats", [this](Req, Res res) { handle_stats(engine_.stats(), metrics_, res); });
  post("/v1/chat/completions", [this](Req req, Res res) { handle_chat_completions(*generation_, req, res); });
  post("/v1/completions", [this](Req req, Res res) { handle_completions(*generation_, req, res); });
  post("/v1/responses", [this](Req req, Res res) { handle_responses(*generation_, req, res); });
  post("/v1/messages", [this](Req req, Res res) { handle_messages(*generation_, req, res); });
  post("/v1/messages/count_tokens", [this](Req req, Res res) { handle_count_tokens(*generation_, req, res); });
  post("/tokenize", [this](Req req, Res res) { handle_tokenize(req, generation_->job_context, res); });
  post("/detokenize", [this](Req req, Res res) { handle_detokenize(req, tokenizer_, res); });
}

}  // namespace qs
