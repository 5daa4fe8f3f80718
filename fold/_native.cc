// fold._native: reads, attributes and folds a byte range of a step log (instrument/FORMAT.md)
// in one pass, without building any per-line Python object.
//
// One function, fold_range (see kDoc). Every line is parsed as JSON: keys in any order,
// whitespace between tokens, unknown keys with any value skipped (validated as orjson would),
// leg labels unescaped. A line ends one of four ways:
//   - folded: a valid v1 step, attributed to its leg (overlaps resolved by its label);
//   - bad: not a v1 step (invalid JSON or UTF-8, a missing field, a wrong type, a number out of
//     range, another version); counted, and its place handed back so that the exact reader
//     (fold.reader) words the reason. Without skip_bad the range stops there.
//   - refused: accepted > proposed; the range stops there and the exact reader words it.
//   - deferred: valid JSON that only the exact reader may judge (a sign on an integer, a
//     duplicate key, an escaped key or writer id, a writer id not in the writers' form, a lone
//     surrogate, a number orjson may call infinite): its place is handed back and Python parses
//     it. Valid v1 writers never produce these.
// A line that is bad but ends in a whole valid line starting with {"v": is a torn fragment the
// next write was glued to: the line is kept and the fragment counted torn, as the exact reader
// does. A last line without its newline is torn (final) or held back (following a live file).
//
// Tables come back through the Arrow C data interface (PyCapsules), so polars takes the
// buffers without a copy. A range of 128 MiB or more is split at a newline and parsed on one
// thread per 64 MiB, up to the cores, with the GIL released.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>  // malloc_trim: hand freed memory back (glibc only; elsewhere a no-op)
#endif
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "native_src/arrow_export.h"
#include "native_src/hash_table.h"
#include "native_src/json_line.h"

namespace {

using namespace fold_native;  // NOLINT: the three headers are this file's own parts

constexpr std::size_t kPad = 64;  // readable slack after the parsed bytes
constexpr Py_ssize_t kDefaultBlock = Py_ssize_t{4} << 20;            // bytes read per pread(2)
constexpr Py_ssize_t kDefaultBytesPerThread = Py_ssize_t{64} << 20;  // less: one thread
constexpr std::size_t kMaxExamples = 5;         // bad lines whose place is handed back
constexpr std::size_t kMaxDeferred = 1 << 20;   // beyond: the caller reads the file in Python

// Attribution outcomes, as fold.attribute numbers them.
constexpr std::int64_t kAttributed = 0;
constexpr std::int64_t kUnattributed = 1;
constexpr std::int64_t kAmbiguous = 2;

enum class Kind : std::int64_t { kDeferred = 0, kBad = 1, kRefused = 2 };

struct Request {  // per (writer, seq, leg or -1)
  std::int64_t lines = 0, steps = 0, proposed = 0, accepted = 0, emitted = 0, emitted_lines = 0;
  std::int64_t max_proposed = 0, max_n = 0, max_pid = 0;
  std::vector<std::int64_t> times;  // t_ns of every line, attributed requests only
  // The same request's times in other threads' folds, gathered only when exported: merging
  // them earlier would hold both copies at once.
  std::vector<std::vector<std::int64_t>*> more_times;
};

struct Bin {  // per (leg, time bin)
  std::int64_t steps = 0, proposed = 0, accepted = 0;
};

inline bool add(std::int64_t& total, std::int64_t value) {
  return !__builtin_add_overflow(total, value, &total);
}

// A line handed back to Python: its number in the range (0-based), place and kind.
struct Event {
  std::int64_t line;
  std::int64_t offset;
  std::int64_t length;
  Kind kind;
};


// Everything one range (one thread) found.
struct Fold {
  Table<Request> requests;   // key (writer, seq, leg or -1)
  Table<std::int64_t> hist;  // key (leg, accepted, 0)
  Table<Bin> bins;           // key (leg, bin, 0)
  std::int64_t lines = 0;    // newline-ended lines met, whatever became of them
  std::int64_t folded = 0, attributed = 0, unattributed = 0, ambiguous = 0;
  std::int64_t torn = 0, bad = 0;
  std::vector<Event> events;  // deferred lines, the first bad ones, and the stop
  std::size_t deferred = 0;
  bool stopped = false;     // a bad line (without skip_bad) or a refusal ended the range
  bool overflow = false;    // a sum beyond 64 bits, or too many deferred lines
  // With want_steps: per folded line, its group key (label index, or -1 - writer index
  // among `step_writers`), time and counts, for the follower's provisional groups.
  std::vector<std::int64_t> step_key, step_t, step_proposed, step_accepted;
  std::vector<std::string> step_labels;
  std::unordered_map<std::string, std::int64_t> label_index;
};

// -- attribution and folding ----------------------------------------------------------------

// Leg windows as fold.attribute cuts them: sorted distinct end points; segment 2k+1 is the
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

class Folder {
 public:
  Folder(const Legs& legs, bool skip_bad, bool want_steps, Fold& fold)
      : legs_(legs), skip_bad_(skip_bad), want_steps_(want_steps), fold_(fold) {}

  // Folds the whole lines in [p, end); end[-1] is '\n'. `base` is the file offset of p.
  // False: stop reading (the range stopped, or a sum overflowed).
  bool lines(const char* p, const char* end, std::int64_t base) {
    const char* begin = p;
    while (p < end) {
      const char* newline = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      std::int64_t number = fold_.lines++;
      if (!line(p, newline, number, base + (p - begin))) return false;
      p = newline + 1;
    }
    return true;
  }

 private:
  bool line(const char* p, const char* end, std::int64_t number, std::int64_t offset) {
    Verdict verdict = parse_line(p, end, step_, order_);
    bool glued = false;
    if (verdict == Verdict::kBad) {
      const char* start = find_last_line_start(p, end);
      if (start != nullptr) {
        Verdict rest = parse_line(start, end, step_, order_);
        if (rest == Verdict::kOk) {
          glued = true;
          verdict = Verdict::kOk;
        } else if (rest == Verdict::kDefer) {
          verdict = Verdict::kDefer;
        }
      }
    }
    std::int64_t length = end - p;
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
    if (step_.accepted > step_.proposed) {
      fold_.events.push_back(Event{number, offset, length, Kind::kRefused});
      fold_.stopped = true;
      return false;
    }
    fold_.torn += glued;
    if (!add_step()) {
      fold_.overflow = true;
      return false;
    }
    return true;
  }

  static const char* find_last_line_start(const char* p, const char* end) {
    static const char kStart[] = "{\"v\":";
    for (const char* q = end - (sizeof kStart - 1); q > p; --q) {
      if (*q == '{' && std::memcmp(q, kStart, sizeof kStart - 1) == 0) return q;
    }
    return nullptr;
  }

  // (status, leg or -1) of the current step.
  std::pair<std::int64_t, std::int64_t> attribute() {
    std::int64_t t = step_.t_ns;
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
    if (status == kAmbiguous && step_.has_label) {
      std::string_view label = label_of(step_, scratch_);
      for (const auto& [candidate, owner] : legs_.segment_labels[segment]) {
        if (label == candidate) return {kAttributed, owner};
      }
    }
    return {status, status == kAttributed ? leg : -1};
  }

  bool add_step() {
    auto [status, leg] = attribute();
    ++fold_.folded;
    fold_.attributed += status == kAttributed;
    fold_.unattributed += status == kUnattributed;
    fold_.ambiguous += status == kAmbiguous;
    if (want_steps_) keep_step();
    Request& request = fold_.requests.at(Key{step_.writer, step_.seq, leg});
    request.lines += 1;
    request.steps += step_.proposed > 0;
    if (!add(request.proposed, step_.proposed) || !add(request.accepted, step_.accepted) ||
        !add(request.emitted, step_.emitted * step_.has_emitted)) {
      return false;
    }
    request.emitted_lines += step_.has_emitted;
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
    request.times.push_back(step_.t_ns);
    if (step_.proposed == 0) return true;
    auto index = static_cast<std::size_t>(leg);
    fold_.hist.at(Key{static_cast<std::uint64_t>(leg),
                      static_cast<std::uint64_t>(step_.accepted), 0}) += 1;
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
  bool want_steps_;
  Fold& fold_;
  Step step_;
  std::string scratch_;  // an unescaped label
  KeyOrder order_;
  Bin* last_bin_ = nullptr;
  Key last_bin_key_{0, 0, 0};
  std::size_t last_bins_size_ = 0;
  std::unordered_map<std::uint64_t, std::size_t> writer_slots_;
  std::int64_t last_low_ = 1, last_high_ = 0;  // empty: no segment cached yet
  std::size_t last_segment_ = 0;
};

// Folds the bytes [begin, end) of the file, whole lines only: begin is a line start. Returns
// the offset after the last newline read. Lines longer than a block grow the buffer.
std::int64_t fold_range(int fd, std::int64_t begin, std::int64_t end, const Legs& legs,
                        bool skip_bad, bool want_steps, std::size_t block, Fold& fold,
                        std::vector<std::string>& writer_names, bool& io_error) {
  std::vector<char> buffer(2 * block + kPad);
  Folder folder(legs, skip_bad, want_steps, fold);
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
    bool going = folder.lines(data, data + cut, consumed);
    consumed += static_cast<std::int64_t>(cut);
    if (!going) break;
    carried = filled - cut;
    std::memmove(data, data + cut, carried);
  }
  writer_names = std::move(folder.writer_names_);
  return consumed;
}

// The offset just after the first '\n' at or after `from`, or -1.
std::int64_t next_line_start(int fd, std::int64_t from, std::int64_t size) {
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

bool merge_into(Fold& into, Fold& from, std::int64_t line_base) {
  into.lines += from.lines;
  into.folded += from.folded;
  into.attributed += from.attributed;
  into.unattributed += from.unattributed;
  into.ambiguous += from.ambiguous;
  into.torn += from.torn;
  into.bad += from.bad;
  into.deferred += from.deferred;
  for (Event event : from.events) {
    event.line += line_base;
    into.events.push_back(event);
  }
  for (auto& entry : from.requests.entries()) {
    Request& target = into.requests.at(entry.key);
    Request& source = entry.value;
    if (!add(target.lines, source.lines) || !add(target.steps, source.steps) ||
        !add(target.proposed, source.proposed) || !add(target.accepted, source.accepted) ||
        !add(target.emitted, source.emitted) ||
        !add(target.emitted_lines, source.emitted_lines)) {
      return false;
    }
    bool fresh = target.lines == source.lines;
    target.max_proposed = fresh ? source.max_proposed : std::max(target.max_proposed, source.max_proposed);
    target.max_n = fresh ? source.max_n : std::max(target.max_n, source.max_n);
    target.max_pid = fresh ? source.max_pid : std::max(target.max_pid, source.max_pid);
    if (!source.times.empty()) target.more_times.push_back(&source.times);
  }
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

struct RangeResult {
  Fold fold;
  std::int64_t consumed = 0;  // offset after the last newline read
  std::int64_t size = 0;      // the end of the range that was read
  std::vector<std::string> writer_names;  // for want_steps keys
  bool io_error = false;
  std::vector<Fold> others;  // the other threads' folds: their step times are exported
};

// Folds [begin, end) of `path` (end < 0: to the end of the file).
bool fold_file_range(const char* path, std::int64_t begin, std::int64_t end, const Legs& legs,
                     bool skip_bad, bool want_steps, std::size_t block,
                     std::int64_t bytes_per_thread, RangeResult& result) {
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

  unsigned cores = std::max(1u, std::min(std::thread::hardware_concurrency(), 8u));
  unsigned parts = want_steps ? 1u : static_cast<unsigned>(std::max<std::int64_t>(
      1, std::min<std::int64_t>(cores, (end - begin) / bytes_per_thread)));
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
    result.consumed = fold_range(fd, begin, end, legs, skip_bad, want_steps, block,
                                 result.fold, result.writer_names, result.io_error);
    return true;
  }
  // Every range but the last ends at a newline, so each is read whole unless it stops.
  std::vector<Fold>& folds = result.others;
  folds.resize(ranges - 1);
  std::vector<std::int64_t> consumed(ranges, 0);
  std::vector<char> failed(ranges, 0);
  std::vector<std::vector<std::string>> names(ranges);
  std::vector<char> io_errors(ranges, 0);
  auto run = [&](std::size_t i, Fold& fold) {
    bool io_error = false;
    try {
      consumed[i] = fold_range(fd, bounds[i], bounds[i + 1], legs, skip_bad, want_steps, block,
                               fold, names[i], io_error);
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
    if (!merge_into(result.fold, folds[i - 1], result.fold.lines)) {
      result.fold.overflow = true;
      break;
    }
    result.fold.stopped = folds[i - 1].stopped;
    result.fold.overflow = folds[i - 1].overflow;
    result.consumed = consumed[i];
    result.io_error = io_errors[i];
  }
  return true;
}

// -- the Python side -----------------------------------------------------------------------

bool read_int64s(PyObject* sequence, std::vector<std::int64_t>& out) {
  PyObject* fast = PySequence_Fast(sequence, "expected a sequence of integers");
  if (fast == nullptr) return false;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  out.resize(static_cast<std::size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    long long value = PyLong_AsLongLong(items[i]);
    if (value == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out[static_cast<std::size_t>(i)] = value;
  }
  Py_DECREF(fast);
  return true;
}

// Segment labels: a sequence of (segment, label as str, leg).
bool read_segment_labels(PyObject* sequence, Legs& legs) {
  PyObject* fast = PySequence_Fast(sequence, "expected a sequence of (segment, label, leg)");
  if (fast == nullptr) return false;
  legs.segment_labels.assign(legs.segment_leg.size(), {});
  Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < count; ++i) {
    long long segment, leg;
    const char* label;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "Ls#L", &segment, &label, &length,
                          &leg)) {
      Py_DECREF(fast);
      return false;
    }
    if (segment < 0 || static_cast<std::size_t>(segment) >= legs.segment_labels.size()) {
      Py_DECREF(fast);
      PyErr_SetString(PyExc_ValueError, "segment out of range");
      return false;
    }
    legs.segment_labels[static_cast<std::size_t>(segment)].emplace_back(
        std::string(label, static_cast<std::size_t>(length)), leg);
  }
  Py_DECREF(fast);
  return true;
}

PyObject* string_list(const std::vector<std::string>& items) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(items.size()));
  for (std::size_t i = 0; list != nullptr && i < items.size(); ++i) {
    PyObject* item = PyUnicode_DecodeUTF8(items[i].data(), static_cast<Py_ssize_t>(items[i].size()),
                                          "strict");
    if (item == nullptr) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

// A dict of new references, or nullptr (dropping them all) when any is nullptr.
PyObject* dict_of(std::vector<std::pair<const char*, PyObject*>> items) {
  bool ok = std::all_of(items.begin(), items.end(), [](const auto& item) { return item.second; });
  PyObject* dict = ok ? PyDict_New() : nullptr;
  for (auto& [name, value] : items) {
    if (dict != nullptr && PyDict_SetItemString(dict, name, value) != 0) Py_CLEAR(dict);
    Py_XDECREF(value);
  }
  return dict;
}

// Attributed requests first, in (leg, writer, seq) order (writer ids as 16 lowercase hex
// digits sort as their numbers), then the unattributed: the order the partial fold keeps, so
// the step times need no sort or filter (no copy) in Python.
void sort_requests(std::vector<Table<Request>::Entry>& entries) {
  std::sort(entries.begin(), entries.end(), [](const auto& x, const auto& y) {
    bool x_out = x.key.c < 0, y_out = y.key.c < 0;
    if (x_out != y_out) return y_out;
    if (x.key.c != y.key.c) return x.key.c < y.key.c;
    if (x.key.a != y.key.a) return x.key.a < y.key.a;
    return x.key.b < y.key.b;
  });
}

// Moves `from` to the end of `into` and frees it; every 64 MiB moved, the freed memory is
// handed back to the system, so the request's vectors and the flat column never all coexist.
void move_times(std::vector<std::int64_t>& from, std::vector<std::int64_t>& into,
                std::size_t& since_trim) {
  into.insert(into.end(), from.begin(), from.end());
  since_trim += from.size();
  std::vector<std::int64_t>().swap(from);
  if (since_trim >= (std::size_t{64} << 20) / sizeof(std::int64_t)) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    since_trim = 0;
  }
}

PyObject* build_result(RangeResult& result) {
  Fold& fold = result.fold;
  auto& requests = fold.requests.entries();
  sort_requests(requests);  // the table's index is not used again
  std::size_t count = requests.size();
  std::vector<std::int64_t> leg, writer, seq, lines, steps, proposed, accepted, emitted,
      emitted_lines, max_proposed, max_n, pid, offsets, times;
  for (auto* column : {&leg, &writer, &seq, &lines, &steps, &proposed, &accepted, &emitted,
                       &emitted_lines, &max_proposed, &max_n, &pid}) {
    column->reserve(count);
  }
  std::size_t total_times = 0, attributed = 0;
  for (const auto& entry : requests) {
    total_times += entry.value.times.size();
    for (const auto* more : entry.value.more_times) total_times += more->size();
    attributed += entry.key.c >= 0;
  }
  offsets.reserve(attributed + 1);
  offsets.push_back(0);
  times.reserve(total_times);
  std::size_t since_trim = 0;
  Table<std::int64_t> writer_index;
  std::vector<std::string> writer_ids;
  for (auto& entry : requests) {
    const Key& key = entry.key;
    Request& r = entry.value;
    std::int64_t& index = writer_index.at(Key{key.a, 0, 0});
    if (index == 0) {
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key.a));
      writer_ids.emplace_back(hex, 16);
      index = static_cast<std::int64_t>(writer_ids.size());
    }
    leg.push_back(key.c);
    writer.push_back(index - 1);
    seq.push_back(static_cast<std::int64_t>(key.b));
    lines.push_back(r.lines);
    steps.push_back(r.steps);
    proposed.push_back(r.proposed);
    accepted.push_back(r.accepted);
    emitted.push_back(r.emitted);
    emitted_lines.push_back(r.emitted_lines);
    max_proposed.push_back(r.max_proposed);
    max_n.push_back(r.max_n);
    pid.push_back(r.max_pid);
    if (key.c < 0) continue;
    move_times(r.times, times, since_trim);
    for (auto* more : r.more_times) move_times(*more, times, since_trim);
    offsets.push_back(static_cast<std::int64_t>(times.size()));
  }
  std::vector<std::int64_t> hist_leg, hist_accepted, hist_count;
  for (const auto& entry : fold.hist.entries()) {
    hist_leg.push_back(static_cast<std::int64_t>(entry.key.a));
    hist_accepted.push_back(static_cast<std::int64_t>(entry.key.b));
    hist_count.push_back(entry.value);
  }
  std::vector<std::int64_t> bin_leg, bin_index, bin_steps, bin_proposed, bin_accepted;
  for (const auto& entry : fold.bins.entries()) {
    bin_leg.push_back(static_cast<std::int64_t>(entry.key.a));
    bin_index.push_back(static_cast<std::int64_t>(entry.key.b));
    bin_steps.push_back(entry.value.steps);
    bin_proposed.push_back(entry.value.proposed);
    bin_accepted.push_back(entry.value.accepted);
  }
  PyObject* events = PyList_New(static_cast<Py_ssize_t>(fold.events.size()));
  for (std::size_t i = 0; events != nullptr && i < fold.events.size(); ++i) {
    const Event& event = fold.events[i];
    PyObject* item = Py_BuildValue("(LLLL)", static_cast<long long>(event.line),
                                   static_cast<long long>(event.offset),
                                   static_cast<long long>(event.length),
                                   static_cast<long long>(event.kind));
    if (item == nullptr) {
      Py_CLEAR(events);
      break;
    }
    PyList_SET_ITEM(events, static_cast<Py_ssize_t>(i), item);
  }
  PyObject* steps_result = Py_None;
  Py_INCREF(Py_None);
  if (!fold.step_t.empty() || !fold.step_labels.empty()) {
    Py_DECREF(Py_None);
    steps_result = dict_of({
        {"key", arrow_column(std::move(fold.step_key), false)},
        {"t_ns", arrow_column(std::move(fold.step_t), false)},
        {"proposed", arrow_column(std::move(fold.step_proposed), false)},
        {"accepted", arrow_column(std::move(fold.step_accepted), false)},
        {"labels", string_list(fold.step_labels)},
        {"writers", string_list(result.writer_names)},
    });
  }
  return dict_of({
      {"consumed", PyLong_FromLongLong(result.consumed)},
      {"size", PyLong_FromLongLong(result.size)},
      {"lines", PyLong_FromLongLong(fold.lines)},
      {"folded", PyLong_FromLongLong(fold.folded)},
      {"attributed", PyLong_FromLongLong(fold.attributed)},
      {"unattributed", PyLong_FromLongLong(fold.unattributed)},
      {"ambiguous", PyLong_FromLongLong(fold.ambiguous)},
      {"torn", PyLong_FromLongLong(fold.torn)},
      {"bad", PyLong_FromLongLong(fold.bad)},
      {"stopped", PyBool_FromLong(fold.stopped)},
      {"overflow", PyBool_FromLong(fold.overflow)},
      {"io_error", PyBool_FromLong(result.io_error)},
      {"events", events},
      {"writer_ids", string_list(writer_ids)},
      {"leg", arrow_column(std::move(leg), false)},
      {"w", arrow_column(std::move(writer), false)},
      {"seq", arrow_column(std::move(seq), true)},
      {"lines_per_request", arrow_column(std::move(lines), false)},
      {"steps", arrow_column(std::move(steps), false)},
      {"proposed", arrow_column(std::move(proposed), false)},
      {"accepted", arrow_column(std::move(accepted), false)},
      {"emitted", arrow_column(std::move(emitted), false)},
      {"emitted_lines", arrow_column(std::move(emitted_lines), false)},
      {"max_proposed", arrow_column(std::move(max_proposed), false)},
      {"max_n", arrow_column(std::move(max_n), false)},
      {"pid", arrow_column(std::move(pid), false)},
      {"attributed_requests", PyLong_FromSize_t(attributed)},
      {"t_ns", arrow_column(std::move(times), false, &offsets)},
      {"hist_leg", arrow_column(std::move(hist_leg), false)},
      {"hist_accepted", arrow_column(std::move(hist_accepted), false)},
      {"hist_count", arrow_column(std::move(hist_count), false)},
      {"bin_leg", arrow_column(std::move(bin_leg), false)},
      {"bin", arrow_column(std::move(bin_index), false)},
      {"bin_steps", arrow_column(std::move(bin_steps), false)},
      {"bin_proposed", arrow_column(std::move(bin_proposed), false)},
      {"bin_accepted", arrow_column(std::move(bin_accepted), false)},
      {"steps_by_line", steps_result},
  });
}

const char kDoc[] =
    "fold_range(path, begin, end, skip_bad, want_steps, points, segment_leg, segment_status,\n"
    "           segment_labels, leg_start, leg_span, bins_per_leg[, block[, bytes_per_thread]])\n"
    "    -> dict\n\n"
    "Read, attribute and fold the whole lines of path[begin:end] (end < 0: to the end).\n"
    "Segments as fold.attribute cuts the leg windows; leg_start/leg_span by leg index.\n"
    "Returns counts, the offset after the last newline read ('consumed'), the lines handed\n"
    "back as (line, offset, length, kind: 0 deferred, 1 bad, 2 refused), and the tables as\n"
    "Arrow PyCapsule pairs (legs -1 when unattributed; writers as indices into writer_ids).";

PyObject* fold_range_py(PyObject*, PyObject* args) {
  PyObject* path_bytes = nullptr;
  long long begin, end, bins_per_leg;
  int skip_bad, want_steps;
  PyObject *points, *segment_leg, *segment_status, *segment_labels, *leg_start, *leg_span;
  Py_ssize_t block = kDefaultBlock;
  Py_ssize_t bytes_per_thread = kDefaultBytesPerThread;
  if (!PyArg_ParseTuple(args, "O&LLppOOOOOOL|nn:fold_range", PyUnicode_FSConverter, &path_bytes,
                        &begin, &end, &skip_bad, &want_steps, &points, &segment_leg,
                        &segment_status, &segment_labels, &leg_start, &leg_span, &bins_per_leg,
                        &block, &bytes_per_thread)) {
    return nullptr;
  }
  std::unique_ptr<PyObject, void (*)(PyObject*)> path_owner(path_bytes,
                                                           [](PyObject* o) { Py_DECREF(o); });
  if (block < 1 || bytes_per_thread < 1 || bins_per_leg < 1 || begin < 0) {
    PyErr_SetString(PyExc_ValueError, "block, bytes_per_thread, bins_per_leg must be positive");
    return nullptr;
  }
  Legs legs;
  legs.bins_per_leg = bins_per_leg;
  if (!read_int64s(points, legs.points) || !read_int64s(segment_leg, legs.segment_leg) ||
      !read_int64s(segment_status, legs.segment_status) ||
      !read_int64s(leg_start, legs.leg_start) || !read_int64s(leg_span, legs.leg_span) ||
      !read_segment_labels(segment_labels, legs)) {
    return nullptr;
  }
  if (legs.segment_leg.size() != 2 * legs.points.size() + 1 ||
      legs.segment_status.size() != legs.segment_leg.size() ||
      legs.leg_start.size() != legs.leg_span.size()) {
    PyErr_SetString(PyExc_ValueError, "segments do not match the points");
    return nullptr;
  }
  for (std::size_t i = 0; i < legs.segment_leg.size(); ++i) {
    std::int64_t leg = legs.segment_leg[i];
    bool known = leg >= 0 && static_cast<std::size_t>(leg) < legs.leg_span.size();
    if (legs.segment_status[i] == kAttributed && !known) {
      PyErr_SetString(PyExc_ValueError, "an attributed segment without a known leg");
      return nullptr;
    }
    for (const auto& [label, owner] : legs.segment_labels[i]) {
      if (owner < 0 || static_cast<std::size_t>(owner) >= legs.leg_span.size()) {
        PyErr_SetString(PyExc_ValueError, "a label names an unknown leg");
        return nullptr;
      }
    }
  }
  for (std::int64_t span : legs.leg_span) {
    std::int64_t scaled;
    if (span < 1 || __builtin_mul_overflow(span, static_cast<std::int64_t>(bins_per_leg), &scaled)) {
      PyErr_SetString(PyExc_OverflowError, "a leg window too long to bin in 64 bits");
      return nullptr;
    }
  }

  auto result = std::make_unique<RangeResult>();
  bool opened = false;
  bool out_of_memory = false;
  bool no_thread = false;
  const char* path = PyBytes_AS_STRING(path_bytes);
  Py_BEGIN_ALLOW_THREADS;
  try {
    opened = fold_file_range(path, begin, end, legs, skip_bad, want_steps,
                             static_cast<std::size_t>(block), bytes_per_thread, *result);
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
  } catch (const std::system_error&) {
    no_thread = true;
  }
  Py_END_ALLOW_THREADS;
  if (out_of_memory) return PyErr_NoMemory();
  if (no_thread) {
    PyErr_SetString(PyExc_RuntimeError, "could not start a reading thread");
    return nullptr;
  }
  if (!opened) return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_bytes);
  return build_result(*result);
}

PyMethodDef kMethods[] = {
    {"fold_range", fold_range_py, METH_VARARGS, kDoc},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "fold._native",
    "Native read, attribution and fold of step logs (see fold.native).",
    -1,
    kMethods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&kModule); }
