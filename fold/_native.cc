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
#include "native_src/cadence.h"
#include "native_src/hash_table.h"
#include "native_src/fold_pass.h"
#include "native_src/json_line.h"
#include "native_src/resample.h"

namespace {

using namespace fold_native;  // NOLINT: the headers under native_src are this file's parts

constexpr std::size_t kPad = 64;  // readable slack after the parsed bytes
constexpr Py_ssize_t kDefaultBlock = Py_ssize_t{4} << 20;            // bytes read per pread(2)
constexpr Py_ssize_t kDefaultBytesPerThread = Py_ssize_t{64} << 20;  // less: one thread
// Folds the bytes [begin, end) of the file, whole lines only: begin is a line start. Returns
// the offset after the last newline read. Lines longer than a block grow the buffer.
std::int64_t fold_range(int fd, std::int64_t begin, std::int64_t end, const Legs& legs,
                        bool skip_bad, bool want_steps, std::size_t block, Fold& fold,
                        std::vector<std::string>& writer_names, bool& io_error) {
  std::vector<char> buffer(2 * block + kPad);
  Folder folder(legs, skip_bad, want_steps, fold);
  // Room for a time per line of the shortest valid lines (about 90 bytes), so the arrays do
  // not move as they grow (0.04 s of 0.49 at 10M lines); it is address space until written.
  // Capped, and only a wish: without the room the arrays grow as vectors do.
  constexpr std::int64_t kMostReserved = std::int64_t{1} << 26;
  auto most_lines = static_cast<std::size_t>(std::min((end - begin) / 80 + 1, kMostReserved));
  try {
    fold.line_request.reserve(most_lines);
    fold.line_t.reserve(most_lines);
  } catch (const std::bad_alloc&) {
  }
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
    folds[i - 1].merged = true;
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
// the step times need no sort or filter (no copy) in Python. Returns the places in `entries`
// in that order; the entries stay where they are (the lines' request places point at them).
std::vector<std::uint32_t> request_order(const std::vector<Table<Request>::Entry>& entries) {
  std::vector<std::uint32_t> order(entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](std::uint32_t i, std::uint32_t j) {
    const Key& x = entries[i].key;
    const Key& y = entries[j].key;
    bool x_out = x.c < 0, y_out = y.c < 0;
    if (x_out != y_out) return y_out;
    if (x.c != y.c) return x.c < y.c;
    if (x.a != y.a) return x.a < y.a;
    return x.b < y.b;
  });
  return order;
}

// Every merged range's attributed lines' times put in their request's list (`starts`: where
// each request's list begins, by its place in the first range's table), in file order within
// a request: a range's times follow those of the ranges before it. One thread per range,
// writing disjoint places; each range's line arrays are freed once placed.
void export_times(RangeResult& result, const std::vector<std::int64_t>& starts,
                  FilledInPlace& times) {
  std::vector<Fold*> ranges{&result.fold};
  for (Fold& other : result.others) {
    if (other.merged) ranges.push_back(&other);
  }
  auto place_range = [&](std::size_t index) {
    Fold& range = *ranges[index];
    bool first = index == 0;
    std::vector<std::int64_t> placed(range.requests.entries().size(), 0);
    for (std::size_t line = 0; line < range.line_t.size(); ++line) {
      std::uint32_t own = range.line_request[line];
      std::uint32_t place = first ? own : range.merged_place[own];
      std::int64_t before = first ? 0 : range.merged_before[own];
      times[static_cast<std::size_t>(starts[place] + before + placed[own]++)] = range.line_t[line];
    }
    std::vector<std::uint32_t>().swap(range.line_request);
    std::vector<std::int64_t>().swap(range.line_t);
  };
  std::vector<std::thread> threads;
  std::size_t index = 1;
  try {
    for (; index < ranges.size(); ++index) threads.emplace_back(place_range, index);
  } catch (const std::system_error&) {  // no thread to be had: the rest on this one
    for (; index < ranges.size(); ++index) place_range(index);
  }
  place_range(0);
  for (auto& thread : threads) thread.join();
#ifdef __GLIBC__
  malloc_trim(0);  // the line arrays' memory back to the system
#endif
}

PyObject* build_result(RangeResult& result) {
  Fold& fold = result.fold;
  auto& requests = fold.requests.entries();
  std::vector<std::uint32_t> order = request_order(requests);
  std::size_t count = requests.size();
  std::vector<std::int64_t> leg, writer, seq, lines, steps, proposed, accepted, emitted,
      emitted_lines, max_proposed, max_n, pid, offsets;
  for (auto* column : {&leg, &writer, &seq, &lines, &steps, &proposed, &accepted, &emitted,
                       &emitted_lines, &max_proposed, &max_n, &pid}) {
    column->reserve(count);
  }
  // An attributed request has a time per line; its list starts after the lists before it.
  std::vector<std::int64_t> starts(count, 0);
  std::size_t attributed = 0;
  offsets.push_back(0);
  for (std::uint32_t place : order) {
    const auto& entry = requests[place];
    if (entry.key.c < 0) break;
    starts[place] = offsets.back();
    offsets.push_back(offsets.back() + entry.value.lines);
    ++attributed;
  }
  FilledInPlace times(static_cast<std::size_t>(offsets.back()));
  Py_BEGIN_ALLOW_THREADS;
  export_times(result, starts, times);
  Py_END_ALLOW_THREADS;
  Table<std::int64_t> writer_index;
  std::vector<std::string> writer_ids;
  for (std::uint32_t place : order) {
    const Key& key = requests[place].key;
    const Request& r = requests[place].value;
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
      {"t_ns", arrow_column({}, false, &offsets, &times)},
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

// -- cadence ---------------------------------------------------------------------------------

// The arrays a stream gave, released when done with.
struct ImportedArrays {
  std::vector<ArrowArray> arrays;
  ~ImportedArrays() {
    for (auto& array : arrays) {
      if (array.release != nullptr) array.release(&array);
    }
  }
};

// The chunks of a list<int64> column handed over as an Arrow stream capsule, read in place.
bool import_int64_lists(PyObject* capsule, ImportedArrays& owner,
                        std::vector<Int64ListChunk>& chunks) {
  auto* stream =
      static_cast<ArrowArrayStream*>(PyCapsule_GetPointer(capsule, "arrow_array_stream"));
  if (stream == nullptr) return false;
  ArrowSchema schema{};
  if (stream->get_schema(stream, &schema) != 0) {
    PyErr_SetString(PyExc_ValueError, "the step times' stream gave no schema");
    return false;
  }
  std::string format = schema.format != nullptr ? schema.format : "";
  bool child_is_int64 = schema.n_children == 1 && schema.children[0]->format != nullptr &&
                        std::strcmp(schema.children[0]->format, "l") == 0;
  if (schema.release != nullptr) schema.release(&schema);
  if ((format != "+L" && format != "+l") || !child_is_int64) {
    PyErr_SetString(PyExc_TypeError, "step times must be a list of int64 column");
    return false;
  }
  while (true) {
    ArrowArray array{};
    if (stream->get_next(stream, &array) != 0) {
      PyErr_SetString(PyExc_ValueError, "the step times' stream failed");
      return false;
    }
    if (array.release == nullptr) break;
    owner.arrays.push_back(array);
    const ArrowArray& child = *array.children[0];
    if (array.null_count != 0 || child.null_count != 0) {
      PyErr_SetString(PyExc_ValueError, "step times must not hold nulls");
      return false;
    }
    Int64ListChunk chunk;
    chunk.rows = array.length;
    if (format == "+L") {
      chunk.large_offsets = static_cast<const std::int64_t*>(array.buffers[1]) + array.offset;
    } else {
      chunk.offsets = static_cast<const std::int32_t*>(array.buffers[1]) + array.offset;
    }
    chunk.values = static_cast<const std::int64_t*>(child.buffers[1]) + child.offset;
    chunks.push_back(chunk);
  }
  return true;
}

void cadence_capsule_destructor(PyObject* capsule) {
  delete static_cast<CadencePass*>(PyCapsule_GetPointer(capsule, "fold_native.cadence"));
}

// Each request's figures as fold.cadence shows them (seconds), one dict per request, None for
// a request without steps. The arithmetic is Python's on the same integers (int / 1e9 divides
// the int's exact double), so the polars path's dicts are equal bit for bit.
PyObject* request_dicts(const CadencePass& pass) {
  static const char* const kKeys[] = {
      "lines",          "intervals",      "first_step_s",   "decode_s",
      "tail_s",         "interval_median_s", "interval_p90_s", "interval_p99_s",
      "interval_max_s", "stalls",         "stall_s",        "decode_steps_per_s"};
  constexpr std::size_t kKeyCount = sizeof kKeys / sizeof kKeys[0];
  PyObject* keys[kKeyCount];
  for (std::size_t k = 0; k < kKeyCount; ++k) {
    keys[k] = PyUnicode_InternFromString(kKeys[k]);
    if (keys[k] == nullptr) {
      for (std::size_t j = 0; j < k; ++j) Py_DECREF(keys[j]);
      return nullptr;
    }
  }
  const auto& c = pass.columns;
  std::size_t rows = c[kLines].size();
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(rows));
  auto seconds = [](std::int64_t ns) { return PyFloat_FromDouble(static_cast<double>(ns) / 1e9); };
  auto optional_seconds = [&](std::int64_t ns) {
    if (ns < 0) Py_RETURN_NONE;
    return seconds(ns);
  };
  auto half_seconds = [](std::int64_t doubled) {
    if (doubled < 0) Py_RETURN_NONE;
    return PyFloat_FromDouble(static_cast<double>(doubled) / 2.0 / 1e9);
  };
  for (std::size_t i = 0; list != nullptr && i < rows; ++i) {
    PyObject* item;
    if (c[kLines][i] == 0) {
      item = Py_None;
      Py_INCREF(item);
    } else {
      bool judged = c[kJudged][i] != 0;
      std::int64_t decode = c[kDecodeNs][i];
      PyObject* values[kKeyCount] = {
          PyLong_FromLongLong(c[kLines][i]),
          PyLong_FromLongLong(c[kIntervals][i]),
          seconds(c[kFirstStepNs][i]),
          seconds(decode),
          seconds(c[kTailNs][i]),
          half_seconds(c[kMedian2Ns][i]),
          optional_seconds(c[kP90Ns][i]),
          optional_seconds(c[kP99Ns][i]),
          optional_seconds(c[kMaxNs][i]),
          judged ? PyLong_FromLongLong(c[kStalls][i]) : (Py_INCREF(Py_None), Py_None),
          judged ? half_seconds(c[kStall2Ns][i]) : (Py_INCREF(Py_None), Py_None),
          decode > 0 ? PyFloat_FromDouble(static_cast<double>(c[kIntervals][i]) /
                                          (static_cast<double>(decode) / 1e9))
                     : (Py_INCREF(Py_None), Py_None),
      };
      item = PyDict_New();
      for (std::size_t k = 0; k < kKeyCount; ++k) {
        if (item != nullptr && (values[k] == nullptr || PyDict_SetItem(item, keys[k], values[k]) != 0)) {
          Py_CLEAR(item);
        }
        Py_XDECREF(values[k]);
      }
    }
    if (item == nullptr) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  for (PyObject* key : keys) Py_DECREF(key);
  return list;
}

const char kCadenceDoc[] =
    "cadence(t_ns, legs, leg_start, leg_end, stall_factor) -> (columns, dicts, state)\n\n"
    "Each request's cadence (fold.cadence) from t_ns, a list of int64 column given as an Arrow\n"
    "stream capsule (one list of step times per request, any order), legs the request's leg,\n"
    "leg_start/leg_end the recorded windows by leg index. columns: Arrow capsule pairs in the\n"
    "requests' order (nanoseconds; medians and stall sums doubled; -1 for none); dicts: each\n"
    "request's figures in seconds (None without steps); state: for cadence_pooled.";

PyObject* cadence_py(PyObject*, PyObject* args) {
  PyObject *times, *legs_object, *starts_object, *ends_object;
  double factor;
  if (!PyArg_ParseTuple(args, "OOOOd:cadence", &times, &legs_object, &starts_object,
                        &ends_object, &factor)) {
    return nullptr;
  }
  std::vector<std::int64_t> legs, starts, ends;
  if (!read_int64s(legs_object, legs) || !read_int64s(starts_object, starts) ||
      !read_int64s(ends_object, ends)) {
    return nullptr;
  }
  if (starts.size() != ends.size()) {
    PyErr_SetString(PyExc_ValueError, "leg_start and leg_end differ in length");
    return nullptr;
  }
  ImportedArrays owner;
  std::vector<Int64ListChunk> chunks;
  if (!import_int64_lists(times, owner, chunks)) return nullptr;
  std::int64_t rows = 0;
  std::size_t total = 0;
  for (const auto& chunk : chunks) {
    rows += chunk.rows;
    total += static_cast<std::size_t>(chunk.begin(chunk.rows) - chunk.begin(0));
  }
  if (rows != static_cast<std::int64_t>(legs.size())) {
    PyErr_SetString(PyExc_ValueError, "one leg per request is needed");
    return nullptr;
  }
  auto pass = std::make_unique<CadencePass>(std::move(starts), std::move(ends), factor);
  std::vector<RequestTimes> requests;
  requests.reserve(legs.size());
  for (const auto& chunk : chunks) {
    for (std::int64_t row = 0; row < chunk.rows; ++row) {
      std::int64_t from = chunk.begin(row), to = chunk.begin(row + 1);
      std::int64_t leg = legs[requests.size()];
      if (to > from && !pass->knows_leg(leg)) {
        PyErr_SetString(PyExc_ValueError, "a request of a leg without a window");
        return nullptr;
      }
      requests.push_back({leg, chunk.values + from, static_cast<std::size_t>(to - from)});
    }
  }
  // One thread per million intervals, up to the cores.
  unsigned threads = static_cast<unsigned>(
      std::min<std::size_t>(std::max(1u, std::thread::hardware_concurrency()),
                            total / (std::size_t{1} << 20) + 1));
  bool out_of_memory = false;
  Py_BEGIN_ALLOW_THREADS;
  try {
    pass->run(requests, threads);
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
  }
  Py_END_ALLOW_THREADS;
  if (out_of_memory) return PyErr_NoMemory();
  static const char* const kNames[kCadenceColumns] = {
      "lines",     "intervals", "first_step_ns", "decode_ns", "tail_ns", "window_ns", "median2_ns",
      "p90_ns",    "p99_ns",    "max_ns",        "judged",    "stalls",  "stall2_ns"};
  PyObject* dicts = request_dicts(*pass);
  if (dicts == nullptr) return nullptr;
  std::vector<std::pair<const char*, PyObject*>> items;
  for (std::size_t i = 0; i < kCadenceColumns; ++i) {
    items.emplace_back(kNames[i], arrow_column(std::move(pass->columns[i]), false));
  }
  PyObject* columns = dict_of(std::move(items));
  if (columns == nullptr) {
    Py_DECREF(dicts);
    return nullptr;
  }
  PyObject* state = PyCapsule_New(pass.get(), "fold_native.cadence", cadence_capsule_destructor);
  if (state == nullptr) {
    Py_DECREF(columns);
    Py_DECREF(dicts);
    return nullptr;
  }
  pass.release();
  PyObject* triple = PyTuple_Pack(3, columns, dicts, state);
  Py_DECREF(columns);
  Py_DECREF(dicts);
  Py_DECREF(state);
  return triple;
}

const char kPooledDoc[] =
    "cadence_pooled(state, legs) -> None | (count, lower_middle, upper_middle, p90, p99, max)\n\n"
    "The intervals of every request of legs, pooled: the two middle values and the nearest\n"
    "ranks, in nanoseconds; None when the legs have no interval.";

PyObject* cadence_pooled_py(PyObject*, PyObject* args) {
  PyObject *state, *legs_object;
  if (!PyArg_ParseTuple(args, "OO:cadence_pooled", &state, &legs_object)) return nullptr;
  auto* pass = static_cast<CadencePass*>(PyCapsule_GetPointer(state, "fold_native.cadence"));
  if (pass == nullptr) return nullptr;
  std::vector<std::int64_t> legs;
  if (!read_int64s(legs_object, legs)) return nullptr;
  PooledIntervals found;
  bool out_of_memory = false;
  Py_BEGIN_ALLOW_THREADS;
  try {
    found = pass->pooled(std::move(legs));
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
  }
  Py_END_ALLOW_THREADS;
  if (out_of_memory) return PyErr_NoMemory();
  if (found.count == 0) Py_RETURN_NONE;
  return Py_BuildValue("(LLLLLL)", static_cast<long long>(found.count),
                       static_cast<long long>(found.lower_middle),
                       static_cast<long long>(found.upper_middle),
                       static_cast<long long>(found.p90), static_cast<long long>(found.p99),
                       static_cast<long long>(found.max));
}

// -- bootstrap -------------------------------------------------------------------------------

const char kResampleDoc[] =
    "resample_sums(values, key, first_row, out) -> None\n\n"
    "The bootstrap's stage-2 resamples of one leg: values a C-contiguous int64 buffer of shape\n"
    "(requests, columns), key the leg's stream, out an int64 buffer (rows, columns) filled with\n"
    "resamples first_row ... first_row + rows - 1, each row every column's sum over the\n"
    "requests drawn for it (fold.uncertainty.request_draws gives the same draws).";

// A read-only or writable view of a C-contiguous 2-D buffer of 8-byte integers.
bool int64_matrix(PyObject* object, Py_buffer& view, bool writable, const char* name) {
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(object, &view, flags) != 0) return false;
  // Integers only ('l' or 'q', signed or not): a float buffer must not be read as integers.
  const char* format = view.format == nullptr ? "B" : view.format;
  while (*format == '@' || *format == '=' || *format == '<') ++format;
  bool integers = format[0] != '\0' && format[1] == '\0' && std::strchr("lLqQ", format[0]);
  if (view.ndim != 2 || view.itemsize != 8 || !integers) {
    PyErr_Format(PyExc_ValueError, "resample_sums: %s must be 2-D with 8-byte integers", name);
    PyBuffer_Release(&view);
    return false;
  }
  return true;
}

PyObject* resample_sums_py(PyObject*, PyObject* args) {
  PyObject *values_object, *out_object;
  unsigned long long key, first_row;
  if (!PyArg_ParseTuple(args, "OKKO:resample_sums", &values_object, &key, &first_row,
                        &out_object)) {
    return nullptr;
  }
  Py_buffer values, out;
  if (!int64_matrix(values_object, values, false, "values")) return nullptr;
  if (!int64_matrix(out_object, out, true, "out")) {
    PyBuffer_Release(&values);
    return nullptr;
  }
  auto requests = static_cast<std::uint64_t>(values.shape[0]);
  auto columns = static_cast<std::size_t>(values.shape[1]);
  auto rows = static_cast<std::size_t>(out.shape[0]);
  bool shapes = static_cast<std::size_t>(out.shape[1]) == columns;
  bool ok = false;
  if (shapes) {
    Py_BEGIN_ALLOW_THREADS;
    ok = resample_sums(static_cast<const std::int64_t*>(values.buf), requests, columns, key,
                       first_row, rows, static_cast<std::uint64_t*>(out.buf));
    Py_END_ALLOW_THREADS;
  }
  PyBuffer_Release(&values);
  PyBuffer_Release(&out);
  if (!ok) {
    PyErr_SetString(PyExc_ValueError,
                    shapes ? "resample_sums: 1 to 8 columns and 1 to 2^32 - 1 requests"
                           : "resample_sums: values and out differ in columns");
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"fold_range", fold_range_py, METH_VARARGS, kDoc},
    {"cadence", cadence_py, METH_VARARGS, kCadenceDoc},
    {"cadence_pooled", cadence_pooled_py, METH_VARARGS, kPooledDoc},
    {"resample_sums", resample_sums_py, METH_VARARGS, kResampleDoc},
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
