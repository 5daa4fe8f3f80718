// The fold's hash tables: open addressing over 64-bit keys, entries kept in insertion order.
// Part of fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_HASH_TABLE_H_
#define FOLD_NATIVE_HASH_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace fold_native {

inline std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

struct Key {
  std::uint64_t a;
  std::uint64_t b;
  std::int64_t c;
  std::uint64_t d = 0;  // a request's string id: 1 + its place among the fold's ids; 0: none
  bool operator==(const Key& other) const {
    return a == other.a && b == other.b && c == other.c && d == other.d;
  }
  std::uint64_t hash() const {
    // One finalizer over a multiplicative combination: the parts land on different bits, and
    // the finalizer spreads them over the slot index.
    return mix(a ^ (b * 0x9e3779b97f4a7c15ULL) ^
               (static_cast<std::uint64_t>(c) * 0xc2b2ae3d27d4eb4fULL) ^
               (d * 0xff51afd7ed558ccdULL));
  }
};

// Open addressing with linear probing over an index array; entries stay dense and in
// insertion order, so iterating (and merging) touches only what was inserted.
template <class Value>
class Table {
 public:
  Table() : slots_(1024, 0), mask_(1023) {}

  Value& at(const Key& key) { return entries_[index(key)].value; }

  // The entry's place in entries(), inserting it when new. Places never change, even when
  // the table grows (entries may move in memory; hold places, not references).
  std::size_t index(const Key& key) {
    std::size_t slot = key.hash() & mask_;
    while (true) {
      std::uint32_t held = slots_[slot];
      if (held == 0) break;
      if (entries_[held - 1].key == key) return held - 1;
      slot = (slot + 1) & mask_;
    }
    entries_.push_back(Entry{key, Value{}});
    slots_[slot] = static_cast<std::uint32_t>(entries_.size());
    if (entries_.size() * 2 > slots_.size()) grow();
    return entries_.size() - 1;
  }

  struct Entry {
    Key key;
    Value value;
  };
  std::vector<Entry>& entries() { return entries_; }
  const std::vector<Entry>& entries() const { return entries_; }

  // Room for `count` entries before the first move: a large table then fills its pages once
  // instead of copying itself on every doubling. Only a wish: without the room it grows.
  void reserve_entries(std::size_t count) {
    try {
      entries_.reserve(count);
    } catch (const std::bad_alloc&) {
    }
  }

 private:
  void grow() {
    std::vector<std::uint32_t> slots(slots_.size() * 2, 0);
    std::size_t mask = slots.size() - 1;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      std::size_t slot = entries_[i].key.hash() & mask;
      while (slots[slot] != 0) slot = (slot + 1) & mask;
      slots[slot] = static_cast<std::uint32_t>(i + 1);
    }
    slots_.swap(slots);
    mask_ = mask;
  }

  std::vector<std::uint32_t> slots_;
  std::size_t mask_;
  std::vector<Entry> entries_;
};

}  // namespace fold_native

#endif  // FOLD_NATIVE_HASH_TABLE_H_
