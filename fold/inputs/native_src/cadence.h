// Step cadence (fold/folding/cadence.py's definitions) from each request's step times, and the
// intervals of any group of legs pooled. Part of fold/_native.cc, its only includer; no Python.

#ifndef FOLD_NATIVE_CADENCE_H_
#define FOLD_NATIVE_CADENCE_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

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

// Sorts values (non-negative) in place, least significant digit first over value - minimum, so a
// narrow spread of large values (intervals of a steady pace) takes one or two passes.
inline void radix_sort(std::int64_t* values, std::size_t count,
                       std::vector<std::int64_t>& scratch) {
  if (count < 2) return;
  constexpr int kDigitBits = 11;
  constexpr std::size_t kDigits = std::size_t{1} << kDigitBits;
  auto [low, high] = std::minmax_element(values, values + count);
  std::int64_t minimum = *low;
  auto spread = static_cast<std::uint64_t>(*high - minimum);
  scratch.resize(count);
  std::int64_t* from = values;
  std::int64_t* to = scratch.data();
  std::vector<std::size_t> starts(kDigits);
  for (int shift = 0; shift < 64 && (spread >> shift) != 0; shift += kDigitBits) {
    std::fill(starts.begin(), starts.end(), 0);
    auto digit = [&](std::int64_t value) {
      return static_cast<std::size_t>((static_cast<std::uint64_t>(value - minimum) >> shift) &
                                      (kDigits - 1));
    };
    for (std::size_t i = 0; i < count; ++i) ++starts[digit(from[i])];
    std::size_t total = 0;
    for (auto& start : starts) total += std::exchange(start, total);
    for (std::size_t i = 0; i < count; ++i) to[starts[digit(from[i])]++] = from[i];
    std::swap(from, to);
  }
  if (from != values) std::copy(from, from + count, values);
}

// One request's step times, in any order.
struct RequestTimes {
  std::int64_t leg;
  const std::int64_t* times;
  std::size_t count;
};

class CadencePass {
 public:
  // Windows by leg index: the generate window as recorded (attribution band removed).
  CadencePass(std::vector<std::int64_t> starts, std::vector<std::int64_t> ends, double factor)
      : starts_(std::move(starts)), ends_(std::move(ends)), factor_(factor) {}

  std::array<std::vector<std::int64_t>, kCadenceColumns> columns;

  bool knows_leg(std::int64_t leg) const {
    return leg >= 0 && static_cast<std::size_t>(leg) < starts_.size();
  }

  // Every request's figures (requests of known legs), then each leg's intervals sorted, on up
  // to `threads` threads; requests and legs are independent, so each thread takes a share.
  void run(const std::vector<RequestTimes>& requests, unsigned threads) {
    threads = std::max(1u, threads);
    std::vector<std::size_t> gap_begin(requests.size() + 1, 0);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      std::size_t count = requests[i].count;
      gap_begin[i + 1] = gap_begin[i] + (count > 0 ? count - 1 : 0);
    }
    // Left unwritten here: each thread writes (and first touches) its own requests' part.
    gap_count_ = gap_begin.back();
    gaps_.reset(new std::int64_t[gap_count_]);
    for (auto& column : columns) column.assign(requests.size(), 0);
    // Shares cut where the intervals before reach each thread's part of the whole.
    std::vector<std::size_t> cuts = {0};
    for (unsigned part = 1; part < threads; ++part) {
      std::size_t wanted = gap_count_ / threads * part;
      cuts.push_back(static_cast<std::size_t>(
          std::lower_bound(gap_begin.begin(), gap_begin.end() - 1, wanted) - gap_begin.begin()));
    }
    cuts.push_back(requests.size());
    in_parallel(cuts.size() - 1, [&](std::size_t part) {
      std::vector<std::int64_t> ordered;
      for (std::size_t i = cuts[part]; i < cuts[part + 1]; ++i) {
        add(i, requests[i], gap_begin[i], ordered);
      }
    });
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (gap_begin[i + 1] > gap_begin[i]) {
        note_leg(requests[i].leg, gap_begin[i], gap_begin[i + 1]);
      }
    }
    std::vector<LegIntervals*> legs;
    for (LegIntervals& leg : by_leg_) {
      if (leg.count > 0) legs.push_back(&leg);
    }
    std::size_t parts = std::min<std::size_t>(threads, legs.size());
    in_parallel(parts, [&](std::size_t part) {
      std::vector<std::int64_t> scratch;
      for (std::size_t i = part; i < legs.size(); i += parts) sort_leg(*legs[i], scratch);
    });
  }

  // The intervals of every request of `legs` (duplicates and legs without intervals allowed):
  // each rank is the smallest value with more than `rank` intervals at or below it, counted by
  // binary search in each leg's sorted intervals.
  PooledIntervals pooled(std::vector<std::int64_t> legs) const {
    std::sort(legs.begin(), legs.end());
    legs.erase(std::unique(legs.begin(), legs.end()), legs.end());
    std::vector<const LegIntervals*> chosen;
    PooledIntervals found;
    for (std::int64_t leg : legs) {
      if (leg < 0 || static_cast<std::size_t>(leg) >= by_leg_.size()) continue;
      const LegIntervals& intervals = by_leg_[static_cast<std::size_t>(leg)];
      if (intervals.count == 0) continue;
      chosen.push_back(&intervals);
      found.count += intervals.count;
    }
    if (found.count == 0) return found;
    std::int64_t n = found.count;
    auto value_at = [&](std::int64_t rank) {
      if (chosen.size() == 1) return chosen.front()->data[rank];
      std::int64_t low = chosen.front()->data[0], high = low;
      for (const LegIntervals* leg : chosen) {
        low = std::min(low, leg->data[0]);
        high = std::max(high, leg->data[leg->count - 1]);
      }
      while (low < high) {  // invariant: the answer is in [low, high]
        std::int64_t middle = low + (high - low) / 2;
        std::int64_t at_or_below = 0;
        for (const LegIntervals* leg : chosen) {
          at_or_below += std::upper_bound(leg->data, leg->data + leg->count, middle) - leg->data;
        }
        if (at_or_below > rank) {
          high = middle;
        } else {
          low = middle + 1;
        }
      }
      return low;
    };
    found.lower_middle = value_at((n - 1) / 2);
    found.upper_middle = value_at(n / 2);
    found.p90 = value_at(nearest_rank(n, 90));
    found.p99 = value_at(nearest_rank(n, 99));
    found.max = value_at(n - 1);
    return found;
  }

 private:
  struct LegIntervals {
    std::int64_t count = 0;
    std::vector<std::pair<std::size_t, std::size_t>> ranges;  // into gaps_
    std::int64_t* data = nullptr;                             // sorted, once run
    std::vector<std::int64_t> own;
  };

  template <typename Work>
  static void in_parallel(std::size_t parts, Work work) {
    std::vector<std::thread> started;
    std::size_t part = 1;
    try {
      for (; part < parts; ++part) started.emplace_back(work, part);
    } catch (const std::system_error&) {  // no thread to be had: the rest on this one
      for (; part < parts; ++part) work(part);
    }
    if (parts > 0) work(0);
    for (auto& thread : started) thread.join();
  }

  void add(std::size_t row, const RequestTimes& request, std::size_t begin,
           std::vector<std::int64_t>& ordered) {
    std::size_t count = request.count;
    if (count == 0) return;  // all columns stay 0; such a row is dropped in Python
    const std::int64_t* times = request.times;
    if (!std::is_sorted(times, times + count)) {
      ordered.assign(times, times + count);
      std::sort(ordered.begin(), ordered.end());
      times = ordered.data();
    }
    std::int64_t start = starts_[static_cast<std::size_t>(request.leg)];
    std::int64_t end = ends_[static_cast<std::size_t>(request.leg)];
    // A step in the band around the window counts as at its edge.
    std::int64_t first = std::min(std::max(times[0], start), end);
    std::int64_t last = std::max(std::min(times[count - 1], end), start);
    auto intervals = static_cast<std::int64_t>(count - 1);
    std::int64_t* gaps = gaps_.get() + begin;
    for (std::size_t i = 1; i < count; ++i) gaps[i - 1] = times[i] - times[i - 1];
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

  // A leg whose requests are not next to each other is gathered once.
  void sort_leg(LegIntervals& leg, std::vector<std::int64_t>& scratch) {
    if (leg.ranges.size() == 1) {
      leg.data = gaps_.get() + leg.ranges.front().first;
    } else {
      for (const auto& [from, to] : leg.ranges) {
        leg.own.insert(leg.own.end(), gaps_.get() + from, gaps_.get() + to);
      }
      leg.data = leg.own.data();
    }
    radix_sort(leg.data, static_cast<std::size_t>(leg.count), scratch);
  }

  void note_leg(std::int64_t leg, std::size_t begin, std::size_t end) {
    auto index = static_cast<std::size_t>(leg);
    if (by_leg_.size() <= index) by_leg_.resize(index + 1);
    LegIntervals& intervals = by_leg_[index];
    intervals.count += static_cast<std::int64_t>(end - begin);
    if (!intervals.ranges.empty() && intervals.ranges.back().second == begin) {
      intervals.ranges.back().second = end;
    } else {
      intervals.ranges.emplace_back(begin, end);
    }
  }

  std::vector<std::int64_t> starts_, ends_;
  double factor_;
  // Every request's intervals, request after request (not zeroed: every one is written).
  std::unique_ptr<std::int64_t[]> gaps_;
  std::size_t gap_count_ = 0;
  std::vector<LegIntervals> by_leg_;
};

}  // namespace fold_native

#endif  // FOLD_NATIVE_CADENCE_H_
