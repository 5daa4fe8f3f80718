// The requests' columns of the read's result (fold/_native.cc build_result): each request's
// key and sums at its place in key order. Part of fold/_native.cc, its only includer; no
// Python.

#ifndef FOLD_NATIVE_REQUEST_COLUMNS_H_
#define FOLD_NATIVE_REQUEST_COLUMNS_H_

#include <cstddef>
#include <algorithm>
#include <cstdint>
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

// Every request's columns from the first range's table (`order`: the places in key order,
// `writer_of`: each place's writer number), made in one pass over the entries in the order
// they lie, each written at its rank in `order`, and the entries' pages handed back to the
// system as they are read. The table (256 bytes a request) and the columns (22 integers a
// request, 27 with durations) are then never both held whole, as they were at a load test's
// read's peak (10^6 requests). The columns' pages come as they are written, so a log whose
// key order follows the table's (requests met in time order, as writers log them) holds
// little more than the larger of the two. The table is empty afterwards. The entries' pages
// go back every `entries_a_pass` entries (a parameter so that a test can make the passes end
// at many places within a page, as a real table, which starts anywhere in one, does).
inline std::vector<FilledInPlace> request_columns(
    Table<Request>& table, const std::vector<std::uint32_t>& order,
    const std::vector<std::int64_t>& writer_of, bool timed,
    std::size_t entries_a_pass = std::size_t{1} << 14) {
  auto& entries = table.entries();
  std::size_t count = entries.size();
  std::vector<std::uint32_t> rank(count);
  for (std::size_t i = 0; i < count; ++i) rank[order[i]] = static_cast<std::uint32_t>(i);
  std::vector<FilledInPlace> columns(kRequestColumns + (timed ? kDurationColumns : 0));
  for (auto& column : columns) column.resize(count);  // not zeroed: written below, each once
  UsedPages read(entries.data(), count * sizeof(entries[0]));
  std::size_t pass = entries_a_pass > 0 ? entries_a_pass : 1;
  for (std::size_t place = 0; place < count; ++place) {
    const Key& key = entries[place].key;
    const Request& r = entries[place].value;
    const std::int64_t values[] = {
        key.c, writer_of[place], static_cast<std::int64_t>(key.b),
        static_cast<std::int64_t>(key.d) - 1,  // -1: an integer id
        r.lines, r.steps, r.proposed, r.accepted, r.emitted, r.emitted_lines, r.max_proposed,
        r.max_n, static_cast<std::int64_t>(r.sum_n), r.max_pid, r.first_t, r.first_n,
        r.first_draft, r.first_verify,  // -1: none
        r.order.first_offset, r.order.last_end, r.order.unordered,  // -1, -1, 0: unattributed
        r.order.seeded,
        r.timed_steps, r.draft_steps, r.verify_steps, r.draft_ns, r.verify_ns};
    std::size_t at = rank[place];
    for (std::size_t column = 0; column < columns.size(); ++column) {
      columns[column][at] = values[column];
    }
    if ((place + 1) % pass == 0) read.before(entries.data() + place + 1);
  }
  table = Table<Request>();
  return columns;
}

// The order-dependent figures of the attributed requests that are in order (LineOrder), by
// their rows in the result's key order (`row_of`, by place: a row, or -1 for a request not
// exported with lines): per (row, bucket of output position) the drafted lines' S, P and A,
// and per (row, draft length) the intervals to drafted lines and their sum; each sorted.
struct OrderRows {
  std::vector<std::int64_t> bucket_row, bucket, steps, proposed, accepted;
  std::vector<std::int64_t> length_row, length, intervals, ns;
};

// `order`: the places in the result's key order, the first `rows` of them the attributed
// requests (row r is order[r]). The rows are written straight into their columns, request by
// request in row order: a load test's 10^6 requests held a sorted copy of every row beside
// the request table, the read's peak.
inline OrderRows order_rows(Fold& fold, const std::vector<std::uint32_t>& order,
                            std::size_t rows) {
  const auto& entries = fold.requests.entries();
  std::size_t count = entries.size();
  // The buckets each request left, grouped by place in completion order (which is bucket
  // order: positions only grow), and its draft lengths past the first, grouped by place.
  std::vector<std::uint32_t> done_from(count + 1, 0), other_from(count + 1, 0);
  for (const BucketRow& done : fold.done_buckets) ++done_from[done.place + 1];
  const auto& others = fold.other_lengths.entries();
  for (const auto& entry : others) ++other_from[entry.key.a + 1];
  for (std::size_t place = 0; place < count; ++place) {
    done_from[place + 1] += done_from[place];
    other_from[place + 1] += other_from[place];
  }
  std::vector<std::uint32_t> done_of(fold.done_buckets.size()), other_of(others.size());
  {
    std::vector<std::uint32_t> next(done_from.begin(), done_from.end() - 1);
    for (std::size_t i = 0; i < fold.done_buckets.size(); ++i) {
      done_of[next[fold.done_buckets[i].place]++] = static_cast<std::uint32_t>(i);
    }
    next.assign(other_from.begin(), other_from.end() - 1);
    for (std::size_t i = 0; i < others.size(); ++i) {
      other_of[next[others[i].key.a]++] = static_cast<std::uint32_t>(i);
    }
  }
  OrderRows out;
  std::vector<std::pair<std::int64_t, StepLengthSums>> lengths;  // one request's, sorted
  for (std::size_t row = 0; row < rows; ++row) {
    std::uint32_t place = order[row];
    const LineOrder& line_order = entries[place].value.order;
    if (line_order.unordered) continue;
    auto r = static_cast<std::int64_t>(row);
    auto bucket_row = [&](std::int64_t bucket, std::int64_t steps, std::int64_t proposed,
                          std::int64_t accepted) {
      out.bucket_row.push_back(r);
      out.bucket.push_back(bucket);
      out.steps.push_back(steps);
      out.proposed.push_back(proposed);
      out.accepted.push_back(accepted);
    };
    for (std::uint32_t i = done_from[place]; i < done_from[place + 1]; ++i) {
      const BucketRow& done = fold.done_buckets[done_of[i]];
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
    for (std::uint32_t i = other_from[place]; i < other_from[place + 1]; ++i) {
      const auto& entry = others[other_of[i]];
      lengths.push_back({static_cast<std::int64_t>(entry.key.b), entry.value});
    }
    std::sort(lengths.begin(), lengths.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [length, sums] : lengths) {
      out.length_row.push_back(r);
      out.length.push_back(length);
      out.intervals.push_back(sums.intervals);
      out.ns.push_back(sums.ns);
    }
  }
  std::vector<BucketRow>().swap(fold.done_buckets);
  fold.other_lengths = Table<StepLengthSums>();
  return out;
}

// Where this read leaves each attributed request (by row, as order_rows), for the next read of
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
