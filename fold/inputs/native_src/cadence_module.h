// The cadence's Python side (fold.folding.native.cadence): the step times' list column taken through
// the Arrow C stream interface, the pass (cadence.h) run without the GIL, each request's
// figures handed back as columns (no object per request: a load test has 10^6), and the
// groups of legs asked for pooled. Part of fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_CADENCE_MODULE_H_
#define FOLD_NATIVE_CADENCE_MODULE_H_

#include <Python.h>
#ifdef __GLIBC__
#include <malloc.h>  // malloc_trim: hand freed memory back (glibc only; elsewhere a no-op)
#endif

#include <algorithm>
#include <cstdint>
#include <new>
#include <thread>
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

// The chunks of a list<int64> column handed over as an Arrow stream capsule, read in place.
inline bool import_int64_lists(PyObject* capsule, ImportedArrays& owner,
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
    "cadence(t_ns, legs, leg_start, leg_end, stall_factor, groups) -> (columns, pooled)\n\n"
    "Each request's cadence (fold.folding.cadence) from t_ns, a list of int64 column given as an Arrow\n"
    "stream capsule (one list of step times per request, any order), legs the request's leg,\n"
    "leg_start/leg_end the recorded windows by leg index. columns: Arrow capsule pairs in the\n"
    "requests' order (nanoseconds; medians and stall sums doubled; -1 for none). groups: lists of\n"
    "leg indices; pooled: per group, None without intervals, else (count, lower_middle,\n"
    "upper_middle, p90, p99, max) of its requests' intervals pooled, in nanoseconds.";

inline PyObject* cadence_py(PyObject*, PyObject* args) {
  PyObject *times, *legs_object, *starts_object, *ends_object, *groups_object;
  double factor;
  if (!PyArg_ParseTuple(args, "OOOOdO:cadence", &times, &legs_object, &starts_object,
                        &ends_object, &factor, &groups_object)) {
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
  CadencePass pass(std::move(starts), std::move(ends), factor);
  std::vector<RequestTimes> requests;
  requests.reserve(legs.size());
  for (const auto& chunk : chunks) {
    for (std::int64_t row = 0; row < chunk.rows; ++row) {
      std::int64_t from = chunk.begin(row), to = chunk.begin(row + 1);
      std::int64_t leg = legs[requests.size()];
      if (to > from && !pass.knows_leg(leg)) {
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
