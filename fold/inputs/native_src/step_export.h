// The attributed lines' times handed to Python as each request's step intervals
// (fold.folding.step_intervals): its earliest time, and the intervals between its times in
// time order, 32 bits each; an interval of kLongGap ns (4.3 s) or more is written kLongGap
// and kept whole beside them. 4 bytes a line where a time was 8: what a large fold holds
// after its read. Part of fold/_native.cc, its only includer; no Python.
//
// A range's LineTimes already hold each line's interval from its request's line before in
// the range, so most go to their place unchanged. The rest (a request's first line in a
// range, and an interval that did not fit, 4.3 s or more or back in time) go as kLongGap
// with their whole time held aside, and are settled per request once every range is placed:
// the interval from the time before, or, for a request whose lines were not in time order,
// its times sorted and its intervals made again.

#ifndef FOLD_NATIVE_STEP_EXPORT_H_
#define FOLD_NATIVE_STEP_EXPORT_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "arrow_export.h"
#include "fold_tables.h"
#include "parallel.h"
#include "read_range.h"
#include "used_pages.h"

namespace fold_native {

constexpr std::uint32_t kLongGap = LineTimes::kFullTime;  // fold.folding.step_intervals.LONG

// A line placed as kLongGap: its place among the intervals, and its time.
struct HeldTime {
  std::int64_t at, t;
};

// The requests' step intervals, by row (the attributed requests in the export's order).
struct StepIntervals {
  GapsInPlace gaps;                 // row r's at [offsets[r], offsets[r + 1])
  std::vector<std::int64_t> first;  // row r's earliest time
  std::vector<std::int64_t> long_offsets{0}, long_values;  // its long intervals, in order
};

// One range's lines placed among their requests' intervals (`starts`: where each request's
// begin, by place in the first range's table); a request's first line gives its time to
// `heads`, and a line whose interval is not known yet goes to `held`. The line arrays' pages
// go as their lines are placed, so the arrays and the intervals are never both held whole.
inline void place_lines(Fold& range, bool first, const std::vector<std::int64_t>& starts,
                        GapsInPlace& gaps, std::vector<std::int64_t>& heads,
                        std::vector<HeldTime>& held) {
  constexpr std::size_t kLinesAPass = std::size_t{1} << 16;
  LineTimes& own_times = range.line_times;
  LinePlaces::Reader request(own_times.request);
  std::vector<std::uint32_t>& gap = own_times.gap;
  std::vector<std::int64_t>& full = own_times.full;
  UsedPages request_pages(own_times.request.data(), own_times.request.bytes());
  UsedPages gap_pages(gap.data(), gap.size() * sizeof(std::uint32_t));
  UsedPages full_pages(full.data(), full.size() * sizeof(std::int64_t));
  std::size_t places = own_places(range, first);
  std::vector<std::int64_t> placed(places, 0);
  TimesInOrder in_order(own_times, places);
  std::size_t lines = own_times.size();
  for (std::size_t from = 0; from < lines; from += kLinesAPass) {
    std::size_t to = std::min(lines, from + kLinesAPass);
    for (std::size_t line = from; line < to; ++line) {
      std::uint32_t own = request.next();
      std::uint32_t place = first ? own : range.merged_place[own];
      std::int64_t index = (first ? 0 : range.merged_before[own]) + placed[own]++;
      std::int64_t t = in_order.at(line, own);
      if (index == 0) {
        heads[place] = t;
        continue;
      }
      std::int64_t at = starts[place] + index - 1;
      gaps[static_cast<std::size_t>(at)] = gap[line];
      if (gap[line] == kLongGap) held.push_back(HeldTime{at, t});
    }
    gap_pages.before(gap.data() + to);
    request_pages.before(request.position());
    full_pages.before(full.data() + in_order.full_read());
  }
  own_times = LineTimes();
}

// One request's intervals (`count` of them from `gaps`, its first time `head`, its held
// times from `held` in place order, `base` the place of its first interval) settled: each
// held time's interval worked out; the request's earliest time returned, its long intervals
// appended to `longs`. Out of time order, its times are sorted and its intervals made again.
inline std::int64_t settle_request(std::int64_t head, std::uint32_t* gaps, std::size_t count,
                                   std::int64_t base, const HeldTime* held,
                                   const HeldTime* held_end, std::vector<std::int64_t>& longs,
                                   std::vector<std::int64_t>& times) {
  std::size_t kept = longs.size();
  std::int64_t t = head;
  const HeldTime* next = held;
  bool ordered = true;
  for (std::size_t k = 0; k < count && ordered; ++k) {
    if (next == held_end || next->at != base + static_cast<std::int64_t>(k)) {
      t += gaps[k];
      continue;
    }
    std::int64_t interval = next->t - t;  // both in [0, 2^63): no overflow
    ordered = interval >= 0;
    if (ordered && interval < std::int64_t{kLongGap}) {
      gaps[k] = static_cast<std::uint32_t>(interval);
    } else if (ordered) {
      longs.push_back(interval);
    }
    t = next->t;
    ++next;
  }
  if (ordered) return head;
  // Its times again (an interval settled above stands for its held time), sorted.
  longs.resize(kept);
  times.assign(1, head);
  t = head;
  next = held;
  for (std::size_t k = 0; k < count; ++k) {
    if (next != held_end && next->at == base + static_cast<std::int64_t>(k)) {
      t = next->t;
      ++next;
    } else {
      t += gaps[k];
    }
    times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  for (std::size_t k = 0; k < count; ++k) {
    std::int64_t interval = times[k + 1] - times[k];
    if (interval < std::int64_t{kLongGap}) {
      gaps[k] = static_cast<std::uint32_t>(interval);
    } else {
      gaps[k] = kLongGap;
      longs.push_back(interval);
    }
  }
  return times[0];
}

// Every merged range's attributed lines as their requests' step intervals. `rows`: the
// attributed requests' places in the export's order; `offsets`: where each row's intervals
// begin (one more, the total, last). One thread per range places its lines, writing disjoint
// places; then one per share of the rows settles them.
inline void export_times(RangeResult& result, const std::vector<std::uint32_t>& rows,
                         const std::vector<std::int64_t>& offsets, StepIntervals& out) {
  std::vector<Fold*> ranges = merged_ranges(result);
  std::size_t places = result.fold.requests.entries().size();
  std::vector<std::int64_t> starts(places, 0), heads(places, 0);
  for (std::size_t row = 0; row < rows.size(); ++row) starts[rows[row]] = offsets[row];
  out.gaps.resize(static_cast<std::size_t>(offsets.back()));
  std::vector<std::vector<HeldTime>> held_by_range(ranges.size());
  in_parallel(ranges.size(), [&](std::size_t index) {
    place_lines(*ranges[index], index == 0, starts, out.gaps, heads, held_by_range[index]);
  });
  std::vector<HeldTime> held;
  for (auto& part : held_by_range) {
    held.insert(held.end(), part.begin(), part.end());
    std::vector<HeldTime>().swap(part);
  }
  std::sort(held.begin(), held.end(),
            [](const HeldTime& a, const HeldTime& b) { return a.at < b.at; });
  // Shares of the rows by their intervals.
  std::vector<std::size_t> cuts =
      shares(offsets, threads_for(static_cast<std::size_t>(offsets.back())));
  out.first.assign(rows.size(), 0);
  std::vector<std::int64_t> long_count(rows.size(), 0);
  std::vector<std::vector<std::int64_t>> longs(cuts.size() - 1);
  in_parallel(cuts.size() - 1, [&](std::size_t part) {
    std::vector<std::int64_t> times;
    for (std::size_t row = cuts[part]; row < cuts[part + 1]; ++row) {
      std::int64_t base = offsets[row];
      auto count = static_cast<std::size_t>(offsets[row + 1] - base);
      const HeldTime* from = std::lower_bound(
          held.data(), held.data() + held.size(), base,
          [](const HeldTime& h, std::int64_t at) { return h.at < at; });
      const HeldTime* to = from;
      while (to != held.data() + held.size() && to->at < offsets[row + 1]) ++to;
      std::size_t before = longs[part].size();
      out.first[row] = settle_request(heads[rows[row]], out.gaps.data() + base, count, base,
                                      from, to, longs[part], times);
      long_count[row] = static_cast<std::int64_t>(longs[part].size() - before);
    }
  });
  out.long_offsets.assign(1, 0);
  out.long_offsets.reserve(rows.size() + 1);
  for (std::int64_t count : long_count) out.long_offsets.push_back(out.long_offsets.back() + count);
  for (auto& part : longs) out.long_values.insert(out.long_values.end(), part.begin(), part.end());
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_STEP_EXPORT_H_
