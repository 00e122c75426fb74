// Parsing JSON text into nlohmann::ordered_json in time linear in the text's size.
//
// nlohmann::ordered_json::parse inserts each member through ordered_map::operator[], which scans
// the object's members for a duplicate key first: an object of N members costs O(N^2) key
// comparisons (a 640 KB request body with 50,000 members took seconds of CPU). This parser
// appends members to the object's vector and finds duplicates through a hash index kept while
// the object is open, with the same result as ordered_json::parse: members in document order,
// and a duplicated key keeps its first position with the last value given for it.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>

namespace qs {

/// Thrown by parse_ordered_json when objects and arrays nest deeper than its `max_depth`.
class JsonTooDeep : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses `text` (RFC 8259 JSON, no comments, nothing but whitespace after the value) into an
/// ordered_json equal to nlohmann::ordered_json::parse(text), in O(size of text) expected time.
/// `max_depth`: the most objects and arrays that may be open at once (a top-level scalar is
/// depth 0, `[]` is 1, `[[]]` is 2); opening one more throws JsonTooDeep before it is built;
/// negative means no limit. Throws nlohmann::json::parse_error (same messages as
/// ordered_json::parse) on malformed text.
nlohmann::ordered_json parse_ordered_json(std::string_view text, int max_depth = -1);

}  // namespace qs
