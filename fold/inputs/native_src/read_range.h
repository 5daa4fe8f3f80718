// Reading a byte range of a step log: pread(2) into a buffer, whole lines to the fold, on one
// thread per share of a large range, the threads' folds merged in file order (their lines'
// times are exported by step_export.h). Part of fold/_native.cc, its only includer; no
// Python.

#ifndef FOLD_NATIVE_READ_RANGE_H_
#define FOLD_NATIVE_READ_RANGE_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "arrow_export.h"
#include "fold_pass.h"
#include "hash_table.h"
#include "parallel.h"

namespace fold_native {

constexpr std::size_t kPad = 64;  // readable slack after the parsed bytes
static_assert(kPad >= KeyOrder::kValueMemo, "a remembered value is compared in the slack");
// Hands the whole lines of the bytes [begin, end) of the file to `handler.lines(p, end, base)`
// (false: stop), a block at a time: begin is a line start. Returns the offset after the last
// newline read. Lines longer than a block grow the buffer.
template <class Handler>
std::int64_t read_lines(int fd, std::int64_t begin, std::int64_t end, std::size_t block,
                        Handler& handler, bool& io_error) {
  std::vector<char> buffer(2 * block + kPad);
  std::size_t carried = 0;
  std::int64_t offset = begin;
  std::int64_t consumed = begin;
  while (offset < end) {
    if (buffer.size() < carried + block + kPad) buffer.resize(2 * (carried + block) + kPad);
    std::size_t want = static_cast<std::size_t>(std::min<std::int64_t>(end - offset, block));
    ssize_t got = pread(fd, buffer.data() + carried, want, offset);
    if (got <= 0) {
      io_error = got < 0;
      break;  // the file shrank while being read: what was read is folded
    }
    offset += got;
    std::size_t filled = carried + static_cast<std::size_t>(got);
    char* data = buffer.data();
    std::memset(data + filled, 0, kPad);
    const void* last = memrchr(data, '\n', filled);
    if (last == nullptr) {
      carried = filled;
      continue;
    }
    std::size_t cut = static_cast<const char*>(last) - data + 1;
    bool going = handler.lines(data, data + cut, consumed);
    consumed += static_cast<std::int64_t>(cut);
    if (!going) break;
    carried = filled - cut;
    std::memmove(data, data + cut, carried);
  }
  return consumed;
}

// Folds the bytes [begin, end) of the file, whole lines only: begin is a line start. Returns
// the offset after the last newline read.
inline std::int64_t fold_range(int fd, std::int64_t begin, std::int64_t end, const Legs& legs,
                               bool skip_bad, PerLine per_line, std::size_t block,
                               const Seeds* seeds, Fold& fold,
                               std::vector<std::string>& writer_names, bool& io_error) {
  Folder folder(legs, skip_bad, per_line, fold, seeds);
  // Room for a time per line of the shortest valid lines (about 90 bytes), so the arrays do
  // not move as they grow (0.04 s of 0.49 at 10M lines); it is address space until written.
  // Capped, and only a wish: without the room the arrays grow as vectors do.
  constexpr std::int64_t kMostReserved = std::int64_t{1} << 26;
  auto most_lines = static_cast<std::size_t>(std::min((end - begin) / 80 + 1, kMostReserved));
  // The requests' table gets a wish too, sized like the line arrays' per byte read (an entry
  // is 256 bytes: one per 640 bytes, eight of the shortest lines) and capped: a load test's
  // 10^6 requests of ten lines then fill its pages once instead of copying the table on every
  // doubling. More requests than that grow it as before.
  constexpr std::int64_t kBytesPerRequest = 640;
  constexpr std::int64_t kMostRequests = std::int64_t{1} << 22;
  fold.requests.reserve_entries(static_cast<std::size_t>(
      std::min((end - begin) / kBytesPerRequest + 1, kMostRequests)));
  try {
    // A byte a line, two in a busy block, four past 16,384 requests (LinePlaces): the room
    // for the most, as the 32-bit places had.
    fold.line_times.request.reserve(4 * most_lines);
    fold.line_times.gap.reserve(most_lines);
  } catch (const std::bad_alloc&) {
  }
  std::int64_t consumed = read_lines(fd, begin, end, block, folder, io_error);
  writer_names = std::move(folder.writer_names_);
  return consumed;
}

// The requests a merged range continues (merge_into) folded again from the bytes their lines
// span there, after the ranges before it. False: a sum overflowed.
inline bool continue_requests(int fd, const Legs& legs, std::size_t block, Fold& into,
                              const std::vector<Crossing>& crossing, bool& io_error) {
  if (crossing.empty()) return true;
  std::int64_t begin = INT64_MAX, end = 0;
  for (const Crossing& request : crossing) {
    if (request.first_offset < 0) continue;  // no attributed line in the range
    begin = std::min(begin, request.first_offset);
    end = std::max(end, request.last_end);
  }
  if (begin >= end) return true;
  Continuation continuation(legs, into, crossing);
  struct Counting {  // stops at the first overflow
    Continuation& continuation;
    bool overflow = false;
    bool lines(const char* p, const char* stop, std::int64_t base) {
      overflow = !continuation.lines(p, stop, base);
      return !overflow;
    }
  } handler{continuation};
  std::int64_t read = read_lines(fd, begin, end, block, handler, io_error);
  io_error = io_error || read < end;  // the file shrank under the read
  return !handler.overflow;
}

// The offset just after the first '\n' at or after `from`, or -1.
inline std::int64_t next_line_start(int fd, std::int64_t from, std::int64_t size) {
  char chunk[4096];
  while (from < size) {
    ssize_t got = pread(fd, chunk, sizeof chunk, from);
    if (got <= 0) return -1;
    const void* newline = std::memchr(chunk, '\n', static_cast<std::size_t>(got));
    if (newline != nullptr) return from + (static_cast<const char*>(newline) - chunk) + 1;
    from += got;
  }
  return -1;
}

struct RangeResult {
  Fold fold;
  std::int64_t consumed = 0;  // offset after the last newline read
  std::int64_t size = 0;      // the end of the range that was read
  std::vector<std::string> writer_names;  // for PerLine::kGroups keys
  PerLine per_line = PerLine::kNone;
  bool keep_seeds = false;  // hand back where each request was left (seed_columns)
  bool io_error = false;
  std::vector<Fold> others;  // the other threads' folds: their step times are exported
};

// A range merged into the first keeps only its lines and where each goes (merged_place,
// merged_before): its requests, histogram, bins and string ids are the first range's now.
// Held to the read's end, a load test's 10^6 requests made its table some 90 MB on top of
// the export, the read's peak.
inline void release_merged_tables(Fold& range) {
  range.requests = Table<Request>();
  range.hist = Table<std::int64_t>();
  range.bins = Table<Bin>();
  std::vector<std::string>().swap(range.seq_ids);
  std::unordered_map<std::string, std::uint64_t>().swap(range.seq_index);
}

// Folds [begin, end) of `path` (end < 0: to the end of the file).
inline bool fold_file_range(const char* path, std::int64_t begin, std::int64_t end,
                            const Legs& legs, bool skip_bad, PerLine per_line, std::size_t block,
                            std::int64_t bytes_per_thread, unsigned most_threads,
                            const Seeds* seeds, RangeResult& result) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat info;
  if (fstat(fd, &info) != 0) return false;
  std::int64_t size = info.st_size;
  if (end < 0 || end > size) end = size;
  if (begin > end) begin = end;
  result.size = end;
  result.consumed = begin;
  if (begin == end) return true;
  posix_fadvise(fd, begin, end - begin, POSIX_FADV_SEQUENTIAL);

  unsigned cores = most_threads > 0
                       ? most_threads
                       : std::max(1u, std::min(std::thread::hardware_concurrency(), 8u));
  // The follower's groups keep the order lines were read in: one thread.
  std::int64_t shares = std::min<std::int64_t>(cores, (end - begin) / bytes_per_thread);
  unsigned parts = per_line == PerLine::kGroups
                       ? 1u
                       : static_cast<unsigned>(std::max<std::int64_t>(1, shares));
  std::vector<std::int64_t> bounds{begin};
  for (unsigned i = 1; i < parts; ++i) {
    std::int64_t at = begin + (end - begin) / parts * i;
    std::int64_t cut = next_line_start(fd, std::max(bounds.back(), at), end);
    if (cut < 0 || cut >= end) break;
    if (cut > bounds.back()) bounds.push_back(cut);
  }
  bounds.push_back(end);
  std::size_t ranges = bounds.size() - 1;
  if (ranges == 1) {
    result.consumed = fold_range(fd, begin, end, legs, skip_bad, per_line, block, seeds,
                                 result.fold, result.writer_names, result.io_error);
    return true;
  }
  // Every range but the last ends at a newline, so each is read whole unless it stops.
  std::vector<Fold>& folds = result.others;
  folds.resize(ranges - 1);
  for (Fold& other : folds) other.tally_drafts = result.fold.tally_drafts;
  std::vector<std::int64_t> consumed(ranges, 0);
  std::vector<char> failed(ranges, 0);
  std::vector<std::vector<std::string>> names(ranges);
  std::vector<char> io_errors(ranges, 0);
  auto run = [&](std::size_t i, Fold& fold) {
    bool io_error = false;
    try {
      consumed[i] = fold_range(fd, bounds[i], bounds[i + 1], legs, skip_bad, per_line, block,
                               seeds, fold, names[i], io_error);
    } catch (const std::bad_alloc&) {
      failed[i] = 1;
    }
    io_errors[i] = io_error;
  };
  std::vector<std::thread> threads;
  try {
    for (std::size_t i = 1; i < ranges; ++i) {
      threads.emplace_back([&, i] { run(i, folds[i - 1]); });
    }
  } catch (...) {
    for (auto& thread : threads) thread.join();
    throw;
  }
  run(0, result.fold);
  for (auto& thread : threads) thread.join();
  if (std::find(failed.begin(), failed.end(), 1) != failed.end()) throw std::bad_alloc();
  result.consumed = consumed[0];
  result.io_error = io_errors[0];
  for (std::size_t i = 1; i < ranges; ++i) {
    // A range that stopped early (a bad line, a refusal, a short read) ends the file there.
    if (result.fold.stopped || result.fold.overflow || result.consumed != bounds[i]) break;
    std::vector<Crossing> crossing;
    bool reread_failed = false;  // the file changed under the read: the pass gives it up
    if (!merge_into(result.fold, folds[i - 1], result.fold.lines, crossing) ||
        !continue_requests(fd, legs, block, result.fold, crossing, reread_failed) ||
        reread_failed) {
      result.fold.overflow = true;
      break;
    }
    folds[i - 1].merged = true;
    release_merged_tables(folds[i - 1]);
    result.fold.stopped = folds[i - 1].stopped;
    result.fold.overflow = folds[i - 1].overflow;
    result.consumed = consumed[i];
    result.io_error = io_errors[i];
  }
  return true;
}

// Attributed requests first, in (leg, writer, string id, seq) order (writer ids as 16
// lowercase hex digits sort as their numbers; integer ids, which have no string id, first,
// then the string ids by their bytes, as polars sorts them), then the unattributed: the
// order the partial fold keeps, so
// the step times need no sort or filter (no copy) in Python. Returns the places in `entries`
// in that order; the entries stay where they are (the lines' request places point at them).
inline std::vector<std::uint32_t> request_order(const std::vector<Table<Request>::Entry>& entries,
                                                const std::vector<std::string>& seq_ids) {
  // The keys copied beside their places and sorted there: an entry holds all of a request's
  // sums, and a comparison reaching into 10^6 of them at random missed the cache (half of the
  // sort's 0.2 s for a load test's requests).
  struct Sorted {
    Key key;
    std::uint32_t place;
  };
  std::vector<Sorted> keys(entries.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    keys[i] = Sorted{entries[i].key, static_cast<std::uint32_t>(i)};
  }
  std::sort(keys.begin(), keys.end(), [&](const Sorted& left, const Sorted& right) {
    const Key& x = left.key;
    const Key& y = right.key;
    bool x_out = x.c < 0, y_out = y.c < 0;
    if (x_out != y_out) return y_out;
    if (x.c != y.c) return x.c < y.c;
    if (x.a != y.a) return x.a < y.a;
    if (x.d != y.d) {
      if (x.d == 0 || y.d == 0) return x.d == 0;
      return seq_ids[x.d - 1] < seq_ids[y.d - 1];  // char_traits<char>: bytes as unsigned
    }
    return x.b < y.b;
  });
  std::vector<std::uint32_t> order(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) order[i] = keys[i].place;
  return order;
}

// The ranges whose lines the result holds, in file order: the first, and the others merged
// into it before any stop.
inline std::vector<Fold*> merged_ranges(RangeResult& result) {
  std::vector<Fold*> ranges{&result.fold};
  for (Fold& other : result.others) {
    if (other.merged) ranges.push_back(&other);
  }
  return ranges;
}

// How many places a range's own lines name: its table's entries, or, merged, their places in
// the first range's (its own table is gone: release_merged_tables).
inline std::size_t own_places(const Fold& range, bool first) {
  return first ? range.requests.entries().size() : range.merged_place.size();
}

// With PerLine::kTrace: every attributed line in file order, as columns: its request's leg,
// writer (as `writer_of` numbers requests' writers, by place in the first range's table) and
// seq, its time, pid and counts. Read before export_times frees the line arrays.
struct TraceLines {
  std::vector<std::int64_t> leg, writer, seq, sid, t_ns, pid, proposed, accepted, emitted;
};

inline TraceLines trace_lines(RangeResult& result, const std::vector<std::int64_t>& writer_of) {
  TraceLines lines;
  const auto& requests = result.fold.requests.entries();
  std::vector<Fold*> ranges = merged_ranges(result);
  std::size_t total = 0;
  for (const Fold* range : ranges) total += range->line_times.size();
  for (auto* column : {&lines.leg, &lines.writer, &lines.seq, &lines.sid, &lines.t_ns,
                       &lines.pid, &lines.proposed, &lines.accepted, &lines.emitted}) {
    column->reserve(total);
  }
  for (std::size_t index = 0; index < ranges.size(); ++index) {
    const Fold& range = *ranges[index];
    TimesInOrder times(range.line_times, own_places(range, index == 0));
    LinePlaces::Reader request(range.line_times.request);
    for (std::size_t line = 0; line < range.line_times.size(); ++line) {
      std::uint32_t own = request.next();
      std::uint32_t place = index == 0 ? own : range.merged_place[own];
      const Key& key = requests[place].key;
      lines.leg.push_back(key.c);
      lines.writer.push_back(writer_of[place]);
      lines.seq.push_back(static_cast<std::int64_t>(key.b));
      lines.sid.push_back(static_cast<std::int64_t>(key.d) - 1);
      lines.t_ns.push_back(times.at(line, own));
      lines.pid.push_back(range.line_pid[line]);
      lines.proposed.push_back(range.line_proposed[line]);
      lines.accepted.push_back(range.line_accepted[line]);
      lines.emitted.push_back(range.line_emitted[line]);
    }
  }
  return lines;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_READ_RANGE_H_
