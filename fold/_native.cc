// fold._native: reads, attributes and folds a byte range of a step log (instrument/FORMAT.md)
// in one pass, without building any per-line Python object; and, from the fold's step times
// and sums, the cadence and the bootstrap's redraws.
//
// Functions: fold_range (below, kDoc); cadence (native_src/cadence_module.h);
// resample_sums (native_src/resample_module.h, over resample.h's draws and sums). The other
// parts under native_src/: json_scan.h and json_line.h parse a line, fold_pass.h folds it into
// fold_tables.h's tables, read_range.h reads a range on threads, arrow_export.h hands tables to
// polars, python_values.h converts arguments, cadence.h computes the cadence, parallel.h runs
// work on threads, hash_table.h.
//
// fold_range: every line is parsed as JSON: keys in any order,
// whitespace between tokens, unknown keys with any value skipped (validated as orjson would),
// leg labels unescaped. A line ends one of four ways:
//   - folded: a valid v1 step, attributed to its leg (overlaps resolved by its label);
//   - bad: not a v1 step (invalid JSON or UTF-8, a missing field, a wrong type, a number out of
//     range, another version); counted, and its place handed back so that the exact reader
//     (fold.inputs.reader) words the reason. Without skip_bad the range stops there.
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
// buffers without a copy. A range of 16 MiB or more is split at newlines and parsed on one
// thread per 8 MiB, up to the cores (at most 8), with the GIL released.

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

#include "inputs/native_src/arrow_export.h"
#include "inputs/native_src/cadence.h"
#include "inputs/native_src/cadence_module.h"
#include "inputs/native_src/collect.h"
#include "inputs/native_src/fold_pass.h"
#include "inputs/native_src/hash_table.h"
#include "inputs/native_src/json_line.h"
#include "inputs/native_src/python_values.h"
#include "inputs/native_src/read_range.h"
#include "inputs/native_src/request_columns.h"
#include "inputs/native_src/step_export.h"
#include "inputs/native_src/resample.h"
#include "inputs/native_src/resample_module.h"

namespace {

using namespace fold_native;  // NOLINT: the headers under native_src are this file's parts

constexpr Py_ssize_t kDefaultBlock = Py_ssize_t{4} << 20;            // bytes read per pread(2)
constexpr Py_ssize_t kDefaultBytesPerThread = Py_ssize_t{8} << 20;  // less: one thread

// -- the Python side -----------------------------------------------------------------------

PyObject* build_result(RangeResult& result) {
  Fold& fold = result.fold;
  auto& requests = fold.requests.entries();
  std::vector<std::uint32_t> order = request_order(requests, fold.seq_ids);
  std::size_t count = requests.size();
  // An attributed request has an interval per line but its first; its list starts after the
  // lists before it.
  std::vector<std::uint32_t> rows;
  std::vector<std::int64_t> offsets{0};
  for (std::uint32_t place : order) {
    const auto& entry = requests[place];
    if (entry.key.c < 0) break;
    rows.push_back(place);
    offsets.push_back(offsets.back() + entry.value.lines - 1);
  }
  Table<std::int64_t> writer_index;
  std::vector<std::string> writer_ids;
  std::vector<std::int64_t> writer_of(count, 0);  // by place
  for (std::uint32_t place : order) {
    std::int64_t& index = writer_index.at(Key{requests[place].key.a, 0, 0});
    if (index == 0) {
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx",
                    static_cast<unsigned long long>(requests[place].key.a));
      writer_ids.emplace_back(hex, 16);
      index = static_cast<std::int64_t>(writer_ids.size());
    }
    writer_of[place] = index - 1;
  }
  TraceLines trace;
  if (result.per_line == PerLine::kTrace) trace = trace_lines(result, writer_of);
  // The lines go to their lists before the requests' columns are made: the line arrays are
  // freed as they are placed, so the columns (17 integers a request) are never held beside
  // them (a load test's 10^6 requests: 120 MiB off the read's peak).
  StepIntervals intervals;
  bool out_of_memory = false;
  Py_BEGIN_ALLOW_THREADS;
  try {
    export_times(result, rows, offsets, intervals);
  } catch (const std::bad_alloc&) {
    out_of_memory = true;  // with the thread state back, below
  }
  Py_END_ALLOW_THREADS;
  if (out_of_memory) return PyErr_NoMemory();
  PyObject* seeds_out = Py_NewRef(Py_None);
  if (result.keep_seeds) {
    SeedColumns state = seed_columns(fold, order, offsets.size() - 1);
    Py_DECREF(seeds_out);
    seeds_out = dict_of({
        {"last_t", arrow_column(std::move(state.last_t), false)},
        {"last_packed", arrow_column(std::move(state.last_packed), false)},
        {"emitted_before", arrow_column(std::move(state.emitted_before), false)},
        {"bucket", arrow_column(std::move(state.bucket), false)},
    });
  }
  bool timed = fold.timed_lines > 0;  // else no duration columns (old logs)
  // The table is empty from here on (`requests`, its entries, too); `count` is what it held.
  RequestExport made = request_columns(fold, order, offsets.size() - 1, writer_of, timed);
  std::vector<FilledInPlace>& columns = made.columns;
  OrderRows& order_figures = made.rows;
  auto column = [&columns](std::size_t index, bool is_unsigned = false) {
    return arrow_column(std::move(columns[index]), is_unsigned);
  };
  namespace c = request_column;
  PyObject* durations = !timed ? Py_NewRef(Py_None) : dict_of({
      {"timed_steps", column(c::kTimedSteps)},
      {"draft_steps", column(c::kDraftSteps)},
      {"verify_steps", column(c::kVerifySteps)},
      {"draft_ns", column(c::kDraftNs)},
      {"verify_ns", column(c::kVerifyNs)},
  });
  std::vector<std::int64_t> hist_leg, hist_proposed, hist_accepted, hist_count;
  for (const auto& entry : fold.hist.entries()) {
    hist_leg.push_back(static_cast<std::int64_t>(entry.key.a));
    hist_proposed.push_back(entry.key.c);
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
    PyObject* item = Py_BuildValue("(LLLLL)", static_cast<long long>(event.line),
                                   static_cast<long long>(event.offset),
                                   static_cast<long long>(event.length),
                                   static_cast<long long>(event.kind),
                                   static_cast<long long>(event.rule));
    if (item == nullptr) {
      Py_CLEAR(events);
      break;
    }
    PyList_SET_ITEM(events, static_cast<Py_ssize_t>(i), item);
  }
  bool has_steps = !fold.step_t.empty() || !fold.step_labels.empty();
  PyObject* steps_result = !has_steps ? Py_NewRef(Py_None) : dict_of({
      {"key", arrow_column(std::move(fold.step_key), false)},
      {"t_ns", arrow_column(std::move(fold.step_t), false)},
      {"proposed", arrow_column(std::move(fold.step_proposed), false)},
      {"accepted", arrow_column(std::move(fold.step_accepted), false)},
      {"labels", string_list(fold.step_labels)},
      {"writers", string_list(result.writer_names)},
  });
  PyObject* trace_result = result.per_line != PerLine::kTrace ? Py_NewRef(Py_None) : dict_of({
      {"leg", arrow_column(std::move(trace.leg), false)},
      {"w", arrow_column(std::move(trace.writer), false)},
      {"seq", arrow_column(std::move(trace.seq), true)},
      {"sid", arrow_column(std::move(trace.sid), false)},
      {"t_ns", arrow_column(std::move(trace.t_ns), false)},
      {"pid", arrow_column(std::move(trace.pid), false)},
      {"proposed", arrow_column(std::move(trace.proposed), false)},
      {"accepted", arrow_column(std::move(trace.accepted), false)},
      {"emitted", arrow_column(std::move(trace.emitted), false)},
  });
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
      {"leg", column(c::kLeg)},
      {"w", column(c::kWriter)},
      {"seq", column(c::kSeq, true)},
      {"sid", column(c::kSid)},
      {"seq_ids", string_list(fold.seq_ids)},
      {"lines_per_request", column(c::kLines)},
      {"steps", column(c::kSteps)},
      {"proposed", column(c::kProposed)},
      {"accepted", column(c::kAccepted)},
      {"emitted", column(c::kEmitted)},
      {"emitted_lines", column(c::kEmittedLines)},
      {"max_proposed", column(c::kMaxProposed)},
      {"max_n", column(c::kMaxN)},
      {"sum_n", column(c::kSumN, true)},
      {"pid", column(c::kPid)},
      {"first_t_ns", column(c::kFirstT)},
      {"first_n", column(c::kFirstN)},
      {"first_draft_ns", column(c::kFirstDraft)},
      {"first_verify_ns", column(c::kFirstVerify)},
      {"first_offset", column(c::kFirstOffset)},
      {"last_end", column(c::kLastEnd)},
      {"unordered", column(c::kUnordered)},
      {"seeded", column(c::kSeeded)},
      {"seeds", seeds_out},
      {"bucket_row", arrow_column(std::move(order_figures.bucket_row), false)},
      {"bucket", arrow_column(std::move(order_figures.bucket), false)},
      {"bucket_steps", arrow_column(std::move(order_figures.steps), false)},
      {"bucket_proposed", arrow_column(std::move(order_figures.proposed), false)},
      {"bucket_accepted", arrow_column(std::move(order_figures.accepted), false)},
      {"length_row", arrow_column(std::move(order_figures.length_row), false)},
      {"length", arrow_column(std::move(order_figures.length), false)},
      {"length_intervals", arrow_column(std::move(order_figures.intervals), false)},
      {"length_ns", arrow_column(std::move(order_figures.ns), false)},
      {"tally_row", arrow_column(std::move(order_figures.tally_row), false)},
      {"tally_proposed", arrow_column(std::move(order_figures.tally_proposed), false)},
      {"tally_accepted", arrow_column(std::move(order_figures.tally_accepted), false)},
      {"tally_count", arrow_column(std::move(order_figures.tally_count), false)},
      {"durations", durations},
      {"attributed_requests", PyLong_FromSize_t(rows.size())},
      {"first_ns", arrow_column(std::move(intervals.first), false)},
      {"gaps", uint32_lists(std::move(offsets), std::move(intervals.gaps))},
      {"long_gaps", arrow_column(std::move(intervals.long_values), false,
                                 &intervals.long_offsets)},
      {"hist_leg", arrow_column(std::move(hist_leg), false)},
      {"hist_proposed", arrow_column(std::move(hist_proposed), false)},
      {"hist_accepted", arrow_column(std::move(hist_accepted), false)},
      {"hist_count", arrow_column(std::move(hist_count), false)},
      {"bin_leg", arrow_column(std::move(bin_leg), false)},
      {"bin", arrow_column(std::move(bin_index), false)},
      {"bin_steps", arrow_column(std::move(bin_steps), false)},
      {"bin_proposed", arrow_column(std::move(bin_proposed), false)},
      {"bin_accepted", arrow_column(std::move(bin_accepted), false)},
      {"steps_by_line", steps_result},
      {"trace_lines", trace_result},
  });
}

const char kDoc[] =
    "fold_range(path, begin, end, skip_bad, per_line, points, segment_leg, segment_status,\n"
    "           segment_labels, leg_start, leg_span, bins_per_leg[, block[, bytes_per_thread]])\n"
    "    -> dict\n\n"
    "Read, attribute and fold the whole lines of path[begin:end] (end < 0: to the end).\n"
    "Segments as fold.folding.attribute cuts the leg windows; leg_start/leg_span by leg index.\n"
    "Returns counts, the offset after the last newline read ('consumed'), the lines handed\n"
    "back as (line, offset, length, kind: 0 deferred, 1 bad, 2 refused, rule: the\n"
    "fold.inputs.limits.StepRule a refused line breaks, else 0), and the tables as\n"
    "Arrow PyCapsule pairs (legs -1 when unattributed; writers as indices into writer_ids).\n"
    "per_line: 0 nothing per line; 1 each folded line's group key, time and counts\n"
    "('steps_by_line', one thread); 2 each attributed line's leg, writer, seq, time, pid and\n"
    "counts ('trace_lines', emitted -1 where a line has none).\n"
    "'first_ns', 'gaps', 'long_gaps': each attributed request's step intervals\n"
    "(fold.folding.step_intervals), in the order of the other columns.\n"
    "'durations': None when no line carried draft_ns or verify_ns, else per request (in the\n"
    "order of the other columns) timed_steps, draft_steps, verify_steps, draft_ns, verify_ns.\n"
    "tally_drafts (keyword): also 'tally_row', 'tally_proposed', 'tally_accepted',\n"
    "'tally_count', the attributed drafted lines counted by (row, proposed, accepted).";

PyObject* fold_range_py(PyObject*, PyObject* args, PyObject* keywords) {
  PyObject* path_bytes = nullptr;
  long long begin, end, bins_per_leg;
  int skip_bad, per_line;
  PyObject *points, *segment_leg, *segment_status, *segment_labels, *leg_start, *leg_span;
  Py_ssize_t block = kDefaultBlock;
  Py_ssize_t bytes_per_thread = kDefaultBytesPerThread;
  int threads = 0;
  PyObject* seed_columns_in = Py_None;
  int keep_seeds = 0;
  int tally_drafts = 0;
  static const char* kKeywords[] = {
      "path", "begin", "end", "skip_bad", "per_line", "points", "segment_leg", "segment_status",
      "segment_labels", "leg_start", "leg_span", "bins_per_leg", "block", "bytes_per_thread",
      "threads", "seeds", "keep_seeds", "tally_drafts", nullptr};
  if (!PyArg_ParseTupleAndKeywords(
          args, keywords, "O&LLpiOOOOOOL|nn$iOpp:fold_range", const_cast<char**>(kKeywords),
          PyUnicode_FSConverter, &path_bytes, &begin, &end, &skip_bad, &per_line, &points,
          &segment_leg, &segment_status, &segment_labels, &leg_start, &leg_span, &bins_per_leg,
          &block, &bytes_per_thread, &threads, &seed_columns_in, &keep_seeds, &tally_drafts)) {
    return nullptr;
  }
  std::unique_ptr<PyObject, void (*)(PyObject*)> path_owner(path_bytes,
                                                           [](PyObject* o) { Py_DECREF(o); });
  if (block < 1 || bytes_per_thread < 1 || bins_per_leg < 1 || begin < 0 || threads < 0) {
    PyErr_SetString(PyExc_ValueError, "block, bytes_per_thread, bins_per_leg must be positive");
    return nullptr;
  }
  Seeds seeds;
  if (seed_columns_in != Py_None && !read_seeds(seed_columns_in, seeds)) return nullptr;
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
    if (span < 1 ||
        __builtin_mul_overflow(span, static_cast<std::int64_t>(bins_per_leg), &scaled)) {
      PyErr_SetString(PyExc_OverflowError, "a leg window too long to bin in 64 bits");
      return nullptr;
    }
  }

  if (per_line < 0 || per_line > static_cast<int>(PerLine::kTrace)) {
    PyErr_SetString(PyExc_ValueError, "per_line must be 0 (none), 1 (groups) or 2 (trace)");
    return nullptr;
  }
  auto result = std::make_unique<RangeResult>();
  result->per_line = static_cast<PerLine>(per_line);
  result->keep_seeds = keep_seeds != 0;
  result->fold.tally_drafts = tally_drafts != 0;
  bool opened = false;
  bool out_of_memory = false;
  bool no_thread = false;
  const char* path = PyBytes_AS_STRING(path_bytes);
  Py_BEGIN_ALLOW_THREADS;
  try {
    opened = fold_file_range(path, begin, end, legs, skip_bad, result->per_line,
                             static_cast<std::size_t>(block), bytes_per_thread,
                             static_cast<unsigned>(threads), &seeds, *result);
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
  try {
    return build_result(*result);
  } catch (const std::bad_alloc&) {  // the columns' vectors, made with the GIL held
    return PyErr_NoMemory();
  }
}

const char kReleaseDoc[] =
    "release_memory() -> None\n\n"
    "Hands the memory the extension's freed buffers held back to the system (glibc's\n"
    "malloc_trim; nothing elsewhere). Columns the extension made are freed by whoever holds\n"
    "them last, and glibc keeps such memory for its own next allocations, which a fold's\n"
    "later stages, allocating through polars, never make.";

PyObject* release_memory_py(PyObject*, PyObject*) {
#ifdef __GLIBC__
  Py_BEGIN_ALLOW_THREADS;
  malloc_trim(0);
  Py_END_ALLOW_THREADS;
#endif
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"release_memory", release_memory_py, METH_NOARGS, kReleaseDoc},
    {"fold_range", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fold_range_py)),
     METH_VARARGS | METH_KEYWORDS, kDoc},
    {"cadence", cadence_py, METH_VARARGS, kCadenceDoc},
    {"collect_lines", collect_lines_py, METH_VARARGS, kCollectDoc},
    {"resample_sums", resample_sums_py, METH_VARARGS, kResampleDoc},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "fold._native",
    "Native read, attribution and fold of step logs (see fold.folding.native).",
    -1,
    kMethods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace

// What fold.folding.native expects of these functions (their arguments, their limits): it uses
// an extension of another number as none at all. Raised with any change a stale build would
// get wrong (2: resample_sums takes 16 columns).
constexpr long kInterface = 2;

PyMODINIT_FUNC PyInit__native(void) {
  PyObject* module = PyModule_Create(&kModule);
  if (module != nullptr && PyModule_AddIntConstant(module, "INTERFACE", kInterface) != 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
