// allOf for JSON Schema generation: several schemas merged into one schema object whose
// instances satisfy every member (internal to json_schema_grammar.cc).
#pragma once

#include <string>
#include <vector>
#include <nlohmann/json.hpp>

namespace qs::constrained {

/// Keywords that never constrain an instance (ignored by the compiler and the merge).
bool is_schema_annotation(const std::string& keyword);

/// Merges schema objects (each already free of a top-level "$ref"): properties are united (a
/// property in several members becomes {"allOf": [...]}), required lists united, types
/// intersected, lower bounds maximised and upper bounds minimised; a member with
/// additionalProperties: false removes the other members' extra optional properties (extra
/// required ones are an error). Other keywords must be equal in every member that has them.
/// Throws qs::Error("json_schema: allOf ... at <path>") naming the keyword that cannot be merged.
nlohmann::ordered_json merge_schemas(const std::vector<nlohmann::ordered_json>& members,
                                     const std::string& path);

}  // namespace qs::constrained
