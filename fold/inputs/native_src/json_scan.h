// JSON scanning as orjson judges it: whitespace, strings (validated as UTF-8, unescaped on
// request), numbers, any value skipped, and integers read fast. Part of fold/_native.cc, its only
// includer (through json_line.h).

#ifndef FOLD_NATIVE_JSON_SCAN_H_
#define FOLD_NATIVE_JSON_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace fold_native {

// fold.inputs.limits.MAX_COUNT: the largest count and sum, the signed fields' bound.
constexpr std::uint64_t kSignedMax = (std::uint64_t{1} << 63) - 1;
constexpr int kMaxDepth = 64;  // deeper unknown values are deferred


// -- JSON scanning -------------------------------------------------------------------------
// The parsed bytes of a line end with '\n', which continues no token, and the caller leaves
// readable slack after its buffer, so no scan needs a bounds check: each stops at the '\n'.

enum class Verdict { kOk, kBad, kDefer };

// JSON's whitespace but '\n', which ends a line: space, tab and carriage return.
struct SpaceTable {
  bool space[256];
  // By the bytes' values: a char subscript may be signed (clang's -Wchar-subscripts).
  constexpr SpaceTable() : space() { space[0x20] = space[0x09] = space[0x0d] = true; }
};
inline constexpr SpaceTable kSpace{};

inline void skip_ws(const char*& p) {
  // Most tokens are not preceded by whitespace: one compare decides that.
  if (static_cast<unsigned char>(*p) > ' ') return;
  while (kSpace.space[static_cast<unsigned char>(*p)]) ++p;
}

inline unsigned hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 16;
}

// One UTF-8 sequence starting at a byte >= 0x80 (shortest form, no surrogates, <= U+10FFFF),
// as orjson demands; advances past it.
inline bool utf8_sequence(const char*& p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  auto cont = [](unsigned char c) { return (c & 0xC0) == 0x80; };
  unsigned char c = u[0];
  if (c >= 0xC2 && c <= 0xDF) {
    if (!cont(u[1])) return false;
    p += 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    if (u[1] < lo || u[1] > hi || !cont(u[2])) return false;
    p += 3;
  } else if (c >= 0xF0 && c <= 0xF4) {
    unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    if (u[1] < lo || u[1] > hi || !cont(u[2]) || !cont(u[3])) return false;
    p += 4;
  } else {
    return false;
  }
  return true;
}

inline void append_utf8(std::string* out, std::uint32_t code) {
  if (out == nullptr) return;
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

// Lowercase hex digits as the writers write ids: the digit's value, 16 for any other byte.
struct LowerHexTable {
  unsigned char value[256];
  constexpr LowerHexTable() : value() {
    for (int c = 0; c < 256; ++c) {
      value[c] = c >= '0' && c <= '9' ? static_cast<unsigned char>(c - '0')
                 : c >= 'a' && c <= 'f' ? static_cast<unsigned char>(c - 'a' + 10)
                                        : 16;
    }
  }
};
inline constexpr LowerHexTable kLowerHex{};

// Sixteen lowercase hex digits at p (a writer id, FORMAT.md) as their number: false when any
// byte is not one. Digits and letters alternate at random, which a branch per digit would
// mispredict, and a digit at a time chains sixteen shifts: eight bytes are judged and
// combined at once (SWAR) where the byte order allows.
inline bool lower_hex16(const char* p, std::uint64_t& out) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  std::uint64_t value = 0;
  for (int half = 0; half < 2; ++half) {
    std::uint64_t x;
    std::memcpy(&x, p + 8 * half, 8);  // the first digit is the low byte
    // For bytes below 0x80, adding (0x80 - c) sets a byte's top bit exactly when it is at
    // least c, and no sum carries into the next byte; a byte from 0x80 up is refused first.
    auto at_least = [x](unsigned c) { return (x + (0x80 - c) * kOnes) & kHigh; };
    std::uint64_t digit = at_least('0') & ~at_least('9' + 1);
    std::uint64_t letter = at_least('a') & ~at_least('f' + 1);
    if ((x & kHigh) != 0 || (digit | letter) != kHigh) return false;
    // '0'-'9' are 0x30-0x39 and 'a'-'f' 0x61-0x66: the low nibble, plus 9 for a letter.
    std::uint64_t nibbles = (x & 0x0F * kOnes) + 9 * ((x >> 6) & kOnes);
    // Byte pairs, then pairs of those, then of those: the earlier one is the higher.
    nibbles = ((nibbles << 4) | (nibbles >> 8)) & 0x00FF00FF00FF00FFULL;
    nibbles = ((nibbles << 8) | (nibbles >> 16)) & 0x0000FFFF0000FFFFULL;
    nibbles = ((nibbles << 16) | (nibbles >> 32)) & 0x00000000FFFFFFFFULL;
    value = value << 32 | nibbles;
  }
  out = value;
  return true;
#else
  std::uint64_t value = 0;
  unsigned invalid = 0;
  for (int i = 0; i < 16; ++i) {
    unsigned digit = kLowerHex.value[static_cast<unsigned char>(p[i])];
    invalid |= digit;
    value = value << 4 | (digit & 15);
  }
  out = value;
  return invalid < 16;
#endif
}

inline bool four_hex(const char* p, std::uint32_t& out) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    unsigned digit = hex_value(static_cast<unsigned char>(p[i]));
    if (digit > 15) return false;
    value = value << 4 | digit;
  }
  out = value;
  return true;
}

// Bytes a string run takes as they are: not '"', '\\', a control byte or a byte of a
// multi-byte UTF-8 sequence. One table load per byte instead of four compares.
struct PlainByteTable {
  bool plain[256];
  constexpr PlainByteTable() : plain() {
    for (int c = 0; c < 256; ++c) plain[c] = c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
  }
};
inline constexpr PlainByteTable kPlainByte{};

// A string after its opening quote, up to and past its closing quote; unescaped into `out`
// when given, and `escaped` set when given and the string has an escape. Surrogate escapes
// that do not pair are deferred (orjson and Python's json disagree on them).
inline Verdict scan_string(const char*& p, std::string* out, bool* escaped = nullptr) {
  while (true) {
    const char* run = p;
    while (kPlainByte.plain[static_cast<unsigned char>(*p)]) ++p;
    if (out != nullptr) out->append(run, static_cast<std::size_t>(p - run));
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"') {
      ++p;
      return Verdict::kOk;
    }
    if (c < 0x20) return Verdict::kBad;
    if (c >= 0x80) {
      const char* start = p;
      if (!utf8_sequence(p)) return Verdict::kBad;
      if (out != nullptr) out->append(start, static_cast<std::size_t>(p - start));
      continue;
    }
    ++p;  // the backslash
    if (escaped != nullptr) *escaped = true;
    char e = *p++;
    switch (e) {
      case '"': if (out) out->push_back('"'); break;
      case '\\': if (out) out->push_back('\\'); break;
      case '/': if (out) out->push_back('/'); break;
      case 'b': if (out) out->push_back('\b'); break;
      case 'f': if (out) out->push_back('\f'); break;
      case 'n': if (out) out->push_back('\n'); break;
      case 'r': if (out) out->push_back('\r'); break;
      case 't': if (out) out->push_back('\t'); break;
      case 'u': {
        std::uint32_t code;
        if (!four_hex(p, code)) return Verdict::kBad;
        p += 4;
        if (code >= 0xD800 && code <= 0xDBFF) {
          std::uint32_t low;
          if (p[0] != '\\' || p[1] != 'u' || !four_hex(p + 2, low) || low < 0xDC00 ||
              low > 0xDFFF) {
            return Verdict::kDefer;
          }
          p += 6;
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        } else if (code >= 0xDC00 && code <= 0xDFFF) {
          return Verdict::kDefer;
        }
        append_utf8(out, code);
        break;
      }
      default:
        return Verdict::kBad;
    }
  }
}

// A JSON number, of any size: JSON sets no range, and an unknown key's value is ignored
// whatever it is (the exact parser reads one beyond a double's range too).
inline Verdict scan_number(const char*& p) {
  if (*p == '-') ++p;
  if (*p == '0') {
    ++p;
  } else if (*p >= '1' && *p <= '9') {
    while (*p >= '0' && *p <= '9') ++p;
  } else {
    return Verdict::kBad;
  }
  if (*p >= '0' && *p <= '9') return Verdict::kBad;  // a leading zero
  if (*p == '.') {
    ++p;
    if (!(*p >= '0' && *p <= '9')) return Verdict::kBad;
    while (*p >= '0' && *p <= '9') ++p;
  }
  if (*p == 'e' || *p == 'E') {
    ++p;
    if (*p == '+' || *p == '-') ++p;
    if (!(*p >= '0' && *p <= '9')) return Verdict::kBad;
    while (*p >= '0' && *p <= '9') ++p;
  }
  return Verdict::kOk;
}

template <std::size_t N>
inline bool literal(const char*& p, const char (&word)[N]) {
  if (std::memcmp(p, word, N - 1) != 0) return false;
  p += N - 1;
  return true;
}

// What follows a member of an object or an element of an array, past its whitespace: a comma
// (another one follows, whitespace skipped), the closing bracket, or anything else (bad).
enum class Next { kMore, kClosed, kBad };

inline Next after_member(const char*& p, char close) {
  skip_ws(p);
  if (*p == ',') {
    ++p;
    skip_ws(p);
    return Next::kMore;
  }
  if (*p == close) {
    ++p;
    return Next::kClosed;
  }
  return Next::kBad;
}

// Any JSON value, validated and skipped.
inline Verdict skip_value(const char*& p, int depth) {
  char c = *p;
  if (c == '"') {
    ++p;
    return scan_string(p, nullptr);
  }
  if (c == '-' || (c >= '0' && c <= '9')) return scan_number(p);
  if (c == 't') return literal(p, "true") ? Verdict::kOk : Verdict::kBad;
  if (c == 'f') return literal(p, "false") ? Verdict::kOk : Verdict::kBad;
  if (c == 'n') return literal(p, "null") ? Verdict::kOk : Verdict::kBad;
  if (c != '[' && c != '{') return Verdict::kBad;
  if (depth >= kMaxDepth) return Verdict::kDefer;
  bool object = c == '{';
  char close = object ? '}' : ']';
  ++p;
  skip_ws(p);
  if (*p == close) {
    ++p;
    return Verdict::kOk;
  }
  while (true) {
    if (object) {
      if (*p != '"') return Verdict::kBad;
      ++p;
      Verdict key = scan_string(p, nullptr);
      if (key != Verdict::kOk) return key;
      skip_ws(p);
      if (*p != ':') return Verdict::kBad;
      ++p;
      skip_ws(p);
    }
    Verdict value = skip_value(p, depth + 1);
    if (value != Verdict::kOk) return value;
    switch (after_member(p, close)) {
      case Next::kMore: continue;
      case Next::kClosed: return Verdict::kOk;
      case Next::kBad: return Verdict::kBad;
    }
    return Verdict::kBad;
  }
}

// Up to `limit` leading decimal digits at p as a number, p moved past them. Timestamps are
// nineteen digits: eight at a time (SWAR) where the byte order allows, else one at a time.
__attribute__((always_inline)) inline std::uint64_t leading_digits(const char*& p, int limit) {
  std::uint64_t value = 0;
  int taken = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  constexpr std::uint64_t kZeros = 0x3030303030303030ULL, kHigh = 0xF0F0F0F0F0F0F0F0ULL;
  constexpr std::uint64_t kSix = 0x0606060606060606ULL;
  static constexpr std::uint64_t kPowers[9] = {1,      10,      100,      1000,     10000,
                                        100000, 1000000, 10000000, 100000000};
  while (limit - taken >= 8) {
    std::uint64_t chunk;
    std::memcpy(&chunk, p, 8);  // readable: the caller's slack follows every line
    // A byte is a digit when its high nibble is 3 both before and after adding 6. A carry
    // out of a non-digit byte only reaches later bytes, past the first non-digit.
    std::uint64_t other = ((chunk & kHigh) ^ kZeros) | (((chunk + kSix) & kHigh) ^ kZeros);
    int digits = other == 0 ? 8 : __builtin_ctzll(other) / 8;
    if (digits == 0) return value;
    // Digits first in memory are the low bytes: shift the others out, then combine pairs,
    // quads and octets, most significant first.
    std::uint64_t d = (chunk - kZeros) << (8 * (8 - digits));
    d = (d * 10 + (d >> 8)) & 0x00FF00FF00FF00FFULL;
    d = (d * 100 + (d >> 16)) & 0x0000FFFF0000FFFFULL;
    d = (d * 10000 + (d >> 32)) & 0x00000000FFFFFFFFULL;
    value = value * kPowers[digits] + d;
    p += digits;
    taken += digits;
    if (digits < 8) return value;
  }
#endif
  unsigned digit;
  while (taken < limit &&
         (digit = static_cast<unsigned char>(*p) - static_cast<unsigned>('0')) <= 9) {
    value = value * 10 + digit;
    ++p;
    ++taken;
  }
  return value;
}

// An integer field: plain decimal up to `max` is kOk with `out` set. A sign is deferred
// (the exact reader refuses a negative count, or reads -0); a fraction, an exponent or a
// value out of range makes the line bad (orjson reads a float). `wrong` is set when the value
// is valid JSON but not a usable integer.
__attribute__((noinline)) inline Verdict integer_field_any(const char*& p, std::uint64_t max,
                                                           std::uint64_t& out, bool& wrong) {
  char c = *p;
  if (c == '-') {
    Verdict number = scan_number(p);
    return number == Verdict::kOk ? Verdict::kDefer : number;
  }
  if (!(c >= '0' && c <= '9')) {
    wrong = true;
    return skip_value(p, 0);
  }
  const char* start = p;
  // Nineteen digits cannot overflow 64 bits; only longer numbers need checking.
  std::uint64_t value = leading_digits(p, 19);
  bool fits = true;
  unsigned digit;
  while ((digit = static_cast<unsigned char>(*p) - static_cast<unsigned>('0')) <= 9) {
    if (__builtin_mul_overflow(value, std::uint64_t{10}, &value) ||
        __builtin_add_overflow(value, std::uint64_t{digit}, &value)) {
      fits = false;
    }
    ++p;
  }
  if (*start == '0' && p - start > 1) return Verdict::kBad;  // a leading zero
  if (*p == '.' || *p == 'e' || *p == 'E') {
    p = start;
    Verdict number = scan_number(p);
    if (number != Verdict::kOk) return number;
    wrong = true;
    return Verdict::kOk;
  }
  if (!fits || value > max) {
    wrong = true;
    return Verdict::kOk;
  }
  out = value;
  return Verdict::kOk;
}


// integer_field's common case inline: a plain integer of at most nineteen digits, with no
// fraction or exponent after it. Anything else is judged by integer_field_any from the start.
__attribute__((always_inline)) inline Verdict integer_field(const char*& p, std::uint64_t max,
                                                            std::uint64_t& out, bool& wrong) {
  const char* start = p;
  if (static_cast<unsigned char>(*p) - static_cast<unsigned>('0') <= 9) {
    std::uint64_t value = leading_digits(p, 19);
    char next = *p;
    bool leading_zero = *start == '0' && p - start > 1;
    if (!(next >= '0' && next <= '9') && next != '.' && (next | 0x20) != 'e' &&
        !leading_zero) {
      if (value > max) {
        wrong = true;
      } else {
        out = value;
      }
      return Verdict::kOk;
    }
    p = start;
  }
  return integer_field_any(p, max, out, wrong);
}


}  // namespace fold_native

#endif  // FOLD_NATIVE_JSON_SCAN_H_
