#include "loadtest/runner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "loadtest/progress.h"

namespace qs::loadtest {
namespace {

// Records of all requests of a level, appended by the user threads.
class RecordSink {
 public:
  explicit RecordSink(Progress& progress) : progress_(progress) {}
  void add(RequestRecord record) {
    const bool failed = !record.ok();
    {
      std::lock_guard lock(mutex_);
      records_.push_back(std::move(record));
    }
    progress_.add(1, failed);
  }
  std::vector<RequestRecord> take() { return std::move(records_); }

 private:
  Progress& progress_;
  std::mutex mutex_;
  std::vector<RequestRecord> records_;
};

// Plays all turns of one conversation on `client`.
void run_conversation(StreamClient& client, const Conversation& conv, size_t index, bool chat,
                      Clock::time_point run_start, RecordSink& sink) {
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : conv.prefix_messages) messages.push_back(m);
  std::string prompt;
  bool failed = false;
  for (size_t t = 0; t < conv.turns.size(); ++t) {
    const Turn& turn = conv.turns[t];
    RequestRecord record;
    if (failed) {
      record.status = "skipped";
      record.error = "an earlier turn of this conversation failed";
      record.max_tokens = turn.max_tokens;
      record.ttft_ms = record.e2e_ms = std::nan("");
    } else {
      messages.push_back({{"role", "user"}, {"content", turn.user_text}});
      if (!prompt.empty()) prompt += "\n\n";
      prompt += turn.user_text;
      record = client.generate(chat ? messages : nlohmann::json(), prompt, turn.max_tokens, run_start);
      failed = !record.ok();
      messages.push_back({{"role", "assistant"}, {"content", record.text}});
      prompt += "\n\n" + record.text;
    }
    record.conversation = index;
    record.turn = static_cast<int>(t) + 1;
    sink.add(std::move(record));
  }
}

void run_closed_loop(const LevelOptions& opt, const std::vector<Conversation>& workload,
                     Clock::time_point run_start, RecordSink& sink) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> users;
  for (int u = 0; u < opt.concurrency; ++u) {
    users.emplace_back([&] {
      StreamClient client(opt.endpoint);
      for (size_t i = next++; i < workload.size(); i = next++) {
        run_conversation(client, workload[i], i, opt.endpoint.chat, run_start, sink);
      }
    });
  }
  for (auto& t : users) t.join();
}

// One thread per conversation in flight; finished threads are joined as new ones start, so a
// long run holds only the threads (and stacks) of the conversations still running.
void run_open_loop(const LevelOptions& opt, const std::vector<Conversation>& workload,
                   Clock::time_point run_start, RecordSink& sink) {
  const std::vector<double> arrivals =
      arrival_times_s(workload.size(), opt.request_rate, opt.burstiness, opt.seed);
  std::mutex mutex;
  std::condition_variable slot_free;
  int in_flight = 0;
  struct User {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::vector<User> users;
  auto reap_finished = [&users] {
    std::erase_if(users, [](User& u) {
      if (!u.finished->load()) return false;
      u.thread.join();
      return true;
    });
  };
  for (size_t i = 0; i < workload.size(); ++i) {
    std::this_thread::sleep_until(run_start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(arrivals[i])));
    {
      std::unique_lock lock(mutex);
      if (opt.max_concurrency > 0) {
        slot_free.wait(lock, [&] { return in_flight < opt.max_concurrency; });
      }
      ++in_flight;
    }
    reap_finished();
    auto finished = std::make_shared<std::atomic<bool>>(false);
    std::thread thread([&, i, finished] {
      {
        StreamClient client(opt.endpoint);
        run_conversation(client, workload[i], i, opt.endpoint.chat, run_start, sink);
      }
      {
        std::lock_guard lock(mutex);
        --in_flight;
      }
      slot_free.notify_one();
      finished->store(true);
    });
    users.push_back({std::move(thread), std::move(finished)});
  }
  for (auto& u : users) u.thread.join();
}

}  // namespace

LevelResult run_level(const LevelOptions& opt, const std::vector<Conversation>& workload) {
  size_t total = 0;
  int max_turns = 1;
  for (const auto& c : workload) {
    total += c.turns.size();
    max_turns = std::max(max_turns, static_cast<int>(c.turns.size()));
  }
  char label[64];
  if (opt.closed_loop) {
    std::snprintf(label, sizeof label, "concurrency %d", opt.concurrency);
  } else {
    std::snprintf(label, sizeof label, "rate %g req/s", opt.request_rate);
  }
  Progress progress(label, total, opt.show_progress);
  RecordSink sink(progress);
  const Clock::time_point run_start = Clock::now();
  if (opt.closed_loop) {
    run_closed_loop(opt, workload, run_start, sink);
  } else {
    run_open_loop(opt, workload, run_start, sink);
  }
  LevelResult result;
  result.duration_s = std::chrono::duration<double>(Clock::now() - run_start).count();
  progress.finish();
  result.closed_loop = opt.closed_loop;
  result.level = opt.closed_loop ? opt.concurrency : opt.request_rate;
  result.burstiness = opt.burstiness;
  result.turns_per_user = max_turns;
  result.records = sink.take();
  std::sort(result.records.begin(), result.records.end(), [](const auto& a, const auto& b) {
    return a.start_s < b.start_s;
  });
  return result;
}

}  // namespace qs::loadtest
