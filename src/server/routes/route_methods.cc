#include "server/routes/route_methods.h"

#include <algorithm>

namespace qs {

void RouteMethods::add(const std::string& method, const std::string& pattern) {
  routes_.emplace_back(method, std::regex(pattern));
}

std::vector<std::string> RouteMethods::allowed(const std::string& path) const {
  std::vector<std::string> out;
  auto add_once = [&out](const std::string& m) {
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  };
  for (const auto& [method, pattern] : routes_) {
    if (!std::regex_match(path, pattern)) continue;
    add_once(method);
    if (method == "GET") add_once("HEAD");
  }
  return out;
}

std::string allow_header_value(const std::vector<std::string>& methods) {
  std::string out;
  for (const auto& m : methods) out += (out.empty() ? "" : ", ") + m;
  return out;
}

}  // namespace qs
