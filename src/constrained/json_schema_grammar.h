// JSON Schema -> grammar of the compact JSON texts (no whitespace) that validate against it.
//
// Supported keywords (anything else that constrains is a qs::Error naming the keyword and where):
//   type (string or list; "integer", "number", "string", "boolean", "null", "object", "array"),
//   properties, required, additionalProperties (false, true or a schema), enum, const, items
//   (schema, false, or a list = prefixItems), prefixItems, additionalItems, minItems, maxItems,
//   minLength, maxLength, pattern (regex_grammar.h subset, searched as JSON Schema specifies),
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum (number or draft-4 boolean), anyOf, oneOf
//   (generated like anyOf: keep branches disjoint), allOf (merged: objects, ranges, types), $ref to
//   "#", "#/$defs/...", "#/definitions/..." or any JSON pointer into the document (recursion
//   allowed; compile stops at CompileLimits::max_schema_depth nested schemas), $defs/definitions.
// Annotations are ignored: title, description, $schema, $id, $comment, default, examples,
// deprecated, readOnly, writeOnly.
//
// Generation choices (each output still validates): properties come in the schema's order; with
// "properties" and no "additionalProperties", no extra properties are generated; extra property
// names (when allowed) are printable ASCII and differ from the declared names; integers and
// numbers have at most 15 integer digits; pattern cannot be combined with minLength/maxLength.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "constrained/grammar.h"

namespace qs::constrained {

struct CompileLimits;

/// Adds rules for `schema` (the whole document; $ref pointers resolve inside it) and returns the
/// root rule. Throws qs::Error("json_schema: ...") for unsupported keywords, malformed or
/// unsatisfiable schemas and exceeded limits.
int32_t add_json_schema(GrammarBuilder& builder, const nlohmann::ordered_json& schema,
                        const CompileLimits& limits);

/// Any JSON object (compact), values of any JSON type: response_format {"type": "json_object"}.
int32_t add_json_object(GrammarBuilder& builder);

}  // namespace qs::constrained
