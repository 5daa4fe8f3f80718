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

namespace fold_native {

// The columns, in this order; the durations' five only when a line carried one.
namespace request_column {
enum : std::size_t {
  kLeg, kWriter, kSeq, kSid, kLines, kSteps, kProposed, kAccepted, kEmitted, kEmittedLines,
  kMaxProposed, kMaxN, kPid, kFirstT, kFirstN, kFirstDraft, kFirstVerify,
  kFirstOffset, kLastEnd, kUnordered, kSeeded, kTimedSteps, kDraftSteps, kVerifySteps, kDraftNs, kVerifyNs,
};
}  // namespace request_column
constexpr std::size_t kRequestColumns = request_column::kTimedSteps;
constexpr std::size_t kDurationColumns = request_column::kVerifyNs + 1 - kRequestColumns;

// Every request's columns from the first range's table (`order`: the places in key order,
// `writer_of`: each place's writer number), made in one pass over the entries in the order
// they lie, each written at its rank in `order`, and the entries' pages handed back to the
// system as they are read. The table (176 bytes a request) and the columns (17 integers a
// request, 22 with durations) are then never both held whole, as they were at a load test's
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
        r.max_n, r.max_pid, r.first_t, r.first_n,
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

inline OrderRows order_rows(Fold& fold, const std::vector<std::int64_t>& row_of) {
  const auto& entries = fold.requests.entries();
  auto in_order = [&](std::size_t place) {
    return row_of[place] >= 0 && !entries[place].value.order.unordered;
  };
  struct Row {
    std::int64_t row, key, steps_or_intervals, proposed_or_ns, accepted;
  };
  std::vector<Row> buckets, lengths;
  for (const BucketRow& done : fold.done_buckets) {
    if (in_order(done.place)) {
      buckets.push_back(
          Row{row_of[done.place], done.bucket, done.steps, done.proposed, done.accepted});
    }
  }
  for (std::size_t place = 0; place < entries.size(); ++place) {
    if (!in_order(place)) continue;
    const LineOrder& order = entries[place].value.order;
    if (order.bucket_steps > 0) {
      buckets.push_back(Row{row_of[place], order.bucket, order.bucket_steps,
                            order.bucket_proposed, order.bucket_accepted});
    }
    if (order.length_intervals > 0) {
      lengths.push_back(Row{row_of[place], order.length_proposed, order.length_intervals,
                            order.length_ns, 0});
    }
  }
  for (const auto& entry : fold.other_lengths.entries()) {
    auto place = static_cast<std::size_t>(entry.key.a);
    if (in_order(place)) {
      lengths.push_back(Row{row_of[place], static_cast<std::int64_t>(entry.key.b),
                            entry.value.intervals, entry.value.ns, 0});
    }
  }
  std::vector<BucketRow>().swap(fold.done_buckets);
  fold.other_lengths = Table<StepLengthSums>();
  auto by_row = [](const Row& x, const Row& y) {
    return x.row != y.row ? x.row < y.row : x.key < y.key;
  };
  std::sort(buckets.begin(), buckets.end(), by_row);
  std::sort(lengths.begin(), lengths.end(), by_row);
  OrderRows rows;
  for (const Row& row : buckets) {
    rows.bucket_row.push_back(row.row);
    rows.bucket.push_back(row.key);
    rows.steps.push_back(row.steps_or_intervals);
    rows.proposed.push_back(row.proposed_or_ns);
    rows.accepted.push_back(row.accepted);
  }
  for (const Row& row : lengths) {
    rows.length_row.push_back(row.row);
    rows.length.push_back(row.key);
    rows.intervals.push_back(row.steps_or_intervals);
    rows.ns.push_back(row.proposed_or_ns);
  }
  return rows;
}

// Where this read leaves each attributed request (by row, as order_rows), for the next read of
// the same file to continue from (Seeds).
struct SeedColumns {
  std::vector<std::int64_t> last_t, last_packed, emitted_before, bucket;
};

inline SeedColumns seed_columns(const Fold& fold, const std::vector<std::int64_t>& row_of,
                                std::size_t rows) {
  SeedColumns columns;
  for (auto* column : {&columns.last_t, &columns.last_packed, &columns.emitted_before,
                       &columns.bucket}) {
    column->assign(rows, 0);
  }
  const auto& entries = fold.requests.entries();
  for (std::size_t place = 0; place < entries.size(); ++place) {
    if (row_of[place] < 0) continue;
    auto row = static_cast<std::size_t>(row_of[place]);
    const LineOrder& order = entries[place].value.order;
    columns.last_t[row] = order.last_t;
    columns.last_packed[row] = order.last_packed;
    columns.emitted_before[row] = order.emitted_before;
    columns.bucket[row] = order.bucket;
  }
  return columns;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_REQUEST_COLUMNS_H_
