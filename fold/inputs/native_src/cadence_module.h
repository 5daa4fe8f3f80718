// The cadence's Python side (fold.folding.native.cadence): the step intervals' list columns
// taken through the Arrow C stream interface, the pass (cadence.h) run without the GIL, each
// request's figures handed back as columns (no object per request: a load test has 10^6), and
// the groups of legs asked for pooled. Part of fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_CADENCE_MODULE_H_
#define FOLD_NATIVE_CADENCE_MODULE_H_

#include <Python.h>
#ifdef __GLIBC__
#include <malloc.h>  // malloc_trim: hand freed memory back (glibc only; elsewhere a no-op)
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "arrow_export.h"
#include "cadence.h"
#include "python_values.h"

namespace fold_native {


// The arrays a stream gave, released when done with.
struct ImportedArrays {
  std::vector<ArrowArray> arrays;
  ~ImportedArrays() {
    for (auto& array : arrays) {
      if (array.release != nullptr) array.release(&array);
    }
  }
};

// The chunks of a list column whose values have the Arrow format `child_format` ("l":
// int64, "I": uint32), handed over as an Arrow stream capsule, read in place. `what` names
// the column in errors.
template <class T>
bool import_lists(PyObject* capsule, const char* child_format, const char* what,
                  ImportedArrays& owner, std::vector<ListChunk<T>>& chunks) {
  auto* stream =
      static_cast<ArrowArrayStream*>(PyCapsule_GetPointer(capsule, "arrow_array_stream"));
  if (stream == nullptr) return false;
  ArrowSchema schema{};
  if (stream->get_schema(stream, &schema) != 0) {
    PyErr_Format(PyExc_ValueError, "the %s' stream gave no schema", what);
    return false;
  }
  std::string format = schema.format != nullptr ? schema.format : "";
  bool child_fits = schema.n_children == 1 && schema.children[0]->format != nullptr &&
                    std::strcmp(schema.children[0]->format, child_format) == 0;
  if (schema.release != nullptr) schema.release(&schema);
  if ((format != "+L" && format != "+l") || !child_fits) {
    PyErr_Format(PyExc_TypeError, "the %s must be a list column of Arrow format %s", what,
                 child_format);
    return false;
  }
  while (true) {
    ArrowArray array{};
    if (stream->get_next(stream, &array) != 0) {
      PyErr_Format(PyExc_ValueError, "the %s' stream failed", what);
      return false;
    }
    if (array.release == nullptr) break;
    owner.arrays.push_back(array);
    const ArrowArray& child = *array.children[0];
    if (array.null_count != 0 || child.null_count != 0) {
      PyErr_Format(PyExc_ValueError, "the %s must not hold nulls", what);
      return false;
    }
    ListChunk<T> chunk;
    chunk.rows = array.length;
    if (format == "+L") {
      chunk.large_offsets = static_cast<const std::int64_t*>(array.buffers[1]) + array.offset;
    } else {
      chunk.offsets = static_cast<const std::int32_t*>(array.buffers[1]) + array.offset;
    }
    chunk.values = static_cast<const T*>(child.buffers[1]) + child.offset;
    chunks.push_back(chunk);
  }
  return true;
}

// Each row's list, in row order, as (values, count).
template <class T>
std::vector<std::pair<const T*, std::size_t>> rows_of(const std::vector<ListChunk<T>>& chunks) {
  std::vector<std::pair<const T*, std::size_t>> rows;
  for (const auto& chunk : chunks) {
    for (std::int64_t row = 0; row < chunk.rows; ++row) {
      std::int64_t from = chunk.begin(row), to = chunk.begin(row + 1);
      rows.emplace_back(chunk.values + from, static_cast<std::size_t>(to - from));
    }
  }
  return rows;
}

// A group's pooled intervals as Python gives them back: None without any.
inline PyObject* pooled_value(const PooledIntervals& found) {
  if (found.count == 0) Py_RETURN_NONE;
  return Py_BuildValue("(LLLLLL)", static_cast<long long>(found.count),
                       static_cast<long long>(found.lower_middle),
                       static_cast<long long>(found.upper_middle),
                       static_cast<long long>(found.p90), static_cast<long long>(found.p99),
                       static_cast<long long>(found.max));
}

const char kCadenceDoc[] =
    "cadence(first_ns, gaps, long_gaps, legs, leg_start, leg_end, stall_factor, groups)\n"
    "    -> (columns, pooled)\n\n"
    "Each request's cadence (fold.folding.cadence) from its step intervals\n"
    "(fold.folding.step_intervals): first_ns its first time (-1: no line), gaps a list of uint32\n"
    "and long_gaps a list of int64 column, each given as an Arrow stream capsule; legs the\n"
    "request's leg, leg_start/leg_end the recorded windows by leg index. columns: Arrow capsule\n"
    "pairs in the requests' order (nanoseconds; medians and stall sums doubled; -1 for none).\n"
    "groups: lists of leg indices; pooled: per group, None without intervals, else (count,\n"
    "lower_middle, upper_middle, p90, p99, max) of its requests' intervals pooled, in\n"
    "nanoseconds.";

// Whether a request's intervals are as fold.folding.step_intervals writes them: a long one
// for each kLongInterval, each at least kLongInterval, and the last time below 2^63.
inline bool well_formed(const RequestTimes& request) {
  if (request.first < 0) return request.intervals == 0 && request.long_count == 0;
  std::size_t marked = 0;
  std::int64_t last = request.first;
  for (std::size_t i = 0; i < request.intervals; ++i) {
    std::uint32_t gap = request.gaps[i];
    std::int64_t interval = gap;
    if (gap == kLongInterval) {
      if (marked == request.long_count) return false;
      interval = request.longs[marked++];
      if (interval < std::int64_t{kLongInterval}) return false;
    }
    if (__builtin_add_overflow(last, interval, &last)) return false;
  }
  return marked == request.long_count;
}

inline PyObject* cadence_py(PyObject*, PyObject* args) {
  PyObject *first_object, *gaps_object, *longs_object, *legs_object, *starts_object,
      *ends_object, *groups_object;
  double factor;
  if (!PyArg_ParseTuple(args, "OOOOOOdO:cadence", &first_object, &gaps_object, &longs_object,
                        &legs_object, &starts_object, &ends_object, &factor, &groups_object)) {
    return nullptr;
  }
  std::vector<std::int64_t> firsts, legs, starts, ends;
  if (!read_int64s(first_object, firsts) || !read_int64s(legs_object, legs) ||
      !read_int64s(starts_object, starts) || !read_int64s(ends_object, ends)) {
    return nullptr;
  }
  if (starts.size() != ends.size()) {
    PyErr_SetString(PyExc_ValueError, "leg_start and leg_end differ in length");
    return nullptr;
  }
  std::vector<std::vector<std::int64_t>> groups;
  PyObject* group_list = PySequence_Fast(groups_object, "groups must be a sequence");
  if (group_list == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(group_list); ++i) {
    groups.emplace_back();
    if (!read_int64s(PySequence_Fast_GET_ITEM(group_list, i), groups.back())) {
      Py_DECREF(group_list);
      return nullptr;
    }
  }
  Py_DECREF(group_list);
  ImportedArrays owner;
  std::vector<ListChunk<std::uint32_t>> gap_chunks;
  std::vector<ListChunk<std::int64_t>> long_chunks;
  if (!import_lists(gaps_object, "I", "step intervals", owner, gap_chunks) ||
      !import_lists(longs_object, "l", "long step intervals", owner, long_chunks)) {
    return nullptr;
  }
  auto gap_rows = rows_of(gap_chunks);
  auto long_rows = rows_of(long_chunks);
  if (gap_rows.size() != legs.size() || long_rows.size() != legs.size() ||
      firsts.size() != legs.size()) {
    PyErr_SetString(PyExc_ValueError, "one first time, list of intervals and leg per request");
    return nullptr;
  }
  CadencePass pass(std::move(starts), std::move(ends), factor);
  std::vector<RequestTimes> requests;
  requests.reserve(legs.size());
  std::size_t total = 0;
  for (std::size_t row = 0; row < legs.size(); ++row) {
    RequestTimes request{legs[row],           firsts[row],           gap_rows[row].first,
                         gap_rows[row].second, long_rows[row].first, long_rows[row].second};
    if (!well_formed(request)) {
      PyErr_SetString(PyExc_ValueError, "a request's step intervals are not well formed");
      return nullptr;
    }
    if (request.lines() > 0 && !pass.knows_leg(request.leg)) {
      PyErr_SetString(PyExc_ValueError, "a request of a leg without a window");
      return nullptr;
    }
    total += request.lines();
    requests.push_back(request);
  }
  // The requests hold all of it now: a load test's 10^6 rows of these are some 40 MB that
  // would otherwise stay beside the figures' columns through the pass, its peak.
  for (auto* done : {&firsts, &legs}) std::vector<std::int64_t>().swap(*done);
  decltype(gap_rows)().swap(gap_rows);
  decltype(long_rows)().swap(long_rows);
  unsigned threads = threads_for(total);
  bool out_of_memory = false;
  std::vector<PooledIntervals> pooled;
  Py_BEGIN_ALLOW_THREADS;
  try {
    pass.run(requests, threads);
    PooledSearch search(requests, pass.columns[kIntervals], pass.columns[kMaxNs], groups,
                        threads);
    search.run();
    pooled = std::move(search.found);
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
  }
#ifdef __GLIBC__
  malloc_trim(0);  // the threads' counts and scratch back to the system
#endif
  Py_END_ALLOW_THREADS;
  if (out_of_memory) return PyErr_NoMemory();
  PyObject* pooled_list = PyList_New(static_cast<Py_ssize_t>(pooled.size()));
  if (pooled_list == nullptr) return nullptr;
  for (std::size_t i = 0; i < pooled.size(); ++i) {
    PyObject* value = pooled_value(pooled[i]);
    if (value == nullptr) {
      Py_DECREF(pooled_list);
      return nullptr;
    }
    PyList_SET_ITEM(pooled_list, static_cast<Py_ssize_t>(i), value);
  }
  static const char* const kNames[kCadenceColumns] = {
      "lines",     "intervals", "first_step_ns", "decode_ns", "tail_ns", "window_ns", "median2_ns",
      "p90_ns",    "p99_ns",    "max_ns",        "judged",    "stalls",  "stall2_ns"};
  std::vector<std::pair<const char*, PyObject*>> items;
  for (std::size_t i = 0; i < kCadenceColumns; ++i) {
    items.emplace_back(kNames[i], arrow_column(std::move(pass.columns[i]), false));
  }
  PyObject* columns = dict_of(std::move(items));
  if (columns == nullptr) {
    Py_DECREF(pooled_list);
    return nullptr;
  }
  PyObject* pair = PyTuple_Pack(2, columns, pooled_list);
  Py_DECREF(columns);
  Py_DECREF(pooled_list);
  return pair;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_CADENCE_MODULE_H_
