// Reading a Content-Type field value (RFC 9110 section 8.3): media-type = type "/" subtype
// *( OWS ";" OWS parameter ), with type and subtype case-insensitive (section 8.3.1).
#pragma once

#include <string_view>

namespace qs {

/// True when `content_type` names application/json: type and subtype compared without regard to
/// case, whitespace around them and any parameters (e.g. "; charset=utf-8") ignored. False for
/// every other media type, including ones that merely start with it ("application/jsonx") and an
/// empty value.
bool is_json_media_type(std::string_view content_type);

}  // namespace qs
