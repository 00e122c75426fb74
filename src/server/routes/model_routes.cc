#include "server/routes/model_routes.h"

#include <algorithm>
#include <vector>

#include "server/job_builder.h"
#include "server/routes/http_reply.h"

namespace qs {

nlohmann::json model_object(const std::string& name, int64_t context_tokens, int64_t created_unix_s) {
  return {{"id", name}, {"object", "model"}, {"created", created_unix_s}, {"owned_by", "qwenserve"},
          {"max_model_len", context_tokens}};
}

void handle_list_models(const ServerOptions& options, int64_t context_tokens, int64_t created_unix_s,
                        httplib::Response& res) {
  std::vector<std::string> names{options.served_model_name};
  names.insert(names.end(), options.served_model_aliases.begin(), options.served_model_aliases.end());
  nlohmann::json data = nlohmann::json::array();
  for (auto it = names.begin(); it != names.end(); ++it) {
    if (std::find(names.begin(), it, *it) == it) data.push_back(model_object(*it, context_tokens, created_unix_s));  // each name once
  }
  send_json(res, 200, {{"object", "list"}, {"data", data}});
}

void handle_retrieve_model(const std::string& name, const ServerOptions& options, int64_t context_tokens,
                           int64_t created_unix_s, httplib::Response& res) {
  send_json(res, 200, model_object(served_model_for(name, options), context_tokens, created_unix_s));  // throws 404 for others
}

}  // namespace qs
