#include "io/ordered_json_parser.h"

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;
// ordered_map's own emplace and operator[] scan for the key: members are reached through the
// vector it derives from.
using Members = ojson::object_t::Container;

Members& members_of(ojson& object) { return object.get_ref<ojson::object_t&>(); }

// Objects with at most this many members find duplicates by scanning (cheaper than hashing for
// the small objects most bodies hold); a larger object builds its hash index once.
constexpr size_t kScanMembers = 16;

// An object or array being filled.
struct OpenValue {
  ojson* value;
  std::unordered_map<std::string, size_t> index;  // key -> member position, once past kScanMembers
  size_t slot = 0;                                // member the next value goes to (objects)
};

// nlohmann's SAX interface (json_sax in nlohmann/detail/input/json_sax.hpp).
class Builder {
 public:
  explicit Builder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return place(ojson(nullptr)) != nullptr; }
  bool boolean(bool v) { return place(ojson(v)) != nullptr; }
  bool number_integer(ojson::number_integer_t v) { return place(ojson(v)) != nullptr; }
  bool number_unsigned(ojson::number_unsigned_t v) { return place(ojson(v)) != nullptr; }
  bool number_float(ojson::number_float_t v, const ojson::string_t&) { return place(ojson(v)) != nullptr; }
  bool string(ojson::string_t& v) { return place(ojson(std::move(v))) != nullptr; }
  bool binary(ojson::binary_t& v) { return place(ojson::binary(std::move(v))) != nullptr; }
  bool start_object(std::size_t) { return open(ojson::object()); }
  bool start_array(std::size_t) { return open(ojson::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(ojson::string_t& k) {
    OpenValue& top = stack_.back();
    Members& members = members_of(*top.value);
    if (members.size() < kScanMembers) {
      for (size_t i = 0; i < members.size(); ++i) {
        if (members[i].first == k) return at(top, i);
      }
    } else {
      if (top.index.empty()) {
        top.index.reserve(members.size() * 2);
        for (size_t i = 0; i < members.size(); ++i) top.index.emplace(members[i].first, i);
      }
      if (auto it = top.index.find(k); it != top.index.end()) return at(top, it->second);
      top.index.emplace(k, members.size());
    }
    members.emplace_back(std::move(k), nullptr);
    top.slot = members.size() - 1;
    return true;
  }

  // The parse_error (or out_of_range, for a number too large) ordered_json::parse would throw;
  // a template so that the exception keeps its own type.
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    throw e;
  }

  ojson take() { return std::move(root_); }

 private:
  static bool at(OpenValue& top, size_t position) {
    top.slot = position;
    return true;
  }

  // Stores `v` where the document puts it; returns its address (stable while it is open: its
  // container gets no further member until it is closed).
  ojson* place(ojson v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    OpenValue& top = stack_.back();
    if (top.value->is_array()) {
      auto& items = top.value->get_ref<ojson::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    ojson& member = members_of(*top.value)[top.slot].second;
    member = std::move(v);
    return &member;
  }

  bool open(ojson empty) {
    if (max_depth_ >= 0 && stack_.size() >= static_cast<size_t>(max_depth_)) {
      throw JsonTooDeep("JSON nests deeper than " + std::to_string(max_depth_) + " levels");
    }
    ojson* v = place(std::move(empty));
    stack_.push_back(OpenValue{v, {}, 0});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  int max_depth_;
  ojson root_;
  std::vector<OpenValue> stack_;
};

}  // namespace

nlohmann::ordered_json parse_ordered_json(std::string_view text, int max_depth) {
  Builder builder(max_depth);
  ojson::sax_parse(text, &builder);
  return builder.take();
}

}  // namespace qs
