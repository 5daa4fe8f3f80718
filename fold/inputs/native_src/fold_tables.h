// What one range's fold keeps: the limits it works to, the outcomes and rules it numbers as
// the Python side does, and its tables (per request, per (leg, time bin), the lines handed back).
// Part of fold/_native.cc through fold_pass.h, its only includer.

#ifndef FOLD_NATIVE_FOLD_TABLES_H_
#define FOLD_NATIVE_FOLD_TABLES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "hash_table.h"
#include "line_places.h"

namespace fold_native {

constexpr std::size_t kMaxExamples = 5;         // bad lines whose place is handed back
constexpr std::size_t kMaxDeferred = 1 << 20;   // beyond: the caller reads the file in Python
constexpr std::int64_t kMaxStepTokens = 1 << 16;  // fold.inputs.limits.MAX_STEP_TOKENS
constexpr int kTokenBits = 17;  // fold.folding.packed_tokens.TOKEN_BITS: each count < 2^17
constexpr std::int64_t kTokenMask = (std::int64_t{1} << kTokenBits) - 1;
constexpr int kFirstEdgeBits = 7;  // fold.folding.by_position.FIRST_EDGE = 2^7

// Attribution outcomes, as fold.folding.attribute numbers them.
constexpr std::int64_t kAttributed = 0;
constexpr std::int64_t kUnattributed = 1;
constexpr std::int64_t kAmbiguous = 2;

enum class Kind : std::int64_t { kDeferred = 0, kBad = 1, kRefused = 2 };

// The part of a step's rule a refused line breaks, numbered as fold.inputs.limits.StepRule
// numbers it (0: none), so the refusal Python raises for it is the reference reader's.
enum class StepRule : std::int64_t {
  kNone = 0,
  kAcceptedAboveProposed = 1,
  kProposedPastCap = 2,
  kEmittedPastCap = 3,
};

// What a pass keeps per line beside its sums: nothing; every folded line's group key, time
// and counts (the follower's provisional groups); or every attributed line's counts beside
// its time and request (the trace).
enum class PerLine : int { kNone = 0, kGroups = 1, kTrace = 2 };

// An attributed request's lines as the fold met them, in file order: what the figures by
// output position (fold.folding.by_position) and the step time per draft length
// (fold.folding.step_lengths) need of them, folded line by line. Both are defined over a
// request's lines in (t_ns, counts) order; a file holds a writer's lines in that order, and a
// line out of it marks the request `unordered`: its figures are then made from its lines
// again, read from the bytes they span (`first_offset` to `last_end`).
struct LineOrder {
  std::int64_t last_t = 0, last_packed = 0;  // the last line's time and packed counts
  std::int64_t emitted_before = 0;           // the next line's output position
  std::int64_t first_offset = -1, last_end = -1;
  // The intervals to drafted lines of the first draft length met, and their sum (others in
  // Fold::other_lengths).
  std::int64_t length_ns = 0;
  std::int32_t length_proposed = 0, length_intervals = 0;
  // The drafted lines' S, P and A in the position bucket of the last drafted line (the
  // buckets before it are in Fold::done_buckets: positions only grow). 32 bits keep a load
  // test's requests small; a sum past them stops the pass as any overflow does.
  std::int32_t bucket_steps = 0, bucket_proposed = 0, bucket_accepted = 0;
  std::int8_t bucket = -1;
  bool unordered = false;
  bool seeded = false;  // continued from where an earlier read left it (Seeds)
};

struct Request {  // per (writer, seq, leg or -1, string id); attributed: a time per line
  std::int64_t lines = 0, steps = 0, proposed = 0, accepted = 0, emitted = 0, emitted_lines = 0;
  std::int64_t max_proposed = 0, max_n = 0, max_pid = 0;
  // The lines' n summed modulo 2^64: with their count and max_n, the writers' check that no n
  // came twice (fold.folding.writers).
  std::uint64_t sum_n = 0;
  // The optional durations: lines carrying both, each, and the sums (accumulate.DURATION_SUMS).
  std::int64_t timed_steps = 0, draft_steps = 0, verify_steps = 0, draft_ns = 0, verify_ns = 0;
  // The request's first line, by (t_ns, n, then its durations, none first), and its durations
  // (-1: none): the first step's parts come before its decode window (accumulate.FIRST_STEP).
  std::int64_t first_t = INT64_MAX, first_n = INT64_MAX, first_draft = -1, first_verify = -1;
  LineOrder order;

  bool earlier(std::int64_t t, std::int64_t n, std::int64_t draft, std::int64_t verify) const {
    return std::tie(t, n, draft, verify) < std::tie(first_t, first_n, first_draft, first_verify);
  }
  void take_first(std::int64_t t, std::int64_t n, std::int64_t draft, std::int64_t verify) {
    if (!earlier(t, n, draft, verify)) return;
    first_t = t;
    first_n = n;
    first_draft = draft;
    first_verify = verify;
  }
};

struct BucketRow {  // a request's sums in a bucket of output position it has left
  std::uint32_t place;
  std::int64_t bucket, steps, proposed, accepted;
};

struct StepLengthSums {  // per (request place, draft length) past the first length
  std::int64_t intervals = 0, ns = 0;
};

struct Bin {  // per (leg, time bin)
  std::int64_t steps = 0, proposed = 0, accepted = 0;
};

inline bool add(std::int64_t& total, std::int64_t value) {
  return !__builtin_add_overflow(total, value, &total);
}

// Every attributed line's time, in file order, with its request's place in the range's
// `requests` (for the step cadence): flat arrays grow far more cheaply than a vector per
// request, and the export writes each request's step intervals from them (export_times).
// A time is kept as the interval from its request's line before in the range, in 32 bits,
// and the place in a byte or two (LinePlaces): about 5 bytes a line, where the full time and
// a 32-bit place made 12 (the read's peak on a long log).
// A request's first line in the range, and a line whose interval does not fit (4.3 s or
// more, or back in time), is kFullTime, its time next in `full`.
struct LineTimes {
  static constexpr std::uint32_t kFullTime = 0xFFFFFFFF;
  LinePlaces request;
  std::vector<std::uint32_t> gap;
  std::vector<std::int64_t> full;

  // `before`: the time of the request's line before in the range; `first`: there is none.
  void add(std::uint32_t place, std::int64_t t, bool first, std::int64_t before) {
    std::int64_t interval;
    bool fits = !first && !__builtin_sub_overflow(t, before, &interval) && interval >= 0 &&
                interval < std::int64_t{kFullTime};
    request.push(place);
    gap.push_back(fits ? static_cast<std::uint32_t>(interval) : kFullTime);
    if (!fits) full.push_back(t);
  }
  std::size_t size() const { return request.size(); }
};

// A range's LineTimes read back in file order: each line's time, given its request's place.
class TimesInOrder {
 public:
  TimesInOrder(const LineTimes& times, std::size_t places) : times_(times), last_(places, 0) {}

  std::int64_t at(std::size_t line, std::uint32_t place) {
    std::uint32_t gap = times_.gap[line];
    std::int64_t t = gap == LineTimes::kFullTime ? times_.full[next_full_++] : last_[place] + gap;
    last_[place] = t;
    return t;
  }
  std::size_t full_read() const { return next_full_; }

 private:
  const LineTimes& times_;
  std::vector<std::int64_t> last_;
  std::size_t next_full_ = 0;
};

// A line handed back to Python: its number in the range (0-based), place, kind and, for a
// refused line, the rule it breaks.
struct Event {
  std::int64_t line;
  std::int64_t offset;
  std::int64_t length;
  Kind kind;
  StepRule rule = StepRule::kNone;
};


// Everything one range (one thread) found.
struct Fold {
  Table<Request> requests;   // key (writer, seq, leg or -1)
  Table<std::int64_t> hist;  // key (leg, accepted, proposed)
  Table<Bin> bins;           // key (leg, bin, 0)
  std::int64_t lines = 0;    // newline-ended lines met, whatever became of them
  std::int64_t folded = 0, attributed = 0, unattributed = 0, ambiguous = 0;
  std::int64_t torn = 0, bad = 0;
  std::int64_t timed_lines = 0;  // folded lines carrying a duration: none, none exported
  std::vector<Event> events;  // deferred lines, the first bad ones, and the stop
  std::size_t deferred = 0;
  bool stopped = false;     // a bad line (without skip_bad) or a refusal ended the range
  bool overflow = false;    // a sum beyond 64 bits, or too many deferred lines
  LineTimes line_times;  // every attributed line's time (LineTimes)
  // Beside the requests' LineOrder: the buckets they have left, and their draft lengths past
  // the first (rare: a drafter that changes its k), keyed (place, proposed).
  std::vector<BucketRow> done_buckets;
  Table<StepLengthSums> other_lengths;
  // Only when asked for (the sums file's steps by draft position): the attributed drafted
  // lines counted by (place, proposed, accepted), in any order. Counts add across ranges and
  // reads, so no line is read again for them; kept off by default, as a load test's 10^6
  // requests hold some five entries each.
  bool tally_drafts = false;
  Table<std::int64_t> draft_tally;
  // With PerLine::kTrace, beside each: its pid and counts (emitted -1 where it has none).
  std::vector<std::int64_t> line_pid, line_proposed, line_accepted, line_emitted;
  // Once merged into the first range's fold: each request's place there, and how many of
  // its lines the ranges before this one hold (where this range's times start in its list).
  bool merged = false;
  std::vector<std::uint32_t> merged_place;
  std::vector<std::int64_t> merged_before;
  // With PerLine::kGroups: per folded line, its group key (label index, or -1 - writer index
  // among `step_writers`), time and counts, for the follower's provisional groups.
  std::vector<std::int64_t> step_key, step_t, step_proposed, step_accepted;
  std::vector<std::string> step_labels;
  std::unordered_map<std::string, std::int64_t> label_index;
  // String request ids met, each once: a request's key holds 1 + its place here.
  std::vector<std::string> seq_ids;
  std::unordered_map<std::string, std::uint64_t> seq_index;

  std::uint64_t seq_id_key(std::string_view id) {
    auto [found, fresh] = seq_index.try_emplace(std::string(id), seq_ids.size() + 1);
    if (fresh) seq_ids.emplace_back(id);
    return found->second;
  }
};

}  // namespace fold_native

#endif  // FOLD_NATIVE_FOLD_TABLES_H_
