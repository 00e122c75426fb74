// Internal to the JSON Schema compiler (json_schema_grammar.cc, json_schema_containers.cc): the
// class that walks a schema document and emits grammar rules. Not part of the public API.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constrained/char_classes.h"
#include "constrained/grammar.h"
#include "core/error.h"

namespace qs::constrained {

struct CompileLimits;

namespace schema_detail {

using ojson = nlohmann::ordered_json;

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const ojson& doc, const CompileLimits& limits)
      : b_(b), doc_(doc), limits_(limits), chars_(b, true) {}

  Symbol value(const ojson& s, const std::string& path, int depth);
  Symbol value_uncached(const ojson& s, const std::string& path, int depth);
  Symbol any_value();
  Symbol any_object();

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error("json_schema: " + what + " at " + path);
  }
  Symbol literal_json(const ojson& v) { return b_.alt({GrammarBuilder::literal(v.dump())}, "const"); }
  Symbol ref(const std::string& ref, const std::string& path, int depth);
  const ojson& resolve(const std::string& ref, const std::string& path) const;
  ojson resolve_member(const ojson& m, const std::string& path, int depth) const;
  Symbol typed(const ojson& s, const std::string& type, const std::string& path, int depth);
  Symbol number(const ojson& s, bool integer, const std::string& path);
  Symbol string(const ojson& s, const std::string& path);
  Symbol array(const ojson& s, const std::string& path, int depth);
  Symbol object(const ojson& s, const std::string& path, int depth);
  Symbol key_not_in(const std::vector<std::string>& names, size_t depth);
  int64_t count(const ojson& s, const char* key, const std::string& path) const;
  Symbol any_string() {
    if (any_string_ < 0) {
      any_string_ = b_.add_rule("string", {{Symbol::byte('"'), b_.star({chars_.any_json_string_char()}), Symbol::byte('"')}});
    }
    return Symbol::ref(any_string_);
  }

  GrammarBuilder& b_;
  const ojson& doc_;
  const CompileLimits& limits_;
  CharEmitter chars_;
  std::map<std::string, int32_t> refs_;
  std::map<std::string, Symbol> memo_;  // compact dump of a sub-schema -> its symbol
  int32_t any_value_ = -1, any_object_ = -1, any_string_ = -1;
};

}  // namespace schema_detail
}  // namespace qs::constrained
