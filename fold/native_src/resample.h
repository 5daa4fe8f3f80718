// The bootstrap's stage-2 sums (fold/uncertainty.py): for each drawn row of request indices,
// the sum of every per-request column over the drawn requests, in one pass over the draws.
// Part of fold/_native.cc, its only includer; no Python.

#ifndef FOLD_NATIVE_RESAMPLE_H_
#define FOLD_NATIVE_RESAMPLE_H_

#include <cstddef>
#include <cstdint>

namespace fold_native {

// values: `requests` rows of `columns` int64 sums, row-major; draws: `rows` rows of `requests`
// indices; out: `rows` rows of `columns`. numpy gathers and sums one column at a time, reading
// every draw once per column; here each draw is read once and its request's row (a few
// adjacent integers, in cache) added whole. Integer sums wrap as numpy's int64 sums do, so both
// give the same bits. False when a draw is not a request index.
inline bool resample_sums(const std::int64_t* values, std::size_t requests, std::size_t columns,
                          const std::int32_t* draws, std::size_t rows, std::uint64_t* out) {
  constexpr std::size_t kMaxColumns = 8;
  if (columns > kMaxColumns) return false;
  for (std::size_t row = 0; row < rows; ++row) {
    std::uint64_t sums[kMaxColumns] = {};
    const std::int32_t* drawn = draws + row * requests;
    for (std::size_t i = 0; i < requests; ++i) {
      auto request = static_cast<std::size_t>(static_cast<std::uint32_t>(drawn[i]));
      if (request >= requests) return false;
      const std::int64_t* sums_of = values + request * columns;
      for (std::size_t column = 0; column < columns; ++column) {
        sums[column] += static_cast<std::uint64_t>(sums_of[column]);
      }
    }
    for (std::size_t column = 0; column < columns; ++column) {
      out[row * columns + column] = sums[column];
    }
  }
  return true;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_RESAMPLE_H_
