// The step time per draft length (fold.folding.step_lengths): per request, its (time, proposed)
// pairs in order, and each interval to a drafted line summed under that line's proposed. One
// pass over the partial fold's step times, read in place; a request is sorted only when its
// lines are not in (time, proposed) order already. Part of fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_STEP_LENGTHS_H_
#define FOLD_NATIVE_STEP_LENGTHS_H_

#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "arrow_export.h"
#include "cadence_module.h"
#include "fold_pass.h"
#include "python_values.h"

namespace fold_native {

// 2^64 intervals of up to 2^63 ns each cannot overflow it.
__extension__ typedef unsigned __int128 Total;

struct LengthSums {
  std::int64_t intervals = 0;
  Total total = 0;
};

// (begin of its values, count) of every row of a list<int64> column's chunks.
inline std::vector<std::pair<const std::int64_t*, std::int64_t>> list_rows(
    const std::vector<Int64ListChunk>& chunks) {
  std::vector<std::pair<const std::int64_t*, std::int64_t>> rows;
  for (const auto& chunk : chunks) {
    for (std::int64_t row = 0; row < chunk.rows; ++row) {
      rows.emplace_back(chunk.values + chunk.begin(row), chunk.begin(row + 1) - chunk.begin(row));
    }
  }
  return rows;
}

// Sums by proposed (index) over the chosen requests; false on a proposed out of range.
inline bool step_length_sums(
    const std::vector<std::pair<const std::int64_t*, std::int64_t>>& times,
    const std::vector<std::pair<const std::int64_t*, std::int64_t>>& tokens,
    const std::vector<std::int64_t>& chosen, std::vector<LengthSums>& sums) {
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  sums.assign(static_cast<std::size_t>(kMaxStepTokens) + 1, LengthSums{});
  for (std::size_t row = 0; row < times.size(); ++row) {
    if (chosen[row] == 0) continue;
    const auto [t, count] = times[row];
    const std::int64_t* packed = tokens[row].first;
    pairs.resize(static_cast<std::size_t>(count));
    bool ordered = true;
    for (std::int64_t i = 0; i < count; ++i) {
      // The low bits of a line's packed counts are its proposed (fold_pass.h, kTokenBits).
      if (packed[i] < 0) return false;
      std::int64_t proposed = packed[i] & ((std::int64_t{1} << kTokenBits) - 1);
      if (proposed > kMaxStepTokens) return false;
      pairs[static_cast<std::size_t>(i)] = {t[i], proposed};
      if (i > 0 && pairs[static_cast<std::size_t>(i)] < pairs[static_cast<std::size_t>(i - 1)]) {
        ordered = false;
      }
    }
    if (!ordered) std::sort(pairs.begin(), pairs.end());
    for (std::size_t i = 1; i < pairs.size(); ++i) {
      if (pairs[i].second == 0) continue;
      LengthSums& found = sums[static_cast<std::size_t>(pairs[i].second)];
      found.intervals += 1;
      // Times are 0 .. 2^63 - 1, so the difference of an ordered pair fits.
      found.total += static_cast<Total>(pairs[i].first - pairs[i - 1].first);
    }
  }
  return true;
}

inline PyObject* int128_to_python(Total value) {
  PyObject* high = PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(value >> 64));
  PyObject* shift = PyLong_FromLong(64);
  PyObject* low = PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(value));
  PyObject* shifted = high && shift ? PyNumber_Lshift(high, shift) : nullptr;
  PyObject* result = shifted && low ? PyNumber_Or(shifted, low) : nullptr;
  Py_XDECREF(high);
  Py_XDECREF(shift);
  Py_XDECREF(low);
  Py_XDECREF(shifted);
  return result;
}

const char kStepLengthsDoc[] =
    "step_lengths(t_ns, tokens, chosen) -> {proposed: (intervals, total_ns)}\n\n"
    "The step time per draft length (fold.folding.step_lengths) of the requests whose chosen\n"
    "entry is not 0: t_ns and the lines' packed counts (lists of int64) as Arrow stream\n"
    "capsules, a list per request, the two of one request the same length.";

inline PyObject* step_lengths_py(PyObject*, PyObject* args) {
  PyObject *times_capsule, *tokens_capsule, *chosen_object;
  if (!PyArg_ParseTuple(args, "OOO:step_lengths", &times_capsule, &tokens_capsule,
                        &chosen_object)) {
    return nullptr;
  }
  std::vector<std::int64_t> chosen;
  if (!read_int64s(chosen_object, chosen)) return nullptr;
  ImportedArrays times_owner, tokens_owner;
  std::vector<Int64ListChunk> times_chunks, tokens_chunks;
  if (!import_int64_lists(times_capsule, times_owner, times_chunks) ||
      !import_int64_lists(tokens_capsule, tokens_owner, tokens_chunks)) {
    return nullptr;
  }
  auto times = list_rows(times_chunks);
  auto tokens = list_rows(tokens_chunks);
  if (times.size() != chosen.size() || tokens.size() != chosen.size()) {
    PyErr_SetString(PyExc_ValueError, "one chosen entry and one of each list per request");
    return nullptr;
  }
  for (std::size_t row = 0; row < times.size(); ++row) {
    if (times[row].second != tokens[row].second) {
      PyErr_SetString(PyExc_ValueError, "a request's times and counts differ in length");
      return nullptr;
    }
  }
  std::vector<LengthSums> sums;
  bool in_range;
  Py_BEGIN_ALLOW_THREADS;
  in_range = step_length_sums(times, tokens, chosen, sums);
  Py_END_ALLOW_THREADS;
  if (!in_range) {
    PyErr_SetString(PyExc_ValueError, "a line's counts outside what the fold packs");
    return nullptr;
  }
  PyObject* result = PyDict_New();
  for (std::size_t p = 1; result != nullptr && p < sums.size(); ++p) {
    if (sums[p].intervals == 0) continue;
    PyObject* key = PyLong_FromSize_t(p);
    PyObject* count = PyLong_FromLongLong(sums[p].intervals);
    PyObject* total = int128_to_python(sums[p].total);
    PyObject* value = count && total ? PyTuple_Pack(2, count, total) : nullptr;
    if (key == nullptr || value == nullptr || PyDict_SetItem(result, key, value) != 0) {
      Py_CLEAR(result);
    }
    Py_XDECREF(key);
    Py_XDECREF(count);
    Py_XDECREF(total);
    Py_XDECREF(value);
  }
  return result;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_STEP_LENGTHS_H_
