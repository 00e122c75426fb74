// Global names: true/false/none (also True/False/None), namespace(), range(), raise_exception()
// and strftime_now().
#include <cmath>
#include <ctime>

#include "jinja/template_builtins.h"
#include "jinja/template_error.h"
#include "jinja/template_text.h"

namespace qs::chat {
namespace {

constexpr double kMaxRangeLength = 1 << 24;

// namespace(mapping_or_pairs?, **kwargs): a fresh mutable namespace.
Value make_namespace(const CallArgs& args, Environment&) {
  if (args.positional.size() > 1)
    fail("namespace expected at most 1 argument, got " + std::to_string(args.positional.size()));
  Object fields;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_object()) {
      for (const auto& [key, value] : source.fields().entries()) fields.set(key, value);
    } else if (source.is_array()) {
      for (const Value& pair : source.items()) {
        if (!pair.is_array() || pair.items().size() != 2)
          fail("namespace expected an object or an iterable of [key, value] pairs");
        if (!pair.items()[0].is_string()) fail("namespace keys must be strings");
        fields.set(pair.items()[0].str(), pair.items()[1]);
      }
    } else {
      fail(std::string("'") + source.type_name() + "' object is not iterable");
    }
  }
  for (const auto& [key, value] : args.keyword) fields.set(key, value);
  return Value::object(std::move(fields), ValueKind::kNamespace);
}

// range(stop) / range(start, stop[, step]) like Python's, on JavaScript numbers.
Value make_range(const CallArgs& args, Environment&) {
  for (const Value& arg : args.positional) {
    if (!arg.is_number())
      fail(std::string("range() arguments must be numbers, got ") + arg.type_name());
  }
  if (args.positional.empty() || args.positional.size() > 3) fail("range() takes 1 to 3 arguments");
  const bool single = args.positional.size() == 1;
  const double start = single ? 0 : args.positional[0].number();
  const double stop = single ? args.positional[0].number() : args.positional[1].number();
  const double step = args.positional.size() == 3 ? args.positional[2].number() : 1;
  if (step == 0) fail("range() step must not be zero");
  if (std::fabs((stop - start) / step) > kMaxRangeLength) fail("range() is too long");
  Array out;
  for (double i = start; step > 0 ? i < stop : i > stop; i += step)
    out.push_back(i == std::trunc(i) ? Value::integer(i) : Value::floating(i));
  return Value::array(std::move(out));
}

Value raise_exception(const CallArgs& args, Environment&) {
  const Value message = args.positional.empty() ? Value() : args.positional[0];
  throw TemplateError(message.is_undefined() ? "" : raw_string(message));
}

// strftime_now(format): local time; supports %Y %m %d %b %B %H %M and %%, like the reference.
Value strftime_now(const CallArgs& args, Environment&) {
  static const char* const kMonths[] = {"January",   "February", "March",    "April",
                                        "May",       "June",     "July",     "August",
                                        "September", "October",  "November", "December"};
  if (args.positional.empty() || !args.positional[0].is_string())
    fail("strftime_now() needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  const auto pad2 = [](int n) {
    std::string digits = std::to_string(n);
    if (n < 10) digits.insert(digits.begin(), '0');
    return digits;
  };
  const std::string& format = args.positional[0].str();
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    const char spec = i + 1 < format.size() && format[i] == '%' ? format[i + 1] : '\0';
    std::string piece;
    switch (spec) {
      case 'Y': piece = std::to_string(local.tm_year + 1900); break;
      case 'm': piece = pad2(local.tm_mon + 1); break;
      case 'd': piece = pad2(local.tm_mday); break;
      case 'b': piece = std::string(kMonths[local.tm_mon]).substr(0, 3); break;
      case 'B': piece = kMonths[local.tm_mon]; break;
      case 'H': piece = pad2(local.tm_hour); break;
      case 'M': piece = pad2(local.tm_min); break;
      case '%': piece = "%"; break;
      default: out += format[i]; continue;
    }
    out += piece;
    ++i;
  }
  return Value::string(std::move(out));
}

}  // namespace

void install_globals(Environment& globals) {
  globals.set("true", Value::boolean(true));
  globals.set("false", Value::boolean(false));
  globals.set("none", Value::null());
  globals.set("True", Value::boolean(true));
  globals.set("False", Value::boolean(false));
  globals.set("None", Value::null());
  globals.set("namespace", Value::function(make_namespace));
  globals.set("range", Value::function(make_range));
  globals.set("raise_exception", Value::function(raise_exception));
  globals.set("strftime_now", Value::function(strftime_now));
}

}  // namespace qs::chat
