// The bootstrap's stage-2 draws and sums (fold/folding/uncertainty.py): for each resample of one leg,
// its requests drawn with replacement and every per-request column summed over them, in one
// pass with no array of draws. Part of fold/_native.cc, its only includer; no Python.

#ifndef FOLD_NATIVE_RESAMPLE_H_
#define FOLD_NATIVE_RESAMPLE_H_

#include <cstddef>
#include <cstdint>
#include <utility>

namespace fold_native {

// Draw `i` (0-based, row after row) of a leg's stream `key`, among `requests` (< 2^32):
// SplitMix64's output after i + 1 steps from the key, scaled to [0, requests) by its high
// 64 bits of the product. fold.folding.uncertainty.request_draws computes the very same numbers with
// numpy (the 64-bit product's high half from 32-bit halves); the tests hold both equal.
inline std::uint32_t request_draw(std::uint64_t key, std::uint64_t i, std::uint64_t requests) {
  std::uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
#ifdef __SIZEOF_INT128__
  // One multiply: the exact high half, which the halves' formula below equals.
  __extension__ typedef unsigned __int128 Wide;
  return static_cast<std::uint32_t>((static_cast<Wide>(z) * requests) >> 64);
#else
  std::uint64_t high = (z >> 32) * requests + (((z & 0xFFFFFFFFULL) * requests) >> 32);
  return static_cast<std::uint32_t>(high >> 32);
#endif
}

// values: `requests` rows of kColumns int64 sums, row-major; out: `rows` rows of kColumns,
// resamples first_row ... first_row + rows - 1. Integer sums wrap as numpy's int64 sums do, so
// the two paths give the same bits.
template <std::size_t kColumns>
void draw_and_sum(const std::int64_t* values, std::uint64_t requests, std::uint64_t key,
                  std::uint64_t first_row, std::size_t rows, std::uint64_t* out) {
  for (std::size_t row = 0; row < rows; ++row) {
    std::uint64_t sums[kColumns] = {};
    std::uint64_t first = (first_row + row) * requests;
    for (std::uint64_t i = first; i < first + requests; ++i) {
      const std::int64_t* drawn = values + request_draw(key, i, requests) * kColumns;
      // Unrolled, the sums stay in registers: at -O2 GCC kept them on the stack, and each
      // draw's adds waited on the last draw's stores (1.8x slower at 5 columns; at 11 columns
      // an unroll of 8 left them there too, 3x slower).
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)  // older GCC lacks it
#pragma GCC unroll 16
#endif
      for (std::size_t column = 0; column < kColumns; ++column) {
        sums[column] += static_cast<std::uint64_t>(drawn[column]);
      }
    }
    for (std::size_t column = 0; column < kColumns; ++column) {
      out[row * kColumns + column] = sums[column];
    }
  }
}

// The most columns one pass sums: the figures by output position and the per-request means
// are drawn with the pooled figures' columns (5 + 3 a bucket + 3), and every pass more draws
// the same requests again.
constexpr std::size_t kMaxResampleColumns = 16;

namespace detail {

template <std::size_t... kCounts>
bool draw_and_sum_any(std::index_sequence<kCounts...>, std::size_t columns,
                      const std::int64_t* values, std::uint64_t requests, std::uint64_t key,
                      std::uint64_t first_row, std::size_t rows, std::uint64_t* out) {
  // One instantiation a column count, chosen at run time: the unrolled adds need it fixed.
  return ((columns == kCounts + 1 &&
           (draw_and_sum<kCounts + 1>(values, requests, key, first_row, rows, out), true)) ||
          ...);
}

}  // namespace detail

// False for a column count outside 1..kMaxResampleColumns or a leg of 2^32 requests or more.
inline bool resample_sums(const std::int64_t* values, std::uint64_t requests, std::size_t columns,
                          std::uint64_t key, std::uint64_t first_row, std::size_t rows,
                          std::uint64_t* out) {
  if (requests == 0 || requests >= (std::uint64_t{1} << 32)) return false;
  return detail::draw_and_sum_any(std::make_index_sequence<kMaxResampleColumns>(), columns,
                                  values, requests, key, first_row, rows, out);
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_RESAMPLE_H_
