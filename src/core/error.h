// Error type thrown by every loader, parser and validator in qwenserve.
//
// Messages are one line and name the thing at fault (file path, tensor name, JSON field) and the
// problem, e.g. "model.gguf: tensor 'blk.0.attn_q.weight' data ends at byte 912 past end of file
// (size 800)". The CLI prints `error: <message>` and exits with code 1.
#pragma once

#include <stdexcept>
#include <string>

namespace qs {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace qs
