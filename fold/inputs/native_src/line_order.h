// A request's lines folded in file order into its LineOrder (follow_line): the figures by
// output position and per draft length, which need the lines in (t_ns, counts) order. Part of
// fold/_native.cc, its only includer; no Python.

#ifndef FOLD_NATIVE_LINE_ORDER_H_
#define FOLD_NATIVE_LINE_ORDER_H_

#include <algorithm>
#include <cstdint>

#include "fold_tables.h"
#include "hash_table.h"
#include "json_line.h"

namespace fold_native {

inline bool add32(std::int32_t& total, std::int64_t value) {
  std::int64_t sum = std::int64_t{total} + value;
  if (sum > INT32_MAX) return false;
  total = static_cast<std::int32_t>(sum);
  return true;
}

// A line's counts packed as fold.folding.packed_tokens.packed_tokens packs them.
inline std::int64_t packed_tokens(const Step& step) {
  return step.proposed | step.accepted << kTokenBits |
         (step.has_emitted ? step.emitted + 1 : 0) << 2 * kTokenBits;
}

// A position's bucket (fold.folding.by_position): 0 below 128, then one per doubling.
inline std::int64_t bucket_of(std::int64_t before) {
  int bits = before <= 0 ? 0 : 64 - __builtin_clzll(static_cast<unsigned long long>(before));
  return std::max(0, bits - kFirstEdgeBits);
}

// The next line of an attributed request, in file order, folded into its LineOrder: its
// position's bucket sums and, past its first line, the interval to it under its draft length.
// `first`: the request's first line (in this fold, and not continued from Seeds). False: a sum
// overflowed.
inline bool follow_line(Fold& fold, std::uint32_t place, LineOrder& order, const Step& step,
                        std::int64_t offset, std::int64_t end, bool first) {
  std::int64_t packed = packed_tokens(step);
  if (order.first_offset < 0) order.first_offset = offset;
  if (!first && !order.unordered) {
    std::int64_t last_proposed = order.last_packed & kTokenMask;
    order.unordered = step.t_ns < order.last_t ||
                      (step.t_ns == order.last_t &&
                       (packed < order.last_packed || step.proposed < last_proposed));
  }
  order.last_end = end;
  std::int64_t last_t = order.last_t;
  order.last_t = step.t_ns;
  order.last_packed = packed;
  if (order.unordered) return true;
  if (step.proposed > 0) {
    std::int64_t bucket = bucket_of(order.emitted_before);
    if (bucket != order.bucket) {
      if (order.bucket_steps > 0) {
        fold.done_buckets.push_back(BucketRow{place, order.bucket, order.bucket_steps,
                                              order.bucket_proposed, order.bucket_accepted});
      }
      order.bucket = static_cast<std::int8_t>(bucket);
      order.bucket_steps = order.bucket_proposed = order.bucket_accepted = 0;
    }
    if (!add32(order.bucket_steps, 1) || !add32(order.bucket_proposed, step.proposed) ||
        !add32(order.bucket_accepted, step.accepted)) {
      return false;
    }
    if (!first) {
      std::int64_t gap;
      if (__builtin_sub_overflow(step.t_ns, last_t, &gap)) return false;
      if (order.length_proposed == 0 || order.length_proposed == step.proposed) {
        order.length_proposed = static_cast<std::int32_t>(step.proposed);  // at most 2^16
        if (!add32(order.length_intervals, 1) || !add(order.length_ns, gap)) return false;
      } else {
        StepLengthSums& other = fold.other_lengths.at(
            Key{place, static_cast<std::uint64_t>(step.proposed), 0});
        other.intervals += 1;
        if (!add(other.ns, gap)) return false;
      }
    }
  }
  return add(order.emitted_before, step.has_emitted ? step.emitted : step.accepted + 1);
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_LINE_ORDER_H_
