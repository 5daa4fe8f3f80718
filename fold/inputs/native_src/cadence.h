// Step cadence (fold/folding/cadence.py's definitions) from each request's step intervals
// (fold.folding.step_intervals), and the intervals of groups of legs pooled, exactly, without
// keeping any interval: each pass reads them again (see PooledSearch). Part of
// fold/_native.cc, its only includer; no Python.

#ifndef FOLD_NATIVE_CADENCE_H_
#define FOLD_NATIVE_CADENCE_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "parallel.h"

namespace fold_native {

// A request's figures in integer nanoseconds: medians and stall sums can end in a half, so
// they are kept doubled. -1 stands for "none" where a figure may be missing.
enum CadenceColumn : std::size_t {
  kLines,
  kIntervals,
  kFirstStepNs,
  kDecodeNs,
  kTailNs,
  kWindowNs,
  kMedian2Ns,
  kP90Ns,
  kP99Ns,
  kMaxNs,
  kJudged,
  kStalls,
  kStall2Ns,
  kCadenceColumns,
};

// The pooled intervals of a group: ranks of the nearest-rank and middle definitions.
struct PooledIntervals {
  std::int64_t count = 0;
  std::int64_t lower_middle = 0, upper_middle = 0, p90 = 0, p99 = 0, max = 0;
};

// Nearest rank (0-based) of `percent` among `count` ordered values: the smallest value with at
// least percent% of them at or below it.
inline std::int64_t nearest_rank(std::int64_t count, std::int64_t percent) {
  return (count * percent + 99) / 100 - 1;
}

// One request's step intervals, in time order: its first time (-1: no line), its intervals
// in 32 bits, kLongInterval standing for the next of its long ones, held whole.
constexpr std::uint32_t kLongInterval = 0xFFFFFFFF;  // fold.folding.step_intervals.LONG
struct RequestTimes {
  std::int64_t leg;
  std::int64_t first;
  const std::uint32_t* gaps;
  std::size_t intervals;
  const std::int64_t* longs;
  std::size_t long_count;

  std::size_t lines() const { return first < 0 ? 0 : intervals + 1; }
};

// Shares of `requests` for `threads` threads by their lines (parallel.h's shares).
inline std::vector<std::size_t> request_shares(const std::vector<RequestTimes>& requests,
                                               unsigned threads) {
  std::vector<std::size_t> before(requests.size() + 1, 0);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    before[i + 1] = before[i] + requests[i].lines();
  }
  return shares(before, threads);
}

// A request's intervals, in time order, in `gaps`, the long ones whole (the caller checked
// that its long ones are as many as its kLongInterval).
inline void intervals_of(const RequestTimes& request, std::vector<std::int64_t>& gaps) {
  gaps.resize(request.intervals);
  const std::int64_t* next_long = request.longs;
  for (std::size_t i = 0; i < request.intervals; ++i) {
    std::uint32_t gap = request.gaps[i];
    gaps[i] = gap == kLongInterval ? *next_long++ : std::int64_t{gap};
  }
}

class CadencePass {
 public:
  // Windows by leg index: the generate window as recorded (attribution band removed).
  CadencePass(std::vector<std::int64_t> starts, std::vector<std::int64_t> ends, double factor)
      : starts_(std::move(starts)), ends_(std::move(ends)), factor_(factor) {}

  std::array<std::vector<std::int64_t>, kCadenceColumns> columns;

  bool knows_leg(std::int64_t leg) const {
    return leg >= 0 && static_cast<std::size_t>(leg) < starts_.size();
  }

  // Every request's figures (requests of known legs), on up to `threads` threads: requests are
  // independent, so each thread takes a share, with intervals of one request at a time.
  void run(const std::vector<RequestTimes>& requests, unsigned threads) {
    for (auto& column : columns) column.assign(requests.size(), 0);
    std::vector<std::size_t> cuts = request_shares(requests, threads);
    in_parallel(cuts.size() - 1, [&](std::size_t part) {
      std::vector<std::int64_t> gaps;
      for (std::size_t i = cuts[part]; i < cuts[part + 1]; ++i) {
        intervals_of(requests[i], gaps);
        add(i, requests[i], gaps);
      }
    });
  }

 private:
  void add(std::size_t row, const RequestTimes& request, std::vector<std::int64_t>& gap_list) {
    std::size_t count = request.lines();
    if (count == 0) return;  // all columns stay 0; such a row is dropped in Python
    std::int64_t start = starts_[static_cast<std::size_t>(request.leg)];
    std::int64_t end = ends_[static_cast<std::size_t>(request.leg)];
    // The last time: the first and every interval, a sum the caller checked stays below 2^63.
    std::int64_t highest = request.first;
    for (std::int64_t gap : gap_list) highest += gap;
    // A step in the band around the window counts as at its edge.
    std::int64_t first = std::min(std::max(request.first, start), end);
    std::int64_t last = std::max(std::min(highest, end), start);
    auto intervals = static_cast<std::int64_t>(count - 1);
    std::int64_t* gaps = gap_list.data();
    std::int64_t median2 = -1, p90 = -1, p99 = -1, max = -1, stalls = 0, stall2 = 0;
    bool judged = false;
    if (intervals > 0) {
      std::int64_t* stop = gaps + intervals;
      // Successive selections, each within the part the last one left at or above its rank.
      std::int64_t upper = intervals / 2, lower = (intervals - 1) / 2;
      std::int64_t r90 = nearest_rank(intervals, 90), r99 = nearest_rank(intervals, 99);
      std::nth_element(gaps, gaps + upper, stop);
      std::int64_t upper_value = gaps[upper];
      std::int64_t lower_value =
          lower == upper ? upper_value : *std::max_element(gaps, gaps + upper);
      std::nth_element(gaps + upper, gaps + r90, stop);
      p90 = gaps[r90];  // read before the next selection moves it
      std::nth_element(gaps + r90, gaps + r99, stop);
      p99 = gaps[r99];
      median2 = lower_value + upper_value;
      max = *std::max_element(gaps + r99, stop);
      judged = median2 > 0;
      if (judged) {
        // A stall is longer than a positive multiple of the median: never below the upper
        // middle, where the selections left every interval at or above it.
        double threshold = factor_ * (static_cast<double>(median2) / 2.0);
        for (std::int64_t* gap = gaps + upper; gap != stop; ++gap) {
          if (static_cast<double>(*gap) > threshold) {
            ++stalls;
            stall2 += 2 * *gap - median2;
          }
        }
      }
    }
    std::int64_t figures[kCadenceColumns] = {
        static_cast<std::int64_t>(count),
        intervals,
        std::max<std::int64_t>(0, first - start),
        std::max<std::int64_t>(0, last - first),
        std::max<std::int64_t>(0, end - last),
        end - start,
        median2,
        p90,
        p99,
        max,
        judged,
        judged ? stalls : -1,
        judged ? stall2 : -1,
    };
    for (std::size_t i = 0; i < kCadenceColumns; ++i) columns[i][row] = figures[i];
  }

  std::vector<std::int64_t> starts_, ends_;
  double factor_;
};

// The pooled intervals of groups of legs, exact, in memory that does not grow with the lines:
// each wanted rank is found a digit at a time from the top, every pass counting, per group and
// per value of the digits found so far, the intervals by their next digit. Once few enough
// intervals share a rank's digits, one more pass keeps just those and selects among them.
// Every pass reads the intervals again from the requests' lists.
class PooledSearch {
 public:
  // `counts` and `maxima`: each request's intervals and its largest (cadence columns).
  PooledSearch(const std::vector<RequestTimes>& requests, const std::vector<std::int64_t>& counts,
               const std::vector<std::int64_t>& maxima,
               const std::vector<std::vector<std::int64_t>>& groups, unsigned threads)
      : requests_(requests), threads_(std::max(1u, threads)) {
    found.resize(groups.size());
    std::vector<std::int64_t> leg_count, leg_max;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (counts[i] <= 0) continue;
      auto leg = static_cast<std::size_t>(requests[i].leg);
      if (leg_count.size() <= leg) {
        leg_count.resize(leg + 1, 0);
        leg_max.resize(leg + 1, 0);
      }
      leg_count[leg] += counts[i];
      leg_max[leg] = std::max(leg_max[leg], maxima[i]);
    }
    member_of_.resize(leg_count.size());
    for (std::size_t group = 0; group < groups.size(); ++group) {
      std::vector<std::int64_t> legs = groups[group];
      std::sort(legs.begin(), legs.end());
      legs.erase(std::unique(legs.begin(), legs.end()), legs.end());
      std::int64_t count = 0, max = 0;
      for (std::int64_t leg : legs) {
        if (leg < 0 || static_cast<std::size_t>(leg) >= leg_count.size()) continue;
        auto index = static_cast<std::size_t>(leg);
        if (leg_count[index] == 0) continue;
        count += leg_count[index];
        max = std::max(max, leg_max[index]);
        member_of_[index].push_back(group);
      }
      found[group].count = count;
      if (count == 0) continue;
      int bits = 0;
      while (bits < 63 && (max >> bits) != 0) ++bits;
      for (std::int64_t rank : {(count - 1) / 2, count / 2, nearest_rank(count, 90),
                                nearest_rank(count, 99), count - 1}) {
        ranks_.push_back(Rank{group, rank, 0, bits, 0});
      }
    }
  }

  std::vector<PooledIntervals> found;

  void run() {
    // Each pass settles at least one more bit of every open rank: 63 passes at the most.
    for (int passes = 0; passes < 64; ++passes) {
      bool open = false;
      for (const Rank& rank : ranks_) open |= rank.low_bits > 0;
      if (!open) break;
      pass();
    }
    for (std::size_t group = 0; group < found.size(); ++group) {
      if (found[group].count == 0) continue;
      const Rank* ranks = &ranks_[first_rank(group)];
      found[group].lower_middle = ranks[0].prefix;
      found[group].upper_middle = ranks[1].prefix;
      found[group].p90 = ranks[2].prefix;
      found[group].p99 = ranks[3].prefix;
      found[group].max = ranks[4].prefix;
    }
  }

 private:
  // A digit is 14 bits while the probes are few (the first pass: one a group), 11 after, so
  // that every thread's counts stay within a few MiB; values are kept once a pass would hold
  // at most 2^18 of them (2 MiB) over all its probes: a pass more costs less than holding a
  // steady pace's intervals, which crowd into the middle ranks' digits.
  static constexpr int kWideDigit = 14;
  static constexpr int kNarrowDigit = 11;
  static constexpr std::size_t kWideProbes = 64;
  static constexpr std::int64_t kKeptAtMost = std::int64_t{1} << 18;

  // A wanted rank: the values whose top bits are `prefix` (all but the `low_bits` lowest)
  // hold it, at `rank` among them; `among`: how many share the prefix (0: not yet counted).
  struct Rank {
    std::size_t group;
    std::int64_t rank;
    std::int64_t prefix;
    int low_bits;
    std::int64_t among;
  };

  // What one pass asks of the intervals of a group sharing `prefix`: their count by the next
  // digit (`digit_bits` of them), or with `keep`, the values themselves.
  struct Probe {
    std::size_t group;
    std::int64_t prefix;
    int low_bits;
    int digit_bits;
    bool keep;
    std::int64_t among;  // how many share the prefix (0: not yet counted)
  };

  std::size_t first_rank(std::size_t group) const {
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      if (ranks_[i].group == group) return i;
    }
    return ranks_.size();
  }

  void pass() {
    std::vector<Probe> probes;
    std::vector<std::size_t> probe_of(ranks_.size());
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      const Rank& rank = ranks_[i];
      if (rank.low_bits == 0) continue;
      std::size_t at = 0;
      while (at < probes.size() &&
             !(probes[at].group == rank.group && probes[at].prefix == rank.prefix &&
               probes[at].low_bits == rank.low_bits)) {
        ++at;
      }
      if (at == probes.size()) {
        probes.push_back(Probe{rank.group, rank.prefix, rank.low_bits, 0, false, rank.among});
      }
      probe_of[i] = at;
    }
    int width = probes.size() <= kWideProbes ? kWideDigit : kNarrowDigit;
    std::vector<Probe*> counted_before;  // the probes whose values were counted last pass
    for (Probe& probe : probes) {
      probe.digit_bits = std::min(width, probe.low_bits);
      if (probe.among > 0) counted_before.push_back(&probe);
    }
    // The fewest first, within the pass's bound: the others are counted by digit again.
    std::sort(counted_before.begin(), counted_before.end(),
              [](const Probe* a, const Probe* b) { return a->among < b->among; });
    std::int64_t kept_values = 0;
    for (Probe* probe : counted_before) {
      if (kept_values + probe->among > kKeptAtMost) break;
      kept_values += probe->among;
      probe->keep = true;
    }
    auto digits = static_cast<std::size_t>(1) << width;
    // Per leg, the probes of the groups it is in.
    std::vector<std::vector<std::size_t>> leg_probes(member_of_.size());
    for (std::size_t leg = 0; leg < member_of_.size(); ++leg) {
      for (std::size_t group : member_of_[leg]) {
        for (std::size_t at = 0; at < probes.size(); ++at) {
          if (probes[at].group == group) leg_probes[leg].push_back(at);
        }
      }
    }
    std::vector<std::size_t> cuts = request_shares(requests_, threads_);
    std::size_t parts = cuts.size() - 1;
    std::vector<std::vector<std::int64_t>> counted(parts);
    std::vector<std::vector<std::vector<std::int64_t>>> kept(parts);
    in_parallel(parts, [&](std::size_t part) {
      std::vector<std::int64_t>& histogram = counted[part];
      std::vector<std::vector<std::int64_t>>& values = kept[part];
      histogram.assign(probes.size() * digits, 0);
      values.resize(probes.size());
      std::vector<std::int64_t> gaps;
      for (std::size_t i = cuts[part]; i < cuts[part + 1]; ++i) {
        auto leg = static_cast<std::size_t>(requests_[i].leg);
        if (leg >= leg_probes.size() || leg_probes[leg].empty()) continue;
        intervals_of(requests_[i], gaps);
        for (std::int64_t gap : gaps) {
          for (std::size_t at : leg_probes[leg]) {
            const Probe& probe = probes[at];
            if ((gap >> probe.low_bits) != probe.prefix) continue;
            if (probe.keep) {
              values[at].push_back(gap);
            } else {
              std::int64_t digit =
                  (gap >> (probe.low_bits - probe.digit_bits)) & ((1 << probe.digit_bits) - 1);
              ++histogram[at * digits + static_cast<std::size_t>(digit)];
            }
          }
        }
      }
    });
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      Rank& rank = ranks_[i];
      if (rank.low_bits == 0) continue;
      std::size_t at = probe_of[i];
      const Probe& probe = probes[at];
      if (probe.keep) {
        // The parts' values gathered into the first's, once: ranks may share the probe.
        std::vector<std::int64_t>& values = kept[0][at];
        for (std::size_t part = 1; part < kept.size(); ++part) {
          values.insert(values.end(), kept[part][at].begin(), kept[part][at].end());
          std::vector<std::int64_t>().swap(kept[part][at]);
        }
        std::nth_element(values.begin(), values.begin() + rank.rank, values.end());
        rank.prefix = values[static_cast<std::size_t>(rank.rank)];
        rank.low_bits = 0;
        continue;
      }
      std::int64_t below = 0;
      for (std::int64_t digit = 0; digit < (std::int64_t{1} << probe.digit_bits); ++digit) {
        std::int64_t here = 0;
        for (auto& part : counted) {
          here += part[at * digits + static_cast<std::size_t>(digit)];
        }
        if (rank.rank < below + here) {
          rank.prefix = rank.prefix << probe.digit_bits | digit;
          rank.low_bits -= probe.digit_bits;
          rank.rank -= below;
          rank.among = here;
          break;
        }
        below += here;
      }
    }
  }

  const std::vector<RequestTimes>& requests_;
  unsigned threads_;
  std::vector<Rank> ranks_;
  std::vector<std::vector<std::size_t>> member_of_;  // by leg: the groups it is in
};

}  // namespace fold_native

#endif  // FOLD_NATIVE_CADENCE_H_
