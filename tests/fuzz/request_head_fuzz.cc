// Our checks of an HTTP request head (server/routes/pre_routing.h: Content-Length validation,
// 413 / 411 before the body, the API key), on fuzzed header lists as cpp-httplib hands them over
// (names case-insensitive, repeated headers kept), including many headers.
//
// Input: lines "Name: value" (the first line is the method); all of it is fuzzed.
// Invariants (RFC 9112 sections 6.1, 6.3 and 7, RFC 9110 sections 8.4, 11.1 and 15.5.12, checked
// independently here): the function never throws; a request is let through only if every
// Content-Length is 1..19 ASCII digits, all equal, and at most max_body_bytes, or (without one) its
// Transfer-Encoding lines list exactly one coding, "chunked" (any case; "chunked" twice is a 400,
// any other coding a 501), or, absent, it is not a POST; its Content-Encoding is
// absent or identity; and a /v1/ path carries the key ("Bearer" in any case, or x-api-key). Every
// rejection but the 401 closes the connection.
#include <httplib.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "server/routes/pre_routing.h"

namespace {

using qs::fuzz::check;

constexpr size_t kMaxBody = 1 << 20;

// ASCII letters lowercased (header names, codings and auth schemes are case-insensitive).
std::string lowered(std::string v) {
  for (char& c : v) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return v;
}

// The value lowercased, spaces and tabs trimmed at both ends.
std::string folded(std::string v) {
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
  return lowered(v);
}

// The transfer codings of every Transfer-Encoding line as one list (RFC 9110 5.3), each folded,
// empty elements dropped (RFC 9110 5.6.1).
std::vector<std::string> codings_of(const httplib::Request& req) {
  std::string all;
  for (size_t i = 0; i < req.get_header_value_count("Transfer-Encoding"); ++i) all += req.get_header_value("Transfer-Encoding", i) + ",";
  std::vector<std::string> out;
  std::string item;
  for (char c : all) {
    if (c != ',') {
      item += c;
      continue;
    }
    if (!folded(item).empty()) out.push_back(folded(item));
    item.clear();
  }
  return out;
}

bool all_digits(const std::string& v) {
  if (v.empty() || v.size() > 19) return false;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  httplib::Request req;
  size_t at = 0;
  bool first = true;
  while (at <= text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (first) {
      const size_t space = line.find(' ');
      req.method = line.substr(0, space);
      req.path = space == std::string::npos ? "/" : line.substr(space + 1);
      first = false;
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    req.headers.emplace(line.substr(0, colon), value);
  }
  static const qs::ServerOptions options = [] {
    qs::ServerOptions o;
    o.max_body_bytes = kMaxBody;
    o.api_key = "key";
    return o;
  }();
  const std::optional<qs::HeaderRejection> verdict = qs::check_request_headers(req, options);

  const size_t lengths = req.get_header_value_count("Content-Length");
  bool lengths_ok = true;
  unsigned long long declared = 0;
  for (size_t i = 0; i < lengths; ++i) {
    const std::string v = req.get_header_value("Content-Length", i);
    lengths_ok = lengths_ok && all_digits(v) && v == req.get_header_value("Content-Length", 0);
  }
  if (lengths_ok && lengths > 0) declared = std::stoull(req.get_header_value("Content-Length"));
  // RFC 9112 6.1: both framings at once are refused (400, connection closed).
  const bool has_te = req.has_header("Transfer-Encoding");
  const bool both_framings = lengths > 0 && has_te;
  const std::vector<std::string> codings = codings_of(req);
  const bool te_chunked = codings == std::vector<std::string>{"chunked"};
  // RFC 9112 6.1: chunked applied more than once is malformed (400), another coding unsupported (501).
  const bool chunked_twice = codings.size() > 1 && std::count(codings.begin(), codings.end(), "chunked") == static_cast<long>(codings.size());
  const std::string coding = folded(req.get_header_value("Content-Encoding"));
  const bool coding_ok = coding.empty() || coding == "identity";
  const bool body_ok = both_framings ? false
                       : lengths > 0 ? lengths_ok && declared <= kMaxBody
                       : has_te      ? te_chunked
                                     : req.method != "POST";
  const std::string auth = req.get_header_value("Authorization");
  const bool auth_ok = req.path.rfind("/v1/", 0) != 0 || req.get_header_value("x-api-key") == "key" ||
                       (auth.size() == 10 && lowered(auth.substr(0, 7)) == "bearer " && auth.substr(7) == "key");
  if (!verdict) {
    check(body_ok && coding_ok && auth_ok, "a request head that breaks a rule was let through");
    return 0;
  }
  const int status = verdict->error.status();
  check(status == 400 || status == 401 || status == 411 || status == 413 || status == 415 || status == 501,
        "unexpected status " + std::to_string(status));
  check(verdict->close_connection == (status != 401), "connection handling differs from the status");
  if (status == 400) check(!lengths_ok || both_framings || chunked_twice, "400 for valid framing headers");
  if (status == 413) check(lengths_ok && declared > kMaxBody, "413 for a length within the limit");
  if (status == 415) check(!coding_ok, "415 for an identity (or absent) Content-Encoding");
  if (status == 501) check(has_te && !te_chunked && !chunked_twice, "501 for a chunked or absent Transfer-Encoding");
  if (status == 411) check(lengths == 0 && !has_te && req.method == "POST", "411 although the body is delimited");
  if (status == 401) check(body_ok && coding_ok && !auth_ok, "401 for a request that is authorised or malformed");
  return 0;
}
