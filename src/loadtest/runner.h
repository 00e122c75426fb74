// Runs one benchmark level against a server: closed loop (a fixed number of simulated users, each
// sending its next request as soon as the previous one ends) or open loop (conversations start at
// gamma/Poisson arrival times regardless of how many are in flight).
//
// Each simulated user runs on its own std::thread with its own keep-alive connection and plays
// whole conversations: turn t+1 is sent right after turn t ends and carries the history (chat:
// the previous user messages and the server's replies as assistant messages; completions: the same
// texts joined with blank lines). If a turn fails, the conversation's later turns are recorded
// with status "skipped" and not sent.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "loadtest/report.h"
#include "loadtest/sse_client.h"
#include "loadtest/workload.h"

namespace qs::loadtest {

struct LevelOptions {
  EndpointConfig endpoint;
  bool closed_loop = true;
  int concurrency = 1;           // closed loop: number of simulated users
  double request_rate = 0;       // open loop: conversation arrivals per second (may be +inf)
  double burstiness = 1;         // open loop: gamma shape of inter-arrival gaps (1 = Poisson)
  int max_concurrency = 0;       // open loop: cap on conversations in flight (0 = none)
  uint64_t seed = 0;             // arrival times
  bool show_progress = true;
};

LevelResult run_level(const LevelOptions& options, const std::vector<Conversation>& workload);

}  // namespace qs::loadtest
