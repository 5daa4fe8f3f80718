// The export's pages handed back as its lines are placed (native_src/step_export.h):
// UsedPages hands back exactly the whole pages of an array's used bytes (mincore tells which
// are still resident); the lines' places come back from their blocks as they went in
// (LinePlaces); and export_times gives every line of two merged ranges, each of several
// passes, to its request's step intervals, which read back as its times sorted. The two
// ranges run on threads of their own whatever the machine's cores (in_parallel), which a fold
// of a file only does on two cores or more; the merged range has let its own request table go
// first, as the read's merge does. Built and run by tests/test_native_memory.py. Exit 0 and
// "pages and lines as placed": both hold; otherwise the first difference is printed.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "inputs/native_src/read_range.h"
#include "inputs/native_src/request_columns.h"
#include "inputs/native_src/step_export.h"

using namespace fold_native;

namespace {

bool resident(const unsigned char* page) {
  unsigned char in_core = 0;
  if (mincore(const_cast<unsigned char*>(page), 1, &in_core) != 0) return true;
  return (in_core & 1) != 0;
}

int pages() {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t count = 8;
  void* mapped = mmap(nullptr, count * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
  if (mapped == MAP_FAILED) return 10;
  auto* base = static_cast<unsigned char*>(mapped);
  std::memset(base, 1, count * page);
  // An array from 100 bytes into page 0 to 100 bytes into page 6: pages 1 to 5 are its alone.
  UsedPages used(base + 100, 6 * page);
  used.before(base + 100);  // nothing used up yet
  for (std::size_t i = 0; i < count; ++i) {
    if (!resident(base + i * page)) return std::printf("page %zu went too soon\n", i), 11;
  }
  used.before(base + 3 * page + 50);  // pages 1 and 2 used up; 3 only partly
  const bool after_first[] = {true, false, false, true, true, true, true, true};
  for (std::size_t i = 0; i < count; ++i) {
    if (resident(base + i * page) != after_first[i]) {
      return std::printf("page %zu: resident %d after the first pass\n", i, !after_first[i]), 12;
    }
  }
  used.before(base + 8 * page);  // past the array's end: up to its last whole page only
  const bool after_all[] = {true, false, false, false, false, false, true, true};
  for (std::size_t i = 0; i < count; ++i) {
    if (resident(base + i * page) != after_all[i]) {
      return std::printf("page %zu: resident %d at the end\n", i, !after_all[i]), 13;
    }
  }
  // An array within one page has no page of its own.
  std::memset(base, 1, count * page);
  UsedPages small(base + page + 8, page - 16);
  small.before(base + 2 * page);
  if (!resident(base + page)) return std::puts("a small array's page went"), 14;
  munmap(mapped, count * page);
  return 0;
}

// Lines' places kept in one, two or four bytes by their block (LinePlaces) read back as they
// went in: a block of a few requests, one past 256 (its lines written again in two bytes), one
// past the list's bound (in four, as places; past 2^20, as a table of 10^6 requests names
// them), and blocks that end in the middle of a request's run. `code` is returned on the
// first difference.
int places(int code) {
  const std::size_t block = LinePlaces::kBlockLines;
  std::vector<std::uint32_t> sequence;
  for (std::size_t i = 0; i < block + 7; ++i) {
    sequence.push_back(static_cast<std::uint32_t>(i % 5));
  }
  for (std::size_t i = 0; i < block; ++i) {
    sequence.push_back(static_cast<std::uint32_t>(i % 300));
  }
  for (std::size_t i = 0; i < 2 * block - 3; ++i) {
    sequence.push_back(static_cast<std::uint32_t>((i * 7919) % 40000 + (1u << 20)));
  }
  for (std::size_t i = 0; i < 1000; ++i) sequence.push_back(static_cast<std::uint32_t>(i % 2));
  LinePlaces kept;
  for (std::uint32_t place : sequence) kept.push(place);
  if (kept.size() != sequence.size()) return std::printf("%zu places kept\n", kept.size()), code;
  LinePlaces::Reader reader(kept);
  for (std::size_t i = 0; i < sequence.size(); ++i) {
    std::uint32_t found = reader.next();
    if (found != sequence[i]) {
      return std::printf("place %zu: %u, not %u\n", i, found, sequence[i]), code;
    }
  }
  if (reader.position() != kept.data() + kept.bytes()) return std::puts("bytes left over"), code;
  // One byte a line in the first block, two in the second, four in the third and fourth, one
  // in the fifth (a block starts afresh).
  std::size_t bytes = block + 2 * block + 4 * (2 * block) + (7 + 1000 - 3);
  if (kept.bytes() != bytes) return std::printf("%zu bytes, not %zu\n", kept.bytes(), bytes), code;
  return 0;
}

// Range r's line i: its time, 5 after its request's line before, but 2^33 later for stretches
// of 9,973 lines: intervals that do not fit 32 bits, forward and back, among those that do.
std::int64_t time_of(std::size_t r, std::size_t i) {
  return static_cast<std::int64_t>(r * 1000000000 + i) +
         static_cast<std::int64_t>((i / 9973) % 2) * (std::int64_t{1} << 33);
}

// Each row's times from the export's step intervals: its first, then each interval added
// (a long one's value from its list), as fold.folding.step_intervals reads them.
std::vector<std::vector<std::int64_t>> times_of(const StepIntervals& out,
                                                const std::vector<std::int64_t>& offsets) {
  std::vector<std::vector<std::int64_t>> rows;
  std::size_t next_long = 0;
  for (std::size_t row = 0; row + 1 < offsets.size(); ++row) {
    std::vector<std::int64_t> times{out.first[row]};
    if (out.long_offsets[row] != static_cast<std::int64_t>(next_long)) return {};
    for (auto at = offsets[row]; at < offsets[row + 1]; ++at) {
      std::uint32_t gap = out.gaps[static_cast<std::size_t>(at)];
      std::int64_t interval = gap == kLongGap ? out.long_values[next_long++] : gap;
      times.push_back(times.back() + interval);
    }
    rows.push_back(std::move(times));
  }
  if (next_long != out.long_values.size()) return {};
  return rows;
}

// Whether the export gave each request (row r: place rows[r]) its times sorted.
int check_rows(const StepIntervals& out, const std::vector<std::int64_t>& offsets,
               const std::vector<std::uint32_t>& rows,
               std::vector<std::vector<std::int64_t>> expected, int code) {
  std::vector<std::vector<std::int64_t>> found = times_of(out, offsets);
  if (found.size() != rows.size()) return std::printf("long intervals misplaced\n"), code;
  for (std::size_t row = 0; row < rows.size(); ++row) {
    std::vector<std::int64_t>& want = expected[rows[row]];
    std::sort(want.begin(), want.end());
    if (found[row] != want) {
      std::size_t at = 0;
      while (at < want.size() && at < found[row].size() && found[row][at] == want[at]) ++at;
      return std::printf("row %zu, time %zu of %zu: %lld\n", row, at, want.size(),
                         at < found[row].size() ? static_cast<long long>(found[row][at]) : -1LL),
             code;
    }
  }
  return 0;
}

// Range r's line i belongs to request (i % kRequests) at time_of(r, i). The second range's
// requests are the first's, in reverse order of place, and the rows are in yet another order.
int lines() {
  constexpr std::size_t kRequests = 5;
  constexpr std::size_t kLines = 3 * (std::size_t{1} << 16) + 123;  // several passes a range
  RangeResult result;
  result.others.resize(1);
  Fold* ranges[] = {&result.fold, &result.others[0]};
  for (Fold* range : ranges) {
    for (std::size_t q = 0; q < kRequests; ++q) range->requests.index(Key{1, q, 0});
  }
  std::vector<std::vector<std::int64_t>> expected(kRequests);
  for (std::size_t r = 0; r < 2; ++r) {
    for (std::size_t i = 0; i < kLines; ++i) {
      bool first = i < kRequests;
      std::size_t own = i % kRequests;
      ranges[r]->line_times.add(static_cast<std::uint32_t>(own), time_of(r, i), first,
                                first ? 0 : time_of(r, i - kRequests));
      expected[r == 0 ? own : kRequests - 1 - own].push_back(time_of(r, i));
    }
  }
  if (result.fold.line_times.full.size() < 20) {
    return std::puts("too few times kept whole to try them"), 21;
  }
  Fold& other = result.others[0];
  other.merged = true;
  std::vector<std::int64_t> count(kRequests, 0);
  for (std::size_t i = 0; i < kLines; ++i) ++count[i % kRequests];
  for (std::size_t q = 0; q < kRequests; ++q) {
    other.merged_place.push_back(static_cast<std::uint32_t>(kRequests - 1 - q));
  }
  for (std::size_t q = 0; q < kRequests; ++q) {
    other.merged_before.push_back(count[kRequests - 1 - q]);
  }
  // As fold_file_range leaves a merged range: its own tables gone, its lines and places kept.
  release_merged_tables(other);
  if (!other.requests.entries().empty() || other.line_times.size() != kLines) {
    return std::puts("a merged range kept its table, or lost its lines"), 19;
  }
  const std::vector<std::uint32_t> rows = {3, 0, 4, 1, 2};
  std::vector<std::int64_t> offsets{0};
  for (std::uint32_t place : rows) {
    offsets.push_back(offsets.back() + static_cast<std::int64_t>(expected[place].size()) - 1);
  }
  StepIntervals out;
  export_times(result, rows, offsets, out);
  return check_rows(out, offsets, rows, expected, 20);
}

// One request's times whose intervals sit at the edge of 32 bits (the last one that fits,
// the marker's own value, past it) and start near the top of 64 bits: in time order (its
// intervals kept as they came), then going back and repeating (its times sorted first). Each
// comes back as it went in.
int edges(bool back, int code) {
  constexpr std::int64_t kTop = std::int64_t{0xFFFFFFFF};
  const std::int64_t start = INT64_MAX - 8 * kTop;
  std::vector<std::int64_t> steps = {kTop - 1, kTop, kTop + 1, 0, 1, kTop - 1, 7};
  if (back) steps = {kTop - 1, kTop, kTop + 1, 0, -1, 1, kTop - 1, -kTop, 7};
  std::vector<std::vector<std::int64_t>> expected{{start}};
  for (std::int64_t step : steps) expected[0].push_back(expected[0].back() + step);
  RangeResult result;
  result.fold.requests.index(Key{1, 0, 0});
  for (std::size_t i = 0; i < expected[0].size(); ++i) {
    result.fold.line_times.add(0, expected[0][i], i == 0, i == 0 ? 0 : expected[0][i - 1]);
  }
  const std::vector<std::int64_t> offsets{0, static_cast<std::int64_t>(steps.size())};
  StepIntervals out;
  export_times(result, {0}, offsets, out);
  return check_rows(out, offsets, {0}, expected, code);
}

// The requests' columns (request_columns): a table of several passes' entries, in an order
// that is not the table's, each entry's key and sums at its rank in the column of that name,
// none read after its page went back (those read as zeros, and every value here is not), and
// the table left empty. Passes of 7 and 13 entries end at many places within a page (a real
// table starts anywhere in one; 2^14 entries of 176 bytes end on the same place each time).
// Beside them, the rows by output position and draft length of the first `rows` in key
// order, each at its request's rank: buckets it left and the one it is in, its first draft
// length and others; none for a request out of order or past `rows`.
int columns(std::size_t entries_a_pass) {
  constexpr std::size_t kRequests = 3 * (std::size_t{1} << 14) + 77;
  constexpr std::size_t kRows = kRequests - 500;  // the last 500 in key order: no leg
  Fold fold;
  Table<Request>& table = fold.requests;
  std::vector<Request> made(kRequests);
  for (std::size_t q = 0; q < kRequests; ++q) {
    Request& r = table.at(Key{q + 1, 7 * q + 1, static_cast<std::int64_t>(q % 5) + 1, q + 1});
    std::int64_t base = static_cast<std::int64_t>(q) * 32 + 1;
    std::int64_t* sums[] = {&r.lines, &r.steps, &r.proposed, &r.accepted, &r.emitted,
                            &r.emitted_lines, &r.max_proposed, &r.max_n, &r.max_pid,
                            &r.first_t, &r.first_n, &r.first_draft, &r.first_verify,
                            &r.timed_steps, &r.draft_steps, &r.verify_steps, &r.draft_ns,
                            &r.verify_ns};
    for (std::int64_t* sum : sums) *sum = base++;
    // Request q: bucket q % 4 (after q % 3 buckets left, 0 up), draft length 2 and, for
    // every fifth, length 9 (kept in other_lengths) before it; every 11th out of order.
    auto b = static_cast<std::int32_t>(q % 4 + 3);
    r.order.bucket = static_cast<std::int8_t>(q % 3);
    r.order.bucket_steps = b;
    r.order.bucket_proposed = 2 * b;
    r.order.bucket_accepted = b - 1;
    r.order.length_proposed = 2;
    r.order.length_intervals = b + 1;
    r.order.length_ns = 1000 * b;
    r.order.unordered = q % 11 == 0;
    made[q] = r;
    for (std::int64_t left = 0; left < static_cast<std::int64_t>(q % 3); ++left) {
      fold.done_buckets.push_back(BucketRow{static_cast<std::uint32_t>(q), left, left + 1,
                                            left + 2, left + 3});
    }
    if (q % 5 == 0) fold.other_lengths.at(Key{q, 9, 0}) = StepLengthSums{7, 70};
  }
  // Key order here: the places reversed in blocks of 1000, so ranks jump back and forth.
  std::vector<std::uint32_t> order;
  for (std::size_t block = 0; block < kRequests; block += 1000) {
    std::size_t end = std::min(kRequests, block + 1000);
    for (std::size_t place = end; place > block; --place) {
      order.push_back(static_cast<std::uint32_t>(kRequests - place));
    }
  }
  std::vector<std::int64_t> writer_of(kRequests);
  for (std::size_t q = 0; q < kRequests; ++q) writer_of[q] = static_cast<std::int64_t>(q) + 9;
  RequestExport exported =
      request_columns(fold, order, kRows, writer_of, true, entries_a_pass);
  std::vector<FilledInPlace>& columns = exported.columns;
  if (!fold.done_buckets.empty() || !fold.other_lengths.entries().empty()) {
    return std::puts("the buckets left or the other lengths were kept"), 33;
  }
  // The rows as the definitions above give them, request by request in key order.
  OrderRows expected;
  for (std::size_t at = 0; at < kRows; ++at) {
    std::size_t q = order[at];
    if (q % 11 == 0) continue;
    auto row = static_cast<std::int64_t>(at);
    auto b = static_cast<std::int64_t>(q % 4 + 3);
    for (std::int64_t left = 0; left < static_cast<std::int64_t>(q % 3); ++left) {
      for (auto [column, value] : {std::pair{&expected.bucket_row, row}, {&expected.bucket, left},
                                   {&expected.steps, left + 1}, {&expected.proposed, left + 2},
                                   {&expected.accepted, left + 3}}) {
        column->push_back(value);
      }
    }
    for (auto [column, value] :
         {std::pair{&expected.bucket_row, row}, {&expected.bucket, static_cast<std::int64_t>(q % 3)},
          {&expected.steps, b}, {&expected.proposed, 2 * b}, {&expected.accepted, b - 1}}) {
      column->push_back(value);
    }
    for (auto [column, value] : {std::pair{&expected.length_row, row}, {&expected.length, 2},
                                 {&expected.intervals, b + 1}, {&expected.ns, 1000 * b}}) {
      column->push_back(value);
    }
    if (q % 5 == 0) {
      for (auto [column, value] : {std::pair{&expected.length_row, row}, {&expected.length, 9},
                                   {&expected.intervals, 7}, {&expected.ns, 70}}) {
        column->push_back(value);
      }
    }
  }
  const OrderRows& got = exported.rows;
  if (got.bucket_row != expected.bucket_row || got.bucket != expected.bucket ||
      got.steps != expected.steps || got.proposed != expected.proposed ||
      got.accepted != expected.accepted) {
    return std::printf("pass of %zu: rows by position: %zu, not %zu\n", entries_a_pass,
                       got.bucket_row.size(), expected.bucket_row.size()), 34;
  }
  if (got.length_row != expected.length_row || got.length != expected.length ||
      got.intervals != expected.intervals || got.ns != expected.ns) {
    return std::printf("pass of %zu: rows by length: %zu, not %zu\n", entries_a_pass,
                       got.length_row.size(), expected.length_row.size()), 35;
  }
  if (!table.entries().empty()) return std::puts("the table was kept"), 30;
  if (columns.size() != kRequestColumns + kDurationColumns) return std::puts("columns"), 31;
  namespace c = request_column;
  struct Named {
    std::size_t column;
    std::int64_t Request::*field;
  };
  const Named named[] = {
      {c::kLines, &Request::lines}, {c::kSteps, &Request::steps},
      {c::kProposed, &Request::proposed}, {c::kAccepted, &Request::accepted},
      {c::kEmitted, &Request::emitted}, {c::kEmittedLines, &Request::emitted_lines},
      {c::kMaxProposed, &Request::max_proposed}, {c::kMaxN, &Request::max_n},
      {c::kPid, &Request::max_pid}, {c::kFirstT, &Request::first_t},
      {c::kFirstN, &Request::first_n}, {c::kFirstDraft, &Request::first_draft},
      {c::kFirstVerify, &Request::first_verify}, {c::kTimedSteps, &Request::timed_steps},
      {c::kDraftSteps, &Request::draft_steps}, {c::kVerifySteps, &Request::verify_steps},
      {c::kDraftNs, &Request::draft_ns}, {c::kVerifyNs, &Request::verify_ns}};
  for (std::size_t at = 0; at < kRequests; ++at) {
    std::size_t q = order[at];
    auto check = [&](std::size_t column, std::int64_t expected) {
      if (columns[column][at] == expected) return false;
      std::printf("pass of %zu: request %zu column %zu: %lld, not %lld\n", entries_a_pass, q,
                  column, static_cast<long long>(columns[column][at]),
                  static_cast<long long>(expected));
      return true;
    };
    if (check(c::kLeg, static_cast<std::int64_t>(q % 5) + 1) ||
        check(c::kWriter, static_cast<std::int64_t>(q) + 9) ||
        check(c::kSeq, static_cast<std::int64_t>(7 * q + 1)) ||
        check(c::kSid, static_cast<std::int64_t>(q))) {
      return 32;
    }
    for (const Named& each : named) {
      if (check(each.column, made[q].*each.field)) return 32;
    }
  }
  return 0;
}

// A file read on two ranges (on a host of two cores or more; -1 after the rest on a host of
// one): the second range, merged into the first, has let its request table, histogram, bins
// and string ids go, as the read's merge does, and the first holds every request. Every line
// is in no leg here: a request is (writer, id).
int merged_read() {
  char path[] = "/tmp/used_pages_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return std::puts("no temporary file"), 40;
  std::FILE* out = fdopen(fd, "w");
  constexpr int kLines = 40000, kWriters = 4;
  for (int i = 0; i < kLines; ++i) {
    int request = i / 40;  // 1000 requests, each within one writer's lines
    if (request % 2) {
      std::fprintf(out, "{\"v\":1,\"w\":\"%016x\",\"n\":%d,\"t_ns\":%d,\"pid\":1,"
                   "\"seq\":%d,\"proposed\":4,\"accepted\":1}\n", i % kWriters + 1, i, 1000 + i,
                   request);
    } else {
      std::fprintf(out, "{\"v\":1,\"w\":\"%016x\",\"n\":%d,\"t_ns\":%d,\"pid\":1,"
                   "\"seq\":\"r%d\",\"proposed\":4,\"accepted\":1}\n", i % kWriters + 1, i,
                   1000 + i, request);
    }
  }
  std::fclose(out);
  Legs legs;  // no leg: one open segment, in none
  legs.segment_status = {kUnattributed};
  legs.segment_leg = {-1};
  legs.segment_labels.resize(1);
  RangeResult result;
  bool read = fold_file_range(path, 0, -1, legs, false, PerLine::kNone, std::size_t{1} << 16,
                              std::int64_t{1} << 16, 0, nullptr, result);
  unlink(path);
  if (!read || result.fold.lines != kLines) return std::puts("the file was not read"), 41;
  bool one_core = std::thread::hardware_concurrency() < 2;
  if (result.others.empty() && !one_core) return std::puts("one range on several cores"), 42;
  for (const Fold& other : result.others) {
    if (!other.merged) return std::puts("a range was not merged"), 43;
    if (!other.requests.entries().empty() || !other.hist.entries().empty() ||
        !other.bins.entries().empty() || !other.seq_ids.empty()) {
      return std::puts("a merged range kept its tables"), 44;
    }
  }
  // Each writer's lines of a request: 1000 requests, 4 writers each (i % 4 within 40 lines).
  if (result.fold.requests.entries().size() != 4000) {
    return std::printf("%zu requests\n", result.fold.requests.entries().size()), 45;
  }
  // The read's own table (on the heap, starting anywhere in a page) made into its columns in
  // passes of 7 entries: each of a writer's shares of a request is 10 lines, 40 drafted tokens
  // and 10 accepted, its lines 4 apart from its first (t_ns = 1000 + n) to its last n.
  auto& entries = result.fold.requests.entries();
  std::vector<std::uint32_t> order = request_order(entries, result.fold.seq_ids);
  std::vector<std::int64_t> writer_of(entries.size(), 0);
  std::vector<FilledInPlace> columns =
      request_columns(result.fold, order, 0, writer_of, false, 7).columns;
  if (columns.size() != kRequestColumns) return std::puts("columns without durations"), 47;
  namespace c = request_column;
  for (std::size_t at = 0; at < 4000; ++at) {
    if (columns[c::kLines][at] != 10 || columns[c::kSteps][at] != 10 ||
        columns[c::kProposed][at] != 40 || columns[c::kAccepted][at] != 10 ||
        columns[c::kMaxN][at] - (columns[c::kFirstT][at] - 1000) != 36) {
      return std::printf("request at rank %zu: its columns are not its lines'\n", at), 46;
    }
  }
  return one_core ? -1 : 0;
}

}  // namespace

// parallel.h's shares, as the export and the cadence cut their rows: each cut the first item
// whose work before reaches its share's part, every item in one share, and a share for each
// part even where one item holds most of the work.
int shares_of_work() {
  // Work 5, 0, 0, 90, 5 (total 100) in four parts: wanted 25, 50, 75 are all first reached
  // before the fifth item (work before it: 95), so three cuts fall there.
  std::vector<std::int64_t> before{0, 5, 5, 5, 95, 100};
  if (shares(before, 4) != std::vector<std::size_t>{0, 4, 4, 4, 5}) return 50;
  if (shares(before, 1) != std::vector<std::size_t>{0, 5}) return 51;
  if (shares(before, 0) != std::vector<std::size_t>{0, 5}) return 52;  // at least one part
  // Even work: even shares.
  std::vector<std::size_t> even(9);
  for (std::size_t i = 0; i < even.size(); ++i) even[i] = 10 * i;
  if (shares(even, 4) != std::vector<std::size_t>{0, 2, 4, 6, 8}) return 53;
  // No items: one empty share per part.
  if (shares(std::vector<std::int64_t>{0}, 3) != std::vector<std::size_t>{0, 0, 0, 0}) return 54;
  if (threads_for(0) != 1) return 55;
  return 0;
}

int main() {
  if (int failed = shares_of_work()) return failed;
  if (int failed = pages()) return failed;
  if (int failed = places(24)) return failed;
  if (int failed = lines()) return failed;
  if (int failed = edges(false, 22)) return failed;
  if (int failed = edges(true, 23)) return failed;
  for (std::size_t pass : {std::size_t{7}, std::size_t{13}, std::size_t{1} << 14}) {
    if (int failed = columns(pass)) return failed;
  }
  int merged = merged_read();
  if (merged > 0) return merged;
  std::puts(merged < 0 ? "pages and lines as placed; one core: no merged read"
                       : "pages and lines as placed");
  return 0;
}
