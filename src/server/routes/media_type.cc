#include "server/routes/media_type.h"

#include <cctype>

namespace qs {
namespace {

bool is_ows(char c) { return c == ' ' || c == '\t'; }  // RFC 9110 section 5.6.3

}  // namespace

bool is_json_media_type(std::string_view content_type) {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && is_ows(type.front())) type.remove_prefix(1);
  while (!type.empty() && is_ows(type.back())) type.remove_suffix(1);
  constexpr std::string_view kJson = "application/json";
  if (type.size() != kJson.size()) return false;
  for (size_t i = 0; i < type.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(type[i])) != kJson[i]) return false;
  }
  return true;
}

}  // namespace qs
