// The fold of a range's lines (Folder): filling the tables of fold_tables.h (per request, its
// lines in order, histogram, time bins, the lines handed back to Python); the merge of two
// threads' folds, and the requests a later range continues (Continuation).
// Part of fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_FOLD_PASS_H_
#define FOLD_NATIVE_FOLD_PASS_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fold_tables.h"
#include "hash_table.h"
#include "json_line.h"
#include "line_order.h"
#include "line_parse.h"
#include "request_keys.h"
#include "used_pages.h"

namespace fold_native {


class Folder {
 public:
  Folder(const Legs& legs, bool skip_bad, PerLine per_line, Fold& fold,
         const Seeds* seeds = nullptr)
      : legs_(legs),
        skip_bad_(skip_bad),
        per_line_(per_line),
        fold_(fold),
        attribution_(legs),
        seeds_(seeds != nullptr && !seeds->keys.empty() ? seeds : nullptr) {}

  // Folds the whole lines in [p, end); end[-1] is '\n'. `base` is the file offset of p.
  // False: stop reading (the range stopped, or a sum overflowed).
  bool lines(const char* p, const char* end, std::int64_t base) {
    const char* begin = p;
    while (p < end) {
      std::int64_t number = fold_.lines++;
      const char* newline;
      bool glued;
      Verdict verdict = read_line(p, end, step_, order_, newline, glued);
      if (!line(verdict, glued, newline - p, number, base + (p - begin))) return false;
      p = newline + 1;
    }
    return true;
  }

 private:
  bool line(Verdict verdict, bool glued, std::int64_t length, std::int64_t number,
            std::int64_t offset) {
    if (verdict == Verdict::kDefer) {
      fold_.events.push_back(Event{number, offset, length, Kind::kDeferred});
      if (++fold_.deferred > kMaxDeferred) {
        fold_.overflow = true;
        return false;
      }
      return true;
    }
    if (verdict == Verdict::kBad) {
      ++fold_.bad;
      if (!skip_bad_) {
        fold_.events.push_back(Event{number, offset, length, Kind::kBad});
        fold_.stopped = true;
        return false;
      }
      if (fold_.bad <= static_cast<std::int64_t>(kMaxExamples)) {
        fold_.events.push_back(Event{number, offset, length, Kind::kBad});
      }
      return true;
    }
    StepRule rule = step_rule(step_);
    if (rule != StepRule::kNone) {
      fold_.events.push_back(Event{number, offset, length, Kind::kRefused, rule});
      fold_.stopped = true;
      return false;
    }
    fold_.torn += glued;
    if (!add_step(offset, offset + length + 1)) {
      fold_.overflow = true;
      return false;
    }
    return true;
  }

  bool add_step(std::int64_t offset, std::int64_t end) {
    auto [status, leg] = attribution_.of(step_);
    ++fold_.folded;
    fold_.attributed += status == kAttributed;
    fold_.unattributed += status == kUnattributed;
    fold_.ambiguous += status == kAmbiguous;
    if (per_line_ == PerLine::kGroups) keep_step();
    Key key{step_.writer, step_.seq, leg};
    if (step_.seq_is_string) key.d = seq_id_key();
    std::size_t place = request_index(key);
    Request& request = fold_.requests.entries()[place].value;
    request.lines += 1;
    request.steps += step_.proposed > 0;
    if (!add(request.proposed, step_.proposed) || !add(request.accepted, step_.accepted) ||
        !add(request.emitted, step_.emitted * step_.has_emitted)) {
      return false;
    }
    request.emitted_lines += step_.has_emitted;
    request.take_first(step_.t_ns, step_.n, step_.has_draft ? step_.draft_ns : -1,
                       step_.has_verify ? step_.verify_ns : -1);
    if (step_.has_draft || step_.has_verify) {
      ++fold_.timed_lines;
      request.timed_steps += step_.has_draft && step_.has_verify;
      request.draft_steps += step_.has_draft;
      request.verify_steps += step_.has_verify;
      if (!add(request.draft_ns, step_.draft_ns * step_.has_draft) ||
          !add(request.verify_ns, step_.verify_ns * step_.has_verify)) {
        return false;
      }
    }
    request.sum_n += static_cast<std::uint64_t>(step_.n);  // n >= 0; wraps, as documented
    if (request.lines == 1) {
      request.max_proposed = step_.proposed;
      request.max_n = step_.n;
      request.max_pid = step_.pid;
    } else {
      request.max_proposed = std::max(request.max_proposed, step_.proposed);
      request.max_n = std::max(request.max_n, step_.n);
      request.max_pid = std::max(request.max_pid, step_.pid);
    }
    if (leg < 0) return true;
    bool first = request.lines == 1;
    bool first_here = first;  // its first line in this range, whatever the seeds say
    std::int64_t before = request.order.last_t;
    if (first && seeds_ != nullptr) first = !seed(request.order, leg);
    if (!follow_line(fold_, static_cast<std::uint32_t>(place), request.order, step_, offset, end,
                     first)) {
      return false;
    }
    fold_.line_times.add(static_cast<std::uint32_t>(place), step_.t_ns, first_here, before);
    if (per_line_ == PerLine::kTrace) {
      fold_.line_pid.push_back(step_.pid);
      fold_.line_proposed.push_back(step_.proposed);
      fold_.line_accepted.push_back(step_.accepted);
      fold_.line_emitted.push_back(step_.has_emitted ? step_.emitted : -1);
    }
    if (step_.proposed == 0) return true;
    if (fold_.tally_drafts) {
      fold_.draft_tally.at(Key{place, static_cast<std::uint64_t>(step_.proposed),
                               step_.accepted}) += 1;
    }
    auto index = static_cast<std::size_t>(leg);
    fold_.hist.entries()[histogram_index(leg, step_.proposed, step_.accepted)].value += 1;
    // (t_ns - start) * bins < span * bins, which the caller checked fits in 64 bits.
    std::int64_t bin =
        (step_.t_ns - legs_.leg_start[index]) * legs_.bins_per_leg / legs_.leg_span[index];
    // Lines close in time share a bin: the last one found answers without a lookup, while
    // the table has not grown (growing moves its entries).
    Key bin_key{static_cast<std::uint64_t>(leg), static_cast<std::uint64_t>(bin), 0};
    if (last_bin_ == nullptr || !(last_bin_key_ == bin_key) ||
        fold_.bins.entries().size() != last_bins_size_) {
      last_bin_ = &fold_.bins.at(bin_key);
      last_bin_key_ = bin_key;
      last_bins_size_ = fold_.bins.entries().size();
    }
    Bin& sums = *last_bin_;
    sums.steps += 1;
    return add(sums.proposed, step_.proposed) && add(sums.accepted, step_.accepted);
  }

  // A request's first line here continues where an earlier read left it, if one did.
  bool seed(LineOrder& order, std::int64_t leg) {
    std::int64_t at = seeds_->keys.find(step_, leg, seq_scratch_, key_scratch_);
    if (at < 0) return false;
    auto i = static_cast<std::size_t>(at);
    order.last_t = seeds_->last_t[i];
    order.last_packed = seeds_->last_packed[i];
    order.emitted_before = seeds_->emitted_before[i];
    order.bucket = static_cast<std::int8_t>(std::clamp<std::int64_t>(seeds_->bucket[i], -1, 63));
    order.unordered = seeds_->unordered[i] != 0;
    order.seeded = true;
    return true;
  }

  // The current step's string id in the fold's ids. A request's lines come in runs, so the
  // last id found answers most lines without hashing it.
  std::uint64_t seq_id_key() {
    std::string_view id = seq_id_of(step_, seq_scratch_);
    if (last_seq_key_ != 0 && id == last_seq_id_) return last_seq_key_;
    last_seq_id_.assign(id.data(), id.size());
    last_seq_key_ = fold_.seq_id_key(id);
    return last_seq_key_;
  }

  // The request's place in the table. Writers interleave their lines, but each writer's run
  // of lines belongs to one request at a time: a small cache by writer id answers most lines
  // without probing the table.
  std::size_t request_index(const Key& key) {
    CachedRequest& cached = request_cache_[(key.a ^ key.a >> 17) % kRequestCache];
    if (cached.filled && cached.key == key) return cached.index;
    cached = CachedRequest{key, fold_.requests.index(key), true};
    return cached.index;
  }

  // The histogram bucket's place in its table: lines come in time order, so most share the
  // last leg, and most drafters propose the same k on every step: while leg and proposal stay
  // those of the last line, the buckets for small accepted counts are remembered by count.
  std::size_t histogram_index(std::int64_t leg, std::int64_t proposed, std::int64_t accepted) {
    if (leg != histogram_leg_ || proposed != histogram_proposed_) {
      histogram_leg_ = leg;
      histogram_proposed_ = proposed;
      std::fill(std::begin(histogram_places_), std::end(histogram_places_), kNoPlace);
    }
    bool small = accepted >= 0 && accepted < kRememberedCounts;
    if (small && histogram_places_[accepted] != kNoPlace) return histogram_places_[accepted];
    std::size_t place = fold_.hist.index(
        Key{static_cast<std::uint64_t>(leg), static_cast<std::uint64_t>(accepted), proposed});
    if (small) histogram_places_[accepted] = place;
    return place;
  }

  void keep_step() {
    std::int64_t key;
    if (step_.has_label) {
      std::string label(label_of(step_, scratch_));
      auto [found, fresh] = fold_.label_index.try_emplace(
          label, static_cast<std::int64_t>(fold_.step_labels.size()));
      if (fresh) fold_.step_labels.push_back(label);
      key = found->second;
    } else {
      key = -1 - static_cast<std::int64_t>(writer_slot(step_.writer));
    }
    fold_.step_key.push_back(key);
    fold_.step_t.push_back(step_.t_ns);
    fold_.step_proposed.push_back(step_.proposed);
    fold_.step_accepted.push_back(step_.accepted);
  }

  // Unlabelled steps are keyed by writer, as a negative key: -1 - the writer's slot.
  std::size_t writer_slot(std::uint64_t writer) {
    auto [found, fresh] = writer_slots_.try_emplace(writer, writer_names_.size());
    if (fresh) {
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(writer));
      writer_names_.emplace_back(hex, 16);
    }
    return found->second;
  }

 public:
  std::vector<std::string> writer_names_;

 private:
  const Legs& legs_;
  bool skip_bad_;
  PerLine per_line_;
  Fold& fold_;
  Attribution attribution_;
  const Seeds* seeds_;
  std::string key_scratch_;
  Step step_;
  KeyOrder order_;
  std::string scratch_;      // an unescaped label
  std::string seq_scratch_;  // an unescaped string id
  std::string last_seq_id_;
  std::uint64_t last_seq_key_ = 0;
  struct CachedRequest {
    Key key{0, 0, 0};
    std::size_t index = 0;
    bool filled = false;
  };
  static constexpr std::size_t kRequestCache = 64;
  CachedRequest request_cache_[kRequestCache];
  static constexpr std::int64_t kRememberedCounts = 64;
  static constexpr std::size_t kNoPlace = ~std::size_t{0};
  std::int64_t histogram_leg_ = -1;
  std::int64_t histogram_proposed_ = -1;
  std::size_t histogram_places_[kRememberedCounts];
  Bin* last_bin_ = nullptr;
  Key last_bin_key_{0, 0, 0};
  std::size_t last_bins_size_ = 0;
  std::unordered_map<std::uint64_t, std::size_t> writer_slots_;
};

// A request of a later range that an earlier range met too: its place in the merged fold and
// the bytes its lines span in the later range. Its LineOrder there started from nothing, so
// its lines are folded again from those bytes, after the earlier range's (Continuation).
struct Crossing {
  std::uint32_t place;
  std::int64_t first_offset, last_end;
};


// Merges range `from` into `into` (the ranges before it, merged): sums add, the requests new
// to `into` keep their LineOrder, and the requests both met are returned, to be continued.
// `from`'s request table is used up: its entries' pages go back to the system as they are
// merged (every `entries_a_pass`), so `into`'s growing table does not sit beside the whole of
// it. On a load test's 10^6 requests, half in each of two ranges, that was the read's peak.
inline bool merge_into(Fold& into, Fold& from, std::int64_t line_base,
                       std::vector<Crossing>& crossing,
                       std::size_t entries_a_pass = std::size_t{1} << 14) {
  into.lines += from.lines;
  into.folded += from.folded;
  into.attributed += from.attributed;
  into.unattributed += from.unattributed;
  into.ambiguous += from.ambiguous;
  into.torn += from.torn;
  into.bad += from.bad;
  into.deferred += from.deferred;
  into.timed_lines += from.timed_lines;
  for (Event event : from.events) {
    event.line += line_base;
    into.events.push_back(event);
  }
  auto& entries = from.requests.entries();
  from.merged_place.reserve(entries.size());
  from.merged_before.reserve(entries.size());
  // A request the ranges before met too goes on from them (Continuation); its rows here go.
  std::vector<char> continued(entries.size(), 0);
  UsedPages merged(entries.data(), entries.size() * sizeof(entries[0]));
  std::size_t pass = entries_a_pass > 0 ? entries_a_pass : 1;
  for (std::size_t own = 0; own < entries.size(); ++own) {
    if (own % pass == 0) merged.before(entries.data() + own);
    auto& entry = entries[own];
    Key key = entry.key;
    if (key.d != 0) key.d = into.seq_id_key(from.seq_ids[key.d - 1]);  // into's own numbering
    std::size_t place = into.requests.index(key);
    Request& target = into.requests.entries()[place].value;
    Request& source = entry.value;
    if (target.lines == 0) {
      target.order = source.order;
    } else {
      continued[own] = 1;
      if (key.c >= 0) {
        crossing.push_back(Crossing{static_cast<std::uint32_t>(place),
                                    source.order.first_offset, source.order.last_end});
      }
    }
    from.merged_place.push_back(static_cast<std::uint32_t>(place));
    from.merged_before.push_back(target.lines);
    if (!add(target.lines, source.lines) || !add(target.steps, source.steps) ||
        !add(target.proposed, source.proposed) || !add(target.accepted, source.accepted) ||
        !add(target.emitted, source.emitted) ||
        !add(target.emitted_lines, source.emitted_lines) ||
        !add(target.timed_steps, source.timed_steps) ||
        !add(target.draft_steps, source.draft_steps) ||
        !add(target.verify_steps, source.verify_steps) ||
        !add(target.draft_ns, source.draft_ns) || !add(target.verify_ns, source.verify_ns)) {
      return false;
    }
    target.take_first(source.first_t, source.first_n, source.first_draft, source.first_verify);
    bool fresh = target.lines == source.lines;
    target.max_proposed =
        fresh ? source.max_proposed : std::max(target.max_proposed, source.max_proposed);
    target.max_n = fresh ? source.max_n : std::max(target.max_n, source.max_n);
    target.sum_n += source.sum_n;
    target.max_pid = fresh ? source.max_pid : std::max(target.max_pid, source.max_pid);
  }
  // The side rows of `from`'s requests new to `into`, at their places there; a continued
  // request's are made again by its continuation.
  for (BucketRow row : from.done_buckets) {
    if (continued[row.place]) continue;
    row.place = from.merged_place[row.place];
    into.done_buckets.push_back(row);
  }
  for (const auto& entry : from.other_lengths.entries()) {
    if (continued[entry.key.a]) continue;
    into.other_lengths.at(Key{from.merged_place[entry.key.a], entry.key.b, 0}) = entry.value;
  }
  std::vector<BucketRow>().swap(from.done_buckets);
  from.other_lengths = Table<StepLengthSums>();
  // Counts in any order: a continued request's add up as its new ones' do.
  for (const auto& entry : from.draft_tally.entries()) {
    into.draft_tally.at(Key{from.merged_place[entry.key.a], entry.key.b, entry.key.c}) +=
        entry.value;
  }
  from.draft_tally = Table<std::int64_t>();
  for (const auto& entry : from.hist.entries()) into.hist.at(entry.key) += entry.value;
  for (const auto& entry : from.bins.entries()) {
    Bin& target = into.bins.at(entry.key);
    if (!add(target.steps, entry.value.steps) || !add(target.proposed, entry.value.proposed) ||
        !add(target.accepted, entry.value.accepted)) {
      return false;
    }
  }
  return true;
}

// Folds the lines of continued requests (Crossing) again, from the bytes they span in a later
// range, into the merged fold's LineOrder: only their order-dependent figures, as each line
// would have been folded had one thread read the ranges one after the other. Every line is
// parsed and attributed as the range's fold did; the others, and lines not folded there
// (deferred, bad, refused), pass by.
class Continuation {
 public:
  Continuation(const Legs& legs, Fold& into, const std::vector<Crossing>& crossing)
      : into_(into), steps_(legs, keys_) {
    for (const Crossing& request : crossing) {
      const Key& key = into.requests.entries()[request.place].key;
      const std::string* sid = key.d != 0 ? &into.seq_ids[key.d - 1] : nullptr;
      keys_.add(key.a, key.b, sid, key.c);
      places_.push_back(request.place);
    }
  }

  // As Folder::lines; false: a sum overflowed.
  bool lines(const char* p, const char* end, std::int64_t base) {
    return steps_.lines(p, end, base, [this](std::int64_t at, const Step& step,
                                             std::int64_t offset, std::int64_t stop) {
      std::uint32_t place = places_[static_cast<std::size_t>(at)];
      Request& request = into_.requests.entries()[place].value;
      return follow_line(into_, place, request.order, step, offset, stop, false);
    });
  }

 private:
  Fold& into_;
  RequestKeys keys_;  // before steps_, which holds a reference to it
  std::vector<std::uint32_t> places_;  // by key index
  NamedSteps steps_;
};

}  // namespace fold_native

#endif  // FOLD_NATIVE_FOLD_PASS_H_
