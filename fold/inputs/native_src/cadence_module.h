// The cadence's Python side (fold.folding.native.cadence): the step times' list column taken through
// the Arrow C stream interface, the pass (cadence.h) run without the GIL, each request's
// figures handed back as columns and as dicts, and groups of legs pooled on request. Part of
// fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_CADENCE_MODULE_H_
#define FOLD_NATIVE_CADENCE_MODULE_H_

#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <memory>
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

inline void cadence_capsule_destructor(PyObject* capsule) {
  delete static_cast<CadencePass*>(PyCapsule_GetPointer(capsule, "fold_native.cadence"));
}

// Each request's figures as fold.folding.cadence shows them (seconds), one dict per request, None for
// a request without steps. The arithmetic is Python's on the same integers (int / 1e9 divides
// the int's exact double), so the polars path's dicts are equal bit for bit.
inline PyObject* request_dicts(const CadencePass& pass) {
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
        if (item != nullptr &&
            (values[k] == nullptr || PyDict_SetItem(item, keys[k], values[k]) != 0)) {
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
    "Each request's cadence (fold.folding.cadence) from t_ns, a list of int64 column given as an Arrow\n"
    "stream capsule (one list of step times per request, any order), legs the request's leg,\n"
    "leg_start/leg_end the recorded windows by leg index. columns: Arrow capsule pairs in the\n"
    "requests' order (nanoseconds; medians and stall sums doubled; -1 for none); dicts: each\n"
    "request's figures in seconds (None without steps); state: for cadence_pooled.";

inline PyObject* cadence_py(PyObject*, PyObject* args) {
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

inline PyObject* cadence_pooled_py(PyObject*, PyObject* args) {
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

}  // namespace fold_native

#endif  // FOLD_NATIVE_CADENCE_MODULE_H_
