#include "server/degradation.h"

namespace qs {

bool degraded_now(const ServerOptions& options, const EngineStats& stats) {
  const bool by_kv = options.degrade_at_kv > 0 && stats.kv_cache_usage >= options.degrade_at_kv;
  const bool by_queue = options.degrade_at_queue > 0 && stats.waiting >= options.degrade_at_queue;
  return by_kv || by_queue;
}

bool template_has_thinking_switch(const std::string& template_source) {
  return template_source.find("enable_thinking") != std::string::npos;
}

}  // namespace qs
