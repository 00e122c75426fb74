#include "engine/ttft_predictor.h"

#include <algorithm>
#include <cmath>
#include <deque>

namespace qs {
namespace {

struct SimSequence {
  int64_t prefill = 0;      // tokens still to compute before it decodes; 0: decoding
  double decode_left = 0;   // tokens it still generates (the first included while prefilling)
  int64_t first_step = 1;   // the earliest step it may be admitted in
  bool target = false;      // one of the predicted request's choices
  bool later_class = false; // waiting, of a later priority class: ahead only in the step in progress
  bool decoding = false;    // decodes in the current step (its prompt was done before it)
};

constexpr int64_t kMaxIterations = 1'000'000;  // a bound on the work of one prediction
constexpr double kHorizonS = 24 * 3600.0;      // predictions stop growing here

// Output lengths of one replay: the mean rule, or the replay's quantile of each sequence's
// conditional distribution (the file comment of ttft_predictor.h).
class OutputDraw {
 public:
  OutputDraw(const LoadSnapshot& load, int replay) : load_(load), replay_(replay) {}

  /// Total completion tokens the next sequence (in replay order) is expected to end with.
  int64_t total(int64_t max_tokens, int64_t generated) {
    max_tokens = std::max<int64_t>(max_tokens, 1);
    const std::vector<double>& samples = load_.output_samples;
    if (samples.size() < kMinOutputSamples) {
      const auto expected = static_cast<int64_t>(std::ceil(std::clamp(load_.output_ratio, 0.0, 1.0) * static_cast<double>(max_tokens)));
      return std::min(max_tokens, std::max(generated + 1, expected));
    }
    constexpr double kPhi = 0.6180339887498949;
    const double u_raw = (replay_ + 0.5) / kOutputReplays + static_cast<double>(sequence_++) * kPhi;
    const double u = u_raw - std::floor(u_raw);
    const auto length = [&](double r) {
      return std::clamp(static_cast<int64_t>(std::ceil(std::clamp(r, 0.0, 1.0) * static_cast<double>(max_tokens) - 1e-9)), int64_t{1}, max_tokens);
    };
    // Samples are ascending, so are their lengths: the ones outliving `generated` are a suffix.
    const auto first = std::partition_point(samples.begin(), samples.end(), [&](double r) { return length(r) <= generated; });
    const auto n = samples.end() - first;
    if (n == 0) return std::min(max_tokens, generated + 1);
    const auto k = std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(u * static_cast<double>(n)), n - 1);
    return length(first[k]);
  }

 private:
  const LoadSnapshot& load_;
  int replay_;
  int64_t sequence_ = 0;
};

int64_t uncached(const LoadSnapshot& load, int64_t tokens) {
  const double hit = std::clamp(load.prefix_hit_ratio, 0.0, 1.0);
  return std::max<int64_t>(1, std::llround(static_cast<double>(tokens) * (1.0 - hit)));
}

SimSequence queued(const LoadSnapshot& load, OutputDraw& draw, int64_t tokens, int64_t max_tokens, int64_t generated, int64_t first_step) {
  return {uncached(load, tokens), static_cast<double>(std::max<int64_t>(draw.total(max_tokens, generated) - generated, 1)), first_step, false};
}

// `n` sequences sharing the sums of `u` evenly (the first ones take the remainders).
void add_unseen(const LoadSnapshot& load, OutputDraw& draw, const UnseenRequests& u, int64_t first_step, std::deque<SimSequence>& queue) {
  for (int64_t i = 0; i < u.sequences; ++i) {
    const int64_t prompt = u.prompt_tokens / u.sequences + (i < u.prompt_tokens % u.sequences ? 1 : 0);
    const int64_t max_tokens = u.max_tokens / u.sequences + (i < u.max_tokens % u.sequences ? 1 : 0);
    queue.push_back(queued(load, draw, std::max<int64_t>(prompt, 1), max_tokens, 0, first_step));
  }
}

int64_t chunk_cap(const LoadSnapshot& load, int64_t n_dec) {
  if (n_dec <= 0) return load.max_batched_tokens;
  const auto i = static_cast<size_t>(n_dec);
  if (i < load.prefill_chunk.size()) return std::max<int64_t>(load.prefill_chunk[i], 1);
  return load.prefill_chunk.empty() ? load.max_batched_tokens : std::max<int64_t>(load.prefill_chunk.back(), 1);
}

// One replay of the scheduler's coming steps with the output lengths of `draw`.
TtftPrediction replay(const LoadSnapshot& load, int64_t prompt_tokens, int32_t priority, int64_t n_choices, OutputDraw& draw) {
  TtftPrediction p;
  const bool busy = load.step_in_progress;
  const int64_t join = busy ? 2 : 1;  // the step the requests not yet in the scheduler can join
  std::vector<SimSequence> running;
  for (const PendingSequence& s : load.running) {
    const int64_t out = draw.total(s.max_tokens, s.generated);
    running.push_back({std::max<int64_t>(s.prefill_tokens, 0), static_cast<double>(std::max<int64_t>(out - s.generated, 1)), 1, false});
  }
  std::deque<SimSequence> queue, later;
  // The step in progress admits from the whole queue; the request then joins ahead of the later
  // classes, so those still waiting after step 1 move behind it (they may still take what its
  // last step leaves of the budget).
  for (const PendingSequence& s : load.waiting) {
    const bool is_later = !s.preempted && s.priority > priority;
    (is_later && !busy ? later : queue).push_back(queued(load, draw, s.prefill_tokens, s.max_tokens, s.generated, 1));
    if (is_later && busy) queue.back().later_class = true;
  }
  add_unseen(load, draw, load.taken, 1, queue);
  add_unseen(load, draw, load.incoming, join, queue);
  for (int64_t i = 0; i < std::max<int64_t>(n_choices, 1); ++i) {
    SimSequence own = queued(load, draw, std::max<int64_t>(prompt_tokens, 1), 1, 0, join);
    own.target = true;
    queue.push_back(own);
  }
  p.ahead = static_cast<int64_t>(running.size() + queue.size()) - std::max<int64_t>(n_choices, 1);
  queue.insert(queue.end(), later.begin(), later.end());
  const auto max_seqs = static_cast<size_t>(std::max<int64_t>(load.max_num_seqs, 1));
  // Speculative decoding: a decode carries `draft` tokens priced like prefill tokens and gains
  // `gain` tokens; the first token after a prompt is one token (drafts follow decodes only).
  const double draft = std::max(load.draft_tokens_per_decode, 0.0);
  const double gain = std::max(load.tokens_per_decode, 1.0);
  const auto drafts_of = [&](int64_t n_dec) -> int64_t { return std::llround(static_cast<double>(n_dec) * draft); };
  double t = 0;
  bool seen_target = false;
  int64_t step = 1;
  for (int64_t iteration = 0; iteration < kMaxIterations && t < kHorizonS; ++iteration, ++step) {
    const bool all_decode = std::all_of(running.begin(), running.end(), [](const SimSequence& s) { return s.prefill == 0; });
    // Every slot decodes and nobody can be admitted: k identical steps until the first one ends.
    if (step > 1 && running.size() >= max_seqs && all_decode) {
      double fewest = INFINITY;
      for (const SimSequence& s : running) fewest = std::min(fewest, s.decode_left);
      const int64_t k = std::max<int64_t>(static_cast<int64_t>(std::ceil(fewest / gain - 1e-9)), 1);
      const auto n = static_cast<int64_t>(running.size());
      t += static_cast<double>(k) * load.costs.step_s(n, std::min(drafts_of(n), std::max<int64_t>(load.max_batched_tokens - n, 0)));
      p.steps += k;
      p.decode_only_steps += k;
      for (SimSequence& s : running) s.decode_left -= static_cast<double>(k) * gain;
      std::erase_if(running, [](const SimSequence& s) { return s.decode_left <= 1e-9; });
      step += k - 1;
      continue;
    }
    // Decodes: one token each; a sequence with one prompt token left computes it the same way.
    int64_t n_dec = 0;
    for (SimSequence& s : running) {
      if (s.prefill <= 1) {
        ++n_dec;
        s.prefill = 0;
      }
    }
    const int64_t n_draft = std::min(drafts_of(n_dec), std::max<int64_t>(load.max_batched_tokens - n_dec, 0));
    int64_t budget = std::max<int64_t>(load.max_batched_tokens - n_dec - n_draft, 0);
    if (n_dec > 0) budget = std::min(budget, chunk_cap(load, n_dec));
    int64_t logits_rows = n_dec, other_prefill = n_draft;
    for (SimSequence& s : running) s.decoding = s.prefill == 0;
    const auto take = [&](SimSequence& s) {
      const int64_t n = std::min(budget, s.prefill);
      budget -= n;
      s.prefill -= n;
      const bool ends = s.prefill == 0;
      logits_rows += ends ? 1 : 0;
      other_prefill += ends ? n - 1 : n;
    };
    const size_t n_before = running.size();
    for (size_t i = 0; i < n_before && budget > 0; ++i) {
      if (running[i].prefill > 0) take(running[i]);
    }
    while (budget > 0 && !queue.empty() && queue.front().first_step <= step && running.size() < max_seqs) {
      if (queue.front().target && !seen_target) {
        seen_target = true;
        p.queue_s = t;  // the request's first choice is admitted in this step
      }
      running.push_back(queue.front());
      queue.pop_front();
      take(running.back());
    }
    double cost = load.costs.step_s(logits_rows, other_prefill);
    if (step == 1 && busy) cost = std::max(0.0, cost - load.step_age_s);
    t += cost;
    ++p.steps;
    p.decode_only_steps += logits_rows + other_prefill == n_dec + n_draft ? 1 : 0;
    p.prefill_tokens += logits_rows + other_prefill - n_dec - n_draft;
    // Every sequence whose prompt is done yields a token (its first, or one more).
    for (SimSequence& s : running) {
      if (s.prefill > 0) continue;
      if (s.target) {
        p.ttft_s = t;
        return p;
      }
      s.decode_left -= s.decoding ? gain : 1.0;
    }
    std::erase_if(running, [](const SimSequence& s) { return s.prefill == 0 && s.decode_left <= 1e-9; });
    if (step == 1) {
      std::stable_partition(queue.begin(), queue.end(), [](const SimSequence& s) { return !s.later_class; });
    }
    if (running.empty() && queue.empty()) break;
  }
  p.ttft_s = t;
  return p;
}

}  // namespace

TtftPrediction predict_ttft(const LoadSnapshot& load, int64_t prompt_tokens, int32_t priority, int64_t n_choices) {
  if (!load.costs.known()) return {};
  // The mean rule (too few samples) gives every replay the same lengths: one is enough.
  const int n_replays = load.output_samples.size() < kMinOutputSamples ? 1 : kOutputReplays;
  std::vector<TtftPrediction> replays;
  replays.reserve(static_cast<size_t>(n_replays));
  for (int i = 0; i < n_replays; ++i) {
    OutputDraw draw(load, i);
    replays.push_back(replay(load, prompt_tokens, priority, n_choices, draw));
  }
  const auto median = replays.begin() + n_replays / 2;
  std::nth_element(replays.begin(), median, replays.end(),
                   [](const TtftPrediction& a, const TtftPrediction& b) { return a.ttft_s < b.ttft_s; });
  return *median;
}

}  // namespace qs
