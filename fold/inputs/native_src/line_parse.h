// A line of a step log parsed as the fold reads it (read_line, step_rule), and its step given
// its leg by time and label (Legs, Attribution). Part of fold/_native.cc, its only includer; no
// Python.

#ifndef FOLD_NATIVE_LINE_PARSE_H_
#define FOLD_NATIVE_LINE_PARSE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fold_tables.h"
#include "json_line.h"

namespace fold_native {

// Leg windows as fold.folding.attribute cuts them: sorted distinct end points; segment 2k+1 is the
// point k, segment 2k the open stretch before it; per segment the one leg covering it (or -1)
// and its status; for segments several legs cover, the labels that name exactly one of them.
struct Legs {
  std::vector<std::int64_t> points;
  std::vector<std::int64_t> segment_leg;
  std::vector<std::int64_t> segment_status;
  std::vector<std::vector<std::pair<std::string, std::int64_t>>> segment_labels;
  std::vector<std::int64_t> leg_start;  // by leg index
  std::vector<std::int64_t> leg_span;   // end - start + 1, by leg index
  std::int64_t bins_per_leg = 1;
};

// One whole line [p, end) parsed as the fold reads it (end[-1] is '\n'): the verdict, where
// its newline is, and whether it was a torn fragment glued to a whole step (then the step is
// that one's). Most lines are valid and end where their object does: only the others are
// searched for their newline and judged again.
inline Verdict read_line(const char* p, const char* end, Step& step, KeyOrder& order,
                         const char*& newline, bool& glued) {
  glued = false;
  const char* stop = p;
  Verdict verdict = parse_object(stop, step, order);
  newline = stop;
  if (verdict != Verdict::kOk || *stop != '\n') {
    newline = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    verdict = parse_line(p, newline, step, order);
  }
  if (verdict == Verdict::kBad) {
    static const char kStart[] = "{\"v\":";
    const char* start = nullptr;
    for (const char* q = newline - (sizeof kStart - 1); q > p; --q) {
      if (*q == '{' && std::memcmp(q, kStart, sizeof kStart - 1) == 0) {
        start = q;
        break;
      }
    }
    if (start != nullptr) {
      Verdict rest = parse_line(start, newline, step, order);
      if (rest == Verdict::kOk) {
        glued = true;
        verdict = Verdict::kOk;
      } else if (rest == Verdict::kDefer) {
        verdict = Verdict::kDefer;
      }
    }
  }
  return verdict;
}

// fold.inputs.limits.step_problem, in its order: the counts are counts already (a signed
// one is deferred to the exact parser, which calls it malformed).
inline StepRule step_rule(const Step& step) {
  if (step.accepted > step.proposed) return StepRule::kAcceptedAboveProposed;
  if (step.proposed > kMaxStepTokens) return StepRule::kProposedPastCap;
  if (step.has_emitted && step.emitted > kMaxStepTokens) return StepRule::kEmittedPastCap;
  return StepRule::kNone;
}

// A step's leg, as fold.folding.attribute gives it, remembering the last segment found.
class Attribution {
 public:
  explicit Attribution(const Legs& legs) : legs_(legs) {}

  // (status, leg or -1) of a step.
  std::pair<std::int64_t, std::int64_t> of(const Step& step) {
    std::int64_t t = step.t_ns;
    std::size_t segment = last_segment_;
    if (!(t >= last_low_ && t <= last_high_)) {
      const auto& points = legs_.points;
      std::size_t position = static_cast<std::size_t>(
          std::lower_bound(points.begin(), points.end(), t) - points.begin());
      bool at_point = position < points.size() && points[position] == t;
      segment = 2 * position + at_point;
      // Consecutive lines are close in time: the segment's bounds answer the next one.
      constexpr std::int64_t kLowest = INT64_MIN, kHighest = INT64_MAX;
      last_low_ = at_point ? t : position > 0 ? points[position - 1] + 1 : kLowest;
      last_high_ = at_point ? t : position < points.size() ? points[position] - 1 : kHighest;
      last_segment_ = segment;
    }
    std::int64_t status = legs_.segment_status[segment];
    std::int64_t leg = legs_.segment_leg[segment];
    if (status == kAmbiguous && step.has_label) {
      std::string_view label = label_of(step, scratch_);
      for (const auto& [candidate, owner] : legs_.segment_labels[segment]) {
        if (label == candidate) return {kAttributed, owner};
      }
    }
    return {status, status == kAttributed ? leg : -1};
  }

 private:
  const Legs& legs_;
  std::string scratch_;  // an unescaped label
  std::int64_t last_low_ = 1, last_high_ = 0;  // empty: no segment cached yet
  std::size_t last_segment_ = 0;
};

}  // namespace fold_native

#endif  // FOLD_NATIVE_LINE_PARSE_H_
