// The places of a range's attributed lines (which request each names), in file order, each in
// as few bytes as its block of lines needs (LinePlaces). Part of fold/_native.cc through
// fold_tables.h; no Python.

#ifndef FOLD_NATIVE_LINE_PLACES_H_
#define FOLD_NATIVE_LINE_PLACES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fold_native {

// The lines are cut in blocks of kBlockLines. A block lists the requests its lines name, and a
// line names its request by its index in that list: in one byte while the block names at most
// 256, in two while at most kMostListed, or else by its place itself, in four. A reading
// thread meets a few hundred requests at a time (a serving engine's batches), so a line's
// place takes one byte where it took four: with its 32-bit interval (LineTimes), the read
// held 8 bytes a line, its peak on a long log, and now holds about 5.
class LinePlaces {
 public:
  static constexpr std::size_t kBlockLines = std::size_t{1} << 16;
  // Past this many, a block's list would cost more than its indices save.
  static constexpr std::uint32_t kMostListed = 1 << 14;

  void reserve(std::size_t lines) { bytes_.reserve(lines); }
  std::size_t size() const { return lines_; }
  const std::uint8_t* data() const { return bytes_.data(); }
  std::size_t bytes() const { return bytes_.size(); }

  void push(std::uint32_t place) {
    if (lines_ % kBlockLines == 0) {
      blocks_.push_back(Block{bytes_.size(), static_cast<std::uint32_t>(listed_.size()), 1});
    }
    ++lines_;
    Block& block = blocks_.back();
    if (block.width == 4) {
      put(place, 4);
      return;
    }
    if (place >= stamp_.size()) {
      stamp_.resize(place + std::size_t{1}, 0);
      index_.resize(place + std::size_t{1}, 0);
    }
    auto number = static_cast<std::uint32_t>(blocks_.size());
    if (stamp_[place] != number) {
      auto listed = static_cast<std::uint32_t>(listed_.size()) - block.list;
      if (listed == kMostListed) {
        widen(block, 4);
        put(place, 4);
        return;
      }
      if (listed == 256 && block.width == 1) widen(block, 2);
      stamp_[place] = number;
      index_[place] = static_cast<std::uint16_t>(listed);
      listed_.push_back(place);
    }
    put(index_[place], block.width);
  }

  // The places again, line by line from the first.
  class Reader {
   public:
    explicit Reader(const LinePlaces& places) : places_(places) {}

    std::uint32_t next() {
      if (line_ % kBlockLines == 0) {
        const Block& block = places_.blocks_[line_ / kBlockLines];
        at_ = places_.bytes_.data() + block.start;
        list_ = places_.listed_.data() + block.list;
        width_ = block.width;
      }
      ++line_;
      std::uint32_t value = load(at_, width_);
      at_ += width_;
      return width_ == 4 ? value : list_[value];
    }
    // Where the next line's bytes start: every byte before is read.
    const std::uint8_t* position() const { return at_; }

   private:
    const LinePlaces& places_;
    std::size_t line_ = 0;
    const std::uint8_t* at_ = nullptr;
    const std::uint32_t* list_ = nullptr;
    unsigned width_ = 1;
  };

 private:
  struct Block {
    std::size_t start;   // its first line's byte
    std::uint32_t list;  // its list's first entry in listed_
    unsigned width;      // bytes a line: 1 or 2 (an index into its list), 4 (a place)
  };

  // A value in `width` bytes, the lowest first.
  static void store(std::uint8_t* at, std::uint32_t value, unsigned width) {
    for (unsigned i = 0; i < width; ++i) at[i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
  static std::uint32_t load(const std::uint8_t* at, unsigned width) {
    std::uint32_t value = 0;
    for (unsigned i = 0; i < width; ++i) value |= std::uint32_t{at[i]} << (8 * i);
    return value;
  }

  void put(std::uint32_t value, unsigned width) {
    for (unsigned i = 0; i < width; ++i) {
      bytes_.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
    }
  }

  // The block's lines so far written again `width` bytes each, from the last back, so that
  // none is overwritten before it is read.
  void widen(Block& block, unsigned width) {
    std::size_t count = (bytes_.size() - block.start) / block.width;
    const std::uint32_t* list = listed_.data() + block.list;
    bytes_.resize(block.start + count * width);
    std::uint8_t* base = bytes_.data() + block.start;
    for (std::size_t i = count; i-- > 0;) {
      std::uint32_t value = load(base + i * block.width, block.width);
      store(base + i * width, width == 4 ? list[value] : value, width);
    }
    block.width = width;
    // A block of places by themselves needs no list (it is the last block's, at the end).
    if (width == 4) listed_.resize(block.list);
  }

  std::vector<std::uint8_t> bytes_;
  std::vector<Block> blocks_;
  std::vector<std::uint32_t> listed_;  // each block's list, one after another
  // By place: the block (its number from 1) whose list holds it, and its index there.
  std::vector<std::uint32_t> stamp_;
  std::vector<std::uint16_t> index_;
  std::size_t lines_ = 0;
};

}  // namespace fold_native

#endif  // FOLD_NATIVE_LINE_PLACES_H_
