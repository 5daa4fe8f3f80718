// The sums by output position (fold.folding.by_position.bucket_sums): per request, its lines
// put in (time, packed counts) order, each line's position the tokens emitted by the lines
// before it, and its drafted lines' S, P and A summed per bucket of position. One pass over
// the partial fold's step times, read in place; a request is sorted only when its lines are
// not in order already. Part of fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_POSITION_SUMS_H_
#define FOLD_NATIVE_POSITION_SUMS_H_

#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "arrow_export.h"
#include "cadence_module.h"
#include "fold_pass.h"
#include "python_values.h"
#include "step_lengths.h"

namespace fold_native {

constexpr int kFirstEdgeBits = 7;  // fold.folding.by_position.FIRST_EDGE = 2^7

struct PositionSums {
  std::vector<std::int64_t> request, bucket, steps, proposed, accepted;
};

// A position's bucket: 0 below 128, then one per doubling (the bit length less 7).
inline std::int64_t bucket_of(std::int64_t before) {
  int bits = before <= 0 ? 0 : 64 - __builtin_clzll(static_cast<unsigned long long>(before));
  return std::max(0, bits - kFirstEdgeBits);
}

// Over the chosen requests only (chosen[row] != 0): the partial fold's lists are read where
// they are, never filtered into a copy (a copy of every line of the warm legs).
inline void position_sums(const std::vector<std::pair<const std::int64_t*, std::int64_t>>& times,
                          const std::vector<std::pair<const std::int64_t*, std::int64_t>>& tokens,
                          const std::vector<std::int64_t>& chosen, PositionSums& sums) {
  const std::int64_t mask = (std::int64_t{1} << kTokenBits) - 1;
  std::vector<std::pair<std::int64_t, std::int64_t>> sorted;
  for (std::size_t row = 0; row < times.size(); ++row) {
    if (chosen[row] == 0) continue;
    const auto [t, count] = times[row];
    const std::int64_t* packed = tokens[row].first;
    bool ordered = true;
    for (std::int64_t i = 1; i < count && ordered; ++i) {
      ordered = t[i] > t[i - 1] || (t[i] == t[i - 1] && packed[i] >= packed[i - 1]);
    }
    if (!ordered) {
      sorted.resize(static_cast<std::size_t>(count));
      for (std::int64_t i = 0; i < count; ++i) sorted[static_cast<std::size_t>(i)] = {t[i], packed[i]};
      std::sort(sorted.begin(), sorted.end());
    }
    std::int64_t before = 0, open = -1;
    for (std::int64_t i = 0; i < count; ++i) {
      std::int64_t line = ordered ? packed[i] : sorted[static_cast<std::size_t>(i)].second;
      std::int64_t proposed = line & mask;
      std::int64_t accepted = (line >> kTokenBits) & mask;
      std::int64_t emitted_plus_one = line >> (2 * kTokenBits);
      if (proposed > 0) {
        std::int64_t bucket = bucket_of(before);
        if (bucket != open) {
          sums.request.push_back(static_cast<std::int64_t>(row));
          sums.bucket.push_back(bucket);
          sums.steps.push_back(0);
          sums.proposed.push_back(0);
          sums.accepted.push_back(0);
          open = bucket;
        }
        sums.steps.back() += 1;
        sums.proposed.back() += proposed;
        sums.accepted.back() += accepted;
      }
      before += emitted_plus_one > 0 ? emitted_plus_one - 1 : accepted + 1;
    }
  }
}

const char kPositionSumsDoc[] =
    "position_sums(t_ns, tokens, chosen) -> {request, bucket, steps, proposed, accepted}\n\n"
    "Per request (its row) whose chosen entry is not 0 and bucket of output position, the S,\n"
    "P and A of its drafted lines (fold.folding.by_position.bucket_sums): t_ns and the lines'\n"
    "packed counts (lists of int64) as Arrow stream capsules, a list per request, the two of\n"
    "one request the same length. Columns as Arrow capsule pairs, rows by request, then\n"
    "bucket.";

inline PyObject* position_sums_py(PyObject*, PyObject* args) {
  PyObject *times_capsule, *tokens_capsule, *chosen_object;
  if (!PyArg_ParseTuple(args, "OOO:position_sums", &times_capsule, &tokens_capsule,
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
  if (times.size() != tokens.size() || times.size() != chosen.size()) {
    PyErr_SetString(PyExc_ValueError, "one chosen entry and one list of each per request");
    return nullptr;
  }
  for (std::size_t row = 0; row < times.size(); ++row) {
    if (times[row].second != tokens[row].second) {
      PyErr_SetString(PyExc_ValueError, "a request's times and counts differ in length");
      return nullptr;
    }
  }
  PositionSums sums;
  Py_BEGIN_ALLOW_THREADS;
  position_sums(times, tokens, chosen, sums);
  Py_END_ALLOW_THREADS;
  return dict_of({
      {"request", arrow_column(std::move(sums.request), false)},
      {"bucket", arrow_column(std::move(sums.bucket), false)},
      {"steps", arrow_column(std::move(sums.steps), false)},
      {"proposed", arrow_column(std::move(sums.proposed), false)},
      {"accepted", arrow_column(std::move(sums.accepted), false)},
  });
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_POSITION_SUMS_H_
