// The requests' columns of the read's result (fold/_native.cc build_result): each request's
// key and sums at its place in key order. Part of fold/_native.cc, its only includer; no
// Python.

#ifndef FOLD_NATIVE_REQUEST_COLUMNS_H_
#define FOLD_NATIVE_REQUEST_COLUMNS_H_

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "arrow_export.h"
#include "fold_tables.h"
#include "hash_table.h"
#include "read_range.h"
#include "used_pages.h"

namespace fold_native {

// The columns, in this order; the durations' five only when a line carried one.
namespace request_column {
enum : std::size_t {
  kLeg, kWriter, kSeq, kSid, kLines, kSteps, kProposed, kAccepted, kEmitted, kEmittedLines,
  kMaxProposed, kMaxN, kSumN, kPid, kFirstT, kFirstN, kFirstDraft, kFirstVerify,
  kFirstOffset, kLastEnd, kUnordered, kSeeded, kTimedSteps, kDraftSteps, kVerifySteps, kDraftNs, kVerifyNs,
};
}  // namespace request_column
constexpr std::size_t kRequestColumns = request_column::kTimedSteps;
constexpr std::size_t kDurationColumns = request_column::kVerifyNs + 1 - kRequestColumns;

// The order-dependent figures of the attributed requests that are in order (LineOrder), by
// their rows in the result's key order: per (row, bucket of output position) the drafted
// lines' S, P and A, and per (row, draft length) the intervals to drafted lines and their
// sum; each sorted.
struct OrderRows {
  std::vector<std::int64_t> bucket_row, bucket, steps, proposed, accepted;
  std::vector<std::int64_t> length_row, length, intervals, ns;
  // And, in no order, the drafted lines by (row, proposed, accepted) (Fold::draft_tally).
  std::vector<std::int64_t> tally_row, tally_proposed, tally_accepted, tally_count;
};

// A range's request table made into the result's columns: every request's key and sums
// (`columns`, by request_column), and the attributed requests' OrderRows.
struct RequestExport {
  std::vector<FilledInPlace> columns;
  OrderRows rows;
};

namespace detail {

// Where each place's buckets left (Fold::done_buckets, in completion order, which is bucket
// order: positions only grow) and draft lengths past the first (Fold::other_lengths) lie,
// grouped by place: place p's are `done[done_from[p]] ... done[done_from[p + 1] - 1]`.
struct ByPlace {
  std::vector<std::uint32_t> done_from, done, other_from, other;

  explicit ByPlace(const Fold& fold) {
    std::size_t count = fold.requests.entries().size();
    const auto& others = fold.other_lengths.entries();
    done_from.assign(count + 1, 0);
    other_from.assign(count + 1, 0);
    for (const BucketRow& row : fold.done_buckets) ++done_from[row.place + 1];
    for (const auto& entry : others) ++other_from[entry.key.a + 1];
    for (std::size_t place = 0; place < count; ++place) {
      done_from[place + 1] += done_from[place];
      other_from[place + 1] += other_from[place];
    }
    done.resize(fold.done_buckets.size());
    other.resize(others.size());
    std::vector<std::uint32_t> next(done_from.begin(), done_from.end() - 1);
    for (std::size_t i = 0; i < fold.done_buckets.size(); ++i) {
      done[next[fold.done_buckets[i].place]++] = static_cast<std::uint32_t>(i);
    }
    next.assign(other_from.begin(), other_from.end() - 1);
    for (std::size_t i = 0; i < others.size(); ++i) {
      other[next[others[i].key.a]++] = static_cast<std::uint32_t>(i);
    }
  }
};

// Request `place`'s rows, as row `row`.
inline void add_order_rows(const Fold& fold, const ByPlace& by_place, std::uint32_t place,
                           const LineOrder& line_order, std::int64_t row, OrderRows& out,
                           std::vector<std::pair<std::int64_t, StepLengthSums>>& lengths) {
  auto bucket_row = [&](std::int64_t bucket, std::int64_t steps, std::int64_t proposed,
                        std::int64_t accepted) {
    out.bucket_row.push_back(row);
    out.bucket.push_back(bucket);
    out.steps.push_back(steps);
    out.proposed.push_back(proposed);
    out.accepted.push_back(accepted);
  };
  for (std::uint32_t i = by_place.done_from[place]; i < by_place.done_from[place + 1]; ++i) {
    const BucketRow& done = fold.done_buckets[by_place.done[i]];
    bucket_row(done.bucket, done.steps, done.proposed, done.accepted);
  }
  if (line_order.bucket_steps > 0) {
    bucket_row(line_order.bucket, line_order.bucket_steps, line_order.bucket_proposed,
               line_order.bucket_accepted);
  }
  lengths.clear();
  if (line_order.length_intervals > 0) {
    lengths.push_back({line_order.length_proposed,
                       StepLengthSums{line_order.length_intervals, line_order.length_ns}});
  }
  const auto& others = fold.other_lengths.entries();
  for (std::uint32_t i = by_place.other_from[place]; i < by_place.other_from[place + 1]; ++i) {
    const auto& entry = others[by_place.other[i]];
    lengths.push_back({static_cast<std::int64_t>(entry.key.b), entry.value});
  }
  std::sort(lengths.begin(), lengths.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [length, sums] : lengths) {
    out.length_row.push_back(row);
    out.length.push_back(length);
    out.intervals.push_back(sums.intervals);
    out.ns.push_back(sums.ns);
  }
}

}  // namespace detail

// The first range's request table made into its columns and rows (`order`: the places in key
// order, the first `rows` of them the attributed requests; `writer_of`: each place's writer
// number). The entries are first put in key order in place (each cycle of the permutation
// followed once), then read front to back, each written at its row, with the entries' pages
// handed back to the system as they are read: the columns' pages come as they are written,
// so the table (256 bytes a request) and what is made of it (22 integers a request, 27 with
// durations, and the rows) are never both held whole. Made in the table's own order, or in
// a pass of their own, a load test's 10^6 requests (met in time order across writers, sorted
// by writer) held them all beside the whole table: the read's peak. The table, the buckets
// left and the other lengths are empty afterwards. The entries' pages go back every
// `entries_a_pass` entries (a parameter so that a test can make the passes end at many places
// within a page, as a real table, which starts anywhere in one, does).
inline RequestExport request_columns(Fold& fold, const std::vector<std::uint32_t>& order,
                                     std::size_t rows, const std::vector<std::int64_t>& writer_of,
                                     bool timed,
                                     std::size_t entries_a_pass = std::size_t{1} << 14) {
  auto& entries = fold.requests.entries();
  std::size_t count = entries.size();
  const detail::ByPlace by_place(fold);
  std::vector<std::uint32_t> rank(count);
  for (std::size_t i = 0; i < count; ++i) rank[order[i]] = static_cast<std::uint32_t>(i);
  RequestExport out;
  for (const auto& entry : fold.draft_tally.entries()) {  // attributed lines: rows < `rows`
    out.rows.tally_row.push_back(rank[entry.key.a]);
    out.rows.tally_proposed.push_back(static_cast<std::int64_t>(entry.key.b));
    out.rows.tally_accepted.push_back(entry.key.c);
    out.rows.tally_count.push_back(entry.value);
  }
  fold.draft_tally = Table<std::int64_t>();
  for (std::size_t at = 0; at < count; ++at) {
    while (rank[at] != at) {  // each swap puts the entry held at `at` in its row for good
      std::uint32_t to = rank[at];
      std::swap(entries[at], entries[to]);
      std::swap(rank[at], rank[to]);
    }
  }
  std::vector<std::uint32_t>().swap(rank);
  // At most a row for each bucket left and the one each request is in, and as for lengths:
  // room made once, not doubled (and copied) at the peak.
  for (auto* column : {&out.rows.bucket_row, &out.rows.bucket, &out.rows.steps,
                       &out.rows.proposed, &out.rows.accepted}) {
    column->reserve(fold.done_buckets.size() + rows);
  }
  for (auto* column : {&out.rows.length_row, &out.rows.length, &out.rows.intervals,
                       &out.rows.ns}) {
    column->reserve(fold.other_lengths.entries().size() + rows);
  }
  out.columns.resize(kRequestColumns + (timed ? kDurationColumns : 0));
  for (auto& column : out.columns) column.resize(count);  // not zeroed: written below, once
  UsedPages read(entries.data(), count * sizeof(entries[0]));
  std::size_t pass = entries_a_pass > 0 ? entries_a_pass : 1;
  std::vector<std::pair<std::int64_t, StepLengthSums>> lengths;  // one request's, sorted
  for (std::size_t at = 0; at < count; ++at) {  // the entry at `at` came from order[at]
    const Key& key = entries[at].key;
    const Request& r = entries[at].value;
    const std::int64_t values[] = {
        key.c, writer_of[order[at]], static_cast<std::int64_t>(key.b),
        static_cast<std::int64_t>(key.d) - 1,  // -1: an integer id
        r.lines, r.steps, r.proposed, r.accepted, r.emitted, r.emitted_lines, r.max_proposed,
        r.max_n, static_cast<std::int64_t>(r.sum_n), r.max_pid, r.first_t, r.first_n,
        r.first_draft, r.first_verify,  // -1: none
        r.order.first_offset, r.order.last_end, r.order.unordered,  // -1, -1, 0: unattributed
        r.order.seeded,
        r.timed_steps, r.draft_steps, r.verify_steps, r.draft_ns, r.verify_ns};
    for (std::size_t column = 0; column < out.columns.size(); ++column) {
      out.columns[column][at] = values[column];
    }
    if (at < rows && !r.order.unordered) {
      detail::add_order_rows(fold, by_place, order[at], r.order, static_cast<std::int64_t>(at),
                             out.rows, lengths);
    }
    if ((at + 1) % pass == 0) read.before(entries.data() + at + 1);
  }
  fold.requests = Table<Request>();
  std::vector<BucketRow>().swap(fold.done_buckets);
  fold.other_lengths = Table<StepLengthSums>();
  return out;
}

// Where this read leaves each attributed request (by row, as request_columns), for the next read of
// the same file to continue from (Seeds).
struct SeedColumns {
  std::vector<std::int64_t> last_t, last_packed, emitted_before, bucket;
};

inline SeedColumns seed_columns(const Fold& fold, const std::vector<std::uint32_t>& order,
                                std::size_t rows) {
  SeedColumns columns;
  for (auto* column : {&columns.last_t, &columns.last_packed, &columns.emitted_before,
                       &columns.bucket}) {
    column->reserve(rows);
  }
  const auto& entries = fold.requests.entries();
  for (std::size_t row = 0; row < rows; ++row) {
    const LineOrder& line_order = entries[order[row]].value.order;
    columns.last_t.push_back(line_order.last_t);
    columns.last_packed.push_back(line_order.last_packed);
    columns.emitted_before.push_back(line_order.emitted_before);
    columns.bucket.push_back(line_order.bucket);
  }
  return columns;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_REQUEST_COLUMNS_H_
