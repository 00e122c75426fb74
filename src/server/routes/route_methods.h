// Which HTTP methods each route answers, for the 405 Method Not Allowed that a request with a
// route's path but another method gets (RFC 9110 section 15.5.6: the response carries an Allow
// header listing the target's methods, section 10.2.1).
#pragma once

#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace qs {

class RouteMethods {
 public:
  /// Records that `method` is answered on paths matching `pattern` as a whole (an exact path or
  /// httplib's std::regex route syntax, e.g. "/v1/models/(.+)"). Throws std::regex_error for an
  /// invalid pattern.
  void add(const std::string& method, const std::string& pattern);

  /// The methods answered on `path`, in the order first added, each once; HEAD follows GET (an
  /// httplib GET route answers HEAD too). Empty when no route has this path.
  std::vector<std::string> allowed(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, std::regex>> routes_;
};

/// `methods` as an Allow field value: "GET, HEAD" (RFC 9110 section 10.2.1: #method).
std::string allow_header_value(const std::vector<std::string>& methods);

}  // namespace qs
