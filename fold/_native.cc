// fold._native: folds a step log in the writers' exact byte layout (instrument/FORMAT.md) in
// one pass, without building any per-line Python object.
//
// One function, fold_layout_file(path, starts, ends, bins_per_leg). It returns the sums the
// polars paths of fold/accumulate.py compute, as plain lists, or None ("decline") for anything
// outside the common case: a file that is empty or does not end with '\n', a line that is not
// exactly the layout (key order, no spaces, plain unsigned integers without leading zeros,
// labels of printable ASCII without quote or backslash), accepted > proposed, an integer out
// of range, a sum that would overflow, or leg windows that overlap. The Python caller then
// uses the polars paths, which give the exact errors and counts.
//
// The file is read with pread(2) into a reusable buffer; a partial line is carried to the next
// block. A large file is split at a newline into one range per core, parsed on threads with
// the GIL released, and the per-thread tables are merged.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kPad = 64;  // readable slack after the parsed bytes
constexpr std::uint64_t kSignedLimit = std::uint64_t{1} << 63;
constexpr Py_ssize_t kDefaultBlock = Py_ssize_t{4} << 20;         // bytes read per pread(2)
constexpr Py_ssize_t kDefaultBytesPerThread = Py_ssize_t{64} << 20;  // less: one thread

// How a file is read: tests shrink both to exercise block carries and the split on small files.
struct Reading {
  std::size_t block;      // bytes read per pread(2); a longer line declines
  off_t bytes_per_thread;  // a thread per this many bytes, up to the cores
};

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
  bool operator==(const Key& other) const {
    return a == other.a && b == other.b && c == other.c;
  }
  std::uint64_t hash() const {
    return mix(a ^ mix(b ^ mix(static_cast<std::uint64_t>(c) + 0x9e3779b97f4a7c15ULL)));
  }
};

// Open addressing with linear probing over an index array; entries stay dense and in
// insertion order, so iterating (and merging) touches only what was inserted.
template <class Value>
class Table {
 public:
  Table() : slots_(1024, 0), mask_(1023) {}

  Value& at(const Key& key) {
    std::size_t slot = key.hash() & mask_;
    while (true) {
      std::uint32_t held = slots_[slot];
      if (held == 0) break;
      Entry& entry = entries_[held - 1];
      if (entry.key == key) return entry.value;
      slot = (slot + 1) & mask_;
    }
    entries_.push_back(Entry{key, Value{}});
    slots_[slot] = static_cast<std::uint32_t>(entries_.size());
    if (entries_.size() * 2 > slots_.size()) grow();
    return entries_.back().value;
  }

  struct Entry {
    Key key;
    Value value;
  };
  const std::vector<Entry>& entries() const { return entries_; }

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

struct Request {  // per (leg or none, writer, seq)
  std::int64_t lines = 0, steps = 0, proposed = 0, accepted = 0, emitted = 0, emitted_lines = 0;
  std::int64_t max_proposed = 0, max_n = 0, max_pid = 0;
};

struct Bin {  // per (leg, time bin)
  std::int64_t steps = 0, proposed = 0, accepted = 0;
};

struct Window {
  std::int64_t start;
  std::int64_t end;
  std::int64_t span;  // end - start + 1
  std::int64_t leg;   // position in the caller's sequences
};

inline bool add(std::int64_t& total, std::int64_t value) {
  return !__builtin_add_overflow(total, value, &total);
}

struct Fold {
  Table<Request> requests;   // key (writer, seq, leg or -1)
  Table<std::int64_t> hist;  // key (leg, accepted, 0)
  Table<Bin> bins;           // key (leg, bin, 0)
  std::int64_t lines = 0, attributed = 0, unattributed = 0;
  bool ok = true;

  bool merge(const Fold& other) {
    lines += other.lines;
    attributed += other.attributed;
    unattributed += other.unattributed;
    for (const auto& entry : other.requests.entries()) {
      Request& into = requests.at(entry.key);
      const Request& from = entry.value;
      if (!add(into.lines, from.lines) || !add(into.steps, from.steps) ||
          !add(into.proposed, from.proposed) || !add(into.accepted, from.accepted) ||
          !add(into.emitted, from.emitted) || !add(into.emitted_lines, from.emitted_lines)) {
        return false;
      }
      into.max_proposed = std::max(into.max_proposed, from.max_proposed);
      into.max_n = std::max(into.max_n, from.max_n);
      into.max_pid = std::max(into.max_pid, from.max_pid);
    }
    for (const auto& entry : other.hist.entries()) hist.at(entry.key) += entry.value;
    for (const auto& entry : other.bins.entries()) {
      Bin& into = bins.at(entry.key);
      if (!add(into.steps, entry.value.steps) || !add(into.proposed, entry.value.proposed) ||
          !add(into.accepted, entry.value.accepted)) {
        return false;
      }
    }
    return true;
  }
};

// -- parsing -------------------------------------------------------------------------------
// Every scan stops at a byte that cannot continue it; the parsed bytes end with '\n' (which
// continues nothing) and kPad readable bytes follow them, so no scan needs a bounds check.

template <std::size_t N>
inline bool expect(const char*& p, const char (&literal)[N]) {
  if (std::memcmp(p, literal, N - 1) != 0) return false;
  p += N - 1;
  return true;
}

// A JSON integer as the writers print it: decimal digits, no sign, no leading zero but "0".
inline bool parse_uint(const char*& p, std::uint64_t& out) {
  unsigned digit = static_cast<unsigned char>(*p) - '0';
  if (digit > 9) return false;
  if (digit == 0) {
    ++p;
    out = 0;
    return static_cast<unsigned>(static_cast<unsigned char>(*p) - '0') > 9;
  }
  std::uint64_t value = digit;
  int count = 1;
  ++p;
  while ((digit = static_cast<unsigned char>(*p) - '0') <= 9) {
    if (++count > 19) {  // a 20th digit may overflow 64 bits
      if (count > 20 || __builtin_mul_overflow(value, std::uint64_t{10}, &value) ||
          __builtin_add_overflow(value, std::uint64_t{digit}, &value)) {
        return false;
      }
    } else {
      value = value * 10 + digit;
    }
    ++p;
  }
  out = value;
  return true;
}

inline bool parse_signed(const char*& p, std::int64_t& out) {
  std::uint64_t value;
  if (!parse_uint(p, value) || value >= kSignedLimit) return false;
  out = static_cast<std::int64_t>(value);
  return true;
}

inline bool parse_writer(const char*& p, std::uint64_t& out) {
  std::uint64_t value = 0;
  for (int i = 0; i < 16; ++i) {
    unsigned char c = static_cast<unsigned char>(p[i]);
    unsigned digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    value = (value << 4) | digit;
  }
  p += 16;
  out = value;
  return true;
}

// A label that needs no unescaping: printable ASCII but '"' and '\\', up to its closing quote.
inline bool skip_label(const char*& p) {
  while (true) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"') return true;
    if (c < 0x20 || c >= 0x80 || c == '\\') return false;
    ++p;
  }
}

class Folder {
 public:
  Folder(const std::vector<Window>& windows, std::int64_t bins_per_leg, Fold& fold)
      : windows_(windows), bins_per_leg_(bins_per_leg), fold_(fold) {}

  // Folds the whole lines in [p, end); end[-1] is '\n'. False: decline.
  bool lines(const char* p, const char* end) {
    while (p < end) {
      if (!line(p)) return false;
    }
    return p == end;
  }

 private:
  bool line(const char*& p) {
    std::uint64_t writer, seq, value;
    std::int64_t n, t_ns, pid, proposed, accepted, emitted = 0;
    bool has_emitted = false;
    if (!expect(p, "{\"v\":1,\"w\":\"") || !parse_writer(p, writer) ||
        !expect(p, "\",\"n\":") || !parse_signed(p, n) || !expect(p, ",\"t_ns\":") ||
        !parse_signed(p, t_ns) || !expect(p, ",\"pid\":") || !parse_signed(p, pid) ||
        !expect(p, ",\"seq\":") || !parse_uint(p, seq) || !expect(p, ",\"proposed\":") ||
        !parse_signed(p, proposed) || !expect(p, ",\"accepted\":") ||
        !parse_signed(p, accepted)) {
      return false;
    }
    if (*p == ',' && p[2] == 'e') {
      if (!expect(p, ",\"emitted\":") || !parse_uint(p, value) || value >= kSignedLimit) {
        return false;
      }
      emitted = static_cast<std::int64_t>(value);
      has_emitted = true;
    }
    if (*p == ',') {
      if (!expect(p, ",\"leg\":\"") || !skip_label(p)) return false;
      ++p;  // the closing quote
    }
    if (!expect(p, "}\n")) return false;
    if (accepted > proposed) return false;  // the block path refuses it, naming the line
    return add_step(writer, seq, n, t_ns, pid, proposed, accepted, emitted, has_emitted);
  }

  // The window holding t_ns, or nullptr. Windows are sorted and disjoint.
  const Window* window_of(std::int64_t t_ns) {
    if (last_ != nullptr && t_ns >= last_->start && t_ns <= last_->end) return last_;
    auto after = std::upper_bound(
        windows_.begin(), windows_.end(), t_ns,
        [](std::int64_t t, const Window& window) { return t < window.start; });
    if (after == windows_.begin()) return nullptr;
    const Window* window = &*(after - 1);
    if (t_ns > window->end) return nullptr;
    last_ = window;
    return window;
  }

  bool add_step(std::uint64_t writer, std::uint64_t seq, std::int64_t n, std::int64_t t_ns,
                std::int64_t pid, std::int64_t proposed, std::int64_t accepted,
                std::int64_t emitted, bool has_emitted) {
    const Window* window = window_of(t_ns);
    std::int64_t leg = window != nullptr ? window->leg : -1;
    ++fold_.lines;
    if (window != nullptr) {
      ++fold_.attributed;
    } else {
      ++fold_.unattributed;
    }
    Request& request = fold_.requests.at(Key{writer, seq, leg});
    request.lines += 1;
    request.steps += proposed > 0;
    if (!add(request.proposed, proposed) || !add(request.accepted, accepted) ||
        !add(request.emitted, emitted)) {
      return false;
    }
    request.emitted_lines += has_emitted;
    if (request.lines == 1) {
      request.max_proposed = proposed;
      request.max_n = n;
      request.max_pid = pid;
    } else {
      request.max_proposed = std::max(request.max_proposed, proposed);
      request.max_n = std::max(request.max_n, n);
      request.max_pid = std::max(request.max_pid, pid);
    }
    if (window == nullptr || proposed == 0) return true;
    fold_.hist.at(Key{static_cast<std::uint64_t>(leg), static_cast<std::uint64_t>(accepted), 0}) +=
        1;
    // (t_ns - start) * bins < span * bins, which the caller checked fits in 64 bits.
    std::int64_t bin = (t_ns - window->start) * bins_per_leg_ / window->span;
    Bin& sums = fold_.bins.at(Key{static_cast<std::uint64_t>(leg), static_cast<std::uint64_t>(bin), 0});
    sums.steps += 1;
    return add(sums.proposed, proposed) && add(sums.accepted, accepted);
  }

  const std::vector<Window>& windows_;
  std::int64_t bins_per_leg_;
  Fold& fold_;
  const Window* last_ = nullptr;
};

// Folds the bytes [begin, end) of the file (whole lines: begin is a line start, end follows a
// '\n'). False: decline.
bool fold_range(int fd, off_t begin, off_t end, const std::vector<Window>& windows,
                std::int64_t bins_per_leg, std::size_t block, Fold& fold) {
  std::unique_ptr<char[]> buffer(new (std::nothrow) char[2 * block + kPad]);
  if (!buffer) return false;
  std::memset(buffer.get() + 2 * block, 0, kPad);
  Folder folder(windows, bins_per_leg, fold);
  std::size_t carried = 0;
  off_t offset = begin;
  while (offset < end) {
    std::size_t want = static_cast<std::size_t>(std::min<off_t>(end - offset, static_cast<off_t>(block)));
    ssize_t got = pread(fd, buffer.get() + carried, want, offset);
    if (got <= 0) return false;  // an error, or the file shrank while being read
    offset += got;
    std::size_t filled = carried + static_cast<std::size_t>(got);
    const char* data = buffer.get();
    const void* last = memrchr(data, '\n', filled);
    if (last == nullptr) {
      if (filled >= block) return false;  // a line longer than a block
      carried = filled;
      continue;
    }
    std::size_t cut = static_cast<const char*>(last) - data + 1;
    // Bytes after the cut are readable (the next line's start, or stale bytes): scans only
    // compare them, and every scan stops at the '\n' before them.
    if (!folder.lines(data, data + cut)) return false;
    carried = filled - cut;
    std::memmove(buffer.get(), data + cut, carried);
  }
  return carried == 0;
}

// The offset just after the first '\n' at or after `from`, or -1.
off_t next_line_start(int fd, off_t from, off_t size) {
  char chunk[4096];
  while (from < size) {
    ssize_t got = pread(fd, chunk, sizeof chunk, from);
    if (got <= 0) return -1;
    const void* newline = std::memchr(chunk, '\n', static_cast<std::size_t>(got));
    if (newline != nullptr) return from + (static_cast<const char*>(newline) - chunk) + 1;
    from += got;
  }
  return -1;
}

// Folds the whole file into fold; false: decline.
bool fold_file(const char* path, const std::vector<Window>& windows, std::int64_t bins_per_leg,
               const Reading& reading, Fold& fold) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_size == 0) return false;
  off_t size = info.st_size;
  char tail;
  if (pread(fd, &tail, 1, size - 1) != 1 || tail != '\n') return false;  // a torn last line
  posix_fadvise(fd, 0, size, POSIX_FADV_SEQUENTIAL);

  unsigned cores = std::max(1u, std::min(std::thread::hardware_concurrency(), 8u));
  unsigned parts = static_cast<unsigned>(
      std::max<off_t>(1, std::min<off_t>(cores, size / reading.bytes_per_thread)));
  std::vector<off_t> bounds{0};
  for (unsigned i = 1; i < parts; ++i) {
    off_t cut = next_line_start(fd, std::max(bounds.back(), size / parts * i), size);
    if (cut < 0) return false;
    if (cut < size && cut > bounds.back()) bounds.push_back(cut);
  }
  bounds.push_back(size);
  std::size_t ranges = bounds.size() - 1;
  if (ranges == 1) return fold_range(fd, 0, size, windows, bins_per_leg, reading.block, fold);

  std::vector<Fold> folds(ranges - 1);
  std::vector<char> ok(ranges, 0);
  std::vector<std::thread> threads;
  try {
    for (std::size_t i = 1; i < ranges; ++i) {
      threads.emplace_back([&, i] {
        try {
          ok[i] = fold_range(fd, bounds[i], bounds[i + 1], windows, bins_per_leg, reading.block,
                             folds[i - 1]);
        } catch (const std::bad_alloc&) {
          ok[i] = 0;
        }
      });
    }
  } catch (...) {
    for (auto& thread : threads) thread.join();
    return false;
  }
  bool first = false;
  try {
    first = fold_range(fd, bounds[0], bounds[1], windows, bins_per_leg, reading.block, fold);
  } catch (const std::bad_alloc&) {
    first = false;
  }
  for (auto& thread : threads) thread.join();
  if (!first) return false;
  for (std::size_t i = 1; i < ranges; ++i) {
    if (!ok[i] || !fold.merge(folds[i - 1])) return false;
  }
  return true;
}

// -- the Python side -----------------------------------------------------------------------

bool read_int64s(PyObject* sequence, std::vector<std::int64_t>& out) {
  PyObject* fast = PySequence_Fast(sequence, "expected a sequence of integers");
  if (fast == nullptr) return false;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  out.resize(static_cast<std::size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    long long value = PyLong_AsLongLong(items[i]);
    if (value == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out[static_cast<std::size_t>(i)] = value;
  }
  Py_DECREF(fast);
  return true;
}

// A column as the bytes of its 64-bit values in native order (Python: array.array "q"/"Q"):
// no Python object per row, so the result's memory is that of the sums.
template <class T>
PyObject* column_bytes(const std::vector<T>& values) {
  static_assert(sizeof(T) == 8, "64-bit columns");
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(values.data()),
                                   static_cast<Py_ssize_t>(values.size() * sizeof(T)));
}

// A tuple of new references, or nullptr (dropping them all) when any is nullptr.
PyObject* tuple_of(std::vector<PyObject*> items) {
  bool ok = std::all_of(items.begin(), items.end(), [](PyObject* item) { return item; });
  PyObject* tuple = ok ? PyTuple_New(static_cast<Py_ssize_t>(items.size())) : nullptr;
  if (tuple == nullptr) {
    for (PyObject* item : items) Py_XDECREF(item);
    return nullptr;
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), items[i]);
  }
  return tuple;
}

// Legs are positions in the caller's window lists; `no_leg` (their count) marks an
// unattributed line. Writers are indices into the list of distinct writer ids.
PyObject* build_result(const Fold& fold, std::int64_t no_leg) {
  const auto& requests = fold.requests.entries();
  std::vector<std::int64_t> leg, writer, lines, steps, proposed, accepted, emitted,
      emitted_lines, max_proposed, max_n, pid;
  std::vector<std::uint64_t> seq;
  Table<std::int64_t> writer_index;
  std::vector<std::uint64_t> writer_ids;
  for (auto* column : {&leg, &writer, &lines, &steps, &proposed, &accepted, &emitted,
                       &emitted_lines, &max_proposed, &max_n, &pid}) {
    column->reserve(requests.size());
  }
  seq.reserve(requests.size());
  for (const auto& entry : requests) {
    const Key& key = entry.key;
    const Request& r = entry.value;
    std::int64_t& index = writer_index.at(Key{key.a, 0, 0});
    if (index == 0) {
      writer_ids.push_back(key.a);
      index = static_cast<std::int64_t>(writer_ids.size());
    }
    leg.push_back(key.c < 0 ? no_leg : key.c);
    writer.push_back(index - 1);
    seq.push_back(key.b);
    lines.push_back(r.lines);
    steps.push_back(r.steps);
    proposed.push_back(r.proposed);
    accepted.push_back(r.accepted);
    emitted.push_back(r.emitted);
    emitted_lines.push_back(r.emitted_lines);
    max_proposed.push_back(r.max_proposed);
    max_n.push_back(r.max_n);
    pid.push_back(r.max_pid);
  }
  PyObject* writer_names = PyList_New(static_cast<Py_ssize_t>(writer_ids.size()));
  for (std::size_t i = 0; writer_names != nullptr && i < writer_ids.size(); ++i) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(writer_ids[i]));
    PyObject* name = PyUnicode_FromStringAndSize(hex, 16);
    if (name == nullptr) {
      Py_CLEAR(writer_names);
      break;
    }
    PyList_SET_ITEM(writer_names, static_cast<Py_ssize_t>(i), name);
  }
  PyObject* request_columns = tuple_of(
      {column_bytes(leg), column_bytes(writer), column_bytes(seq), column_bytes(lines),
       column_bytes(steps), column_bytes(proposed), column_bytes(accepted),
       column_bytes(emitted), column_bytes(emitted_lines), column_bytes(max_proposed),
       column_bytes(max_n), column_bytes(pid)});

  std::vector<std::int64_t> hist_leg, hist_accepted, hist_count;
  for (const auto& entry : fold.hist.entries()) {
    hist_leg.push_back(static_cast<std::int64_t>(entry.key.a));
    hist_accepted.push_back(static_cast<std::int64_t>(entry.key.b));
    hist_count.push_back(entry.value);
  }
  PyObject* hist_columns =
      tuple_of({column_bytes(hist_leg), column_bytes(hist_accepted), column_bytes(hist_count)});

  std::vector<std::int64_t> bin_leg, bin_index, bin_steps, bin_proposed, bin_accepted;
  for (const auto& entry : fold.bins.entries()) {
    bin_leg.push_back(static_cast<std::int64_t>(entry.key.a));
    bin_index.push_back(static_cast<std::int64_t>(entry.key.b));
    bin_steps.push_back(entry.value.steps);
    bin_proposed.push_back(entry.value.proposed);
    bin_accepted.push_back(entry.value.accepted);
  }
  PyObject* bin_columns =
      tuple_of({column_bytes(bin_leg), column_bytes(bin_index), column_bytes(bin_steps),
                column_bytes(bin_proposed), column_bytes(bin_accepted)});

  PyObject* files = Py_BuildValue("(LLL)", static_cast<long long>(fold.lines),
                                  static_cast<long long>(fold.attributed),
                                  static_cast<long long>(fold.unattributed));
  return tuple_of({files, writer_names, request_columns, hist_columns, bin_columns});
}

const char kDoc[] =
    "fold_layout_file(path, starts, ends, bins_per_leg[, block[, bytes_per_thread]])\n"
    "    -> tuple | None\n\n"
    "Fold a step log in the writers' exact layout over leg windows [starts[i], ends[i]]\n"
    "(nanoseconds, closed). Returns ((lines, attributed, unattributed), writer ids,\n"
    "requests, histogram, bins), the last three tuples of columns, each the bytes of\n"
    "64-bit integers (legs as positions in starts/ends, len(starts) when a line is\n"
    "unattributed; writers as indices into the writer ids), or None when the file needs\n"
    "the general readers. The file is\n"
    "read `block` bytes at a time (default 4 MiB; a longer line declines), on one thread per\n"
    "`bytes_per_thread` bytes (default 64 MiB) up to the number of cores.";

PyObject* fold_layout_file(PyObject*, PyObject* args) {
  PyObject* path_bytes = nullptr;
  PyObject* starts_arg;
  PyObject* ends_arg;
  long long bins_per_leg;
  Py_ssize_t block = kDefaultBlock;
  Py_ssize_t bytes_per_thread = kDefaultBytesPerThread;
  if (!PyArg_ParseTuple(args, "O&OOL|nn:fold_layout_file", PyUnicode_FSConverter, &path_bytes,
                        &starts_arg, &ends_arg, &bins_per_leg, &block, &bytes_per_thread)) {
    return nullptr;
  }
  if (block < 1 || bytes_per_thread < 1) {
    Py_DECREF(path_bytes);
    PyErr_SetString(PyExc_ValueError, "block and bytes_per_thread must be positive");
    return nullptr;
  }
  Reading reading{static_cast<std::size_t>(block), static_cast<off_t>(bytes_per_thread)};
  std::vector<std::int64_t> starts, ends;
  bool read = read_int64s(starts_arg, starts) && read_int64s(ends_arg, ends);
  if (!read) {
    Py_DECREF(path_bytes);
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();  // a window beyond 64 bits: not the common case
      Py_RETURN_NONE;
    }
    return nullptr;
  }
  if (starts.size() != ends.size()) {
    Py_DECREF(path_bytes);
    PyErr_SetString(PyExc_ValueError, "starts and ends differ in length");
    return nullptr;
  }
  if (bins_per_leg < 1) {
    Py_DECREF(path_bytes);
    PyErr_SetString(PyExc_ValueError, "bins_per_leg must be at least 1");
    return nullptr;
  }
  std::vector<Window> windows;
  bool usable = !starts.empty();
  for (std::size_t i = 0; usable && i < starts.size(); ++i) {
    std::int64_t span, scaled;
    usable = ends[i] >= starts[i] && !__builtin_sub_overflow(ends[i], starts[i], &span) &&
             !__builtin_add_overflow(span, std::int64_t{1}, &span) &&
             !__builtin_mul_overflow(span, static_cast<std::int64_t>(bins_per_leg), &scaled);
    if (usable) windows.push_back(Window{starts[i], ends[i], span, static_cast<std::int64_t>(i)});
  }
  std::sort(windows.begin(), windows.end(),
            [](const Window& x, const Window& y) { return x.start < y.start; });
  for (std::size_t i = 1; usable && i < windows.size(); ++i) {
    usable = windows[i - 1].end < windows[i].start;  // overlapping windows: labels decide
  }
  if (!usable) {
    Py_DECREF(path_bytes);
    Py_RETURN_NONE;
  }

  Fold fold;
  bool folded = false;
  bool out_of_memory = false;
  const char* path = PyBytes_AS_STRING(path_bytes);
  Py_BEGIN_ALLOW_THREADS;
  try {
    folded = fold_file(path, windows, bins_per_leg, reading, fold);
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
  } catch (const std::system_error&) {
    folded = false;  // no thread could be started: the general readers will do
  }
  Py_END_ALLOW_THREADS;
  Py_DECREF(path_bytes);
  if (out_of_memory) return PyErr_NoMemory();
  if (!folded) Py_RETURN_NONE;
  return build_result(fold, static_cast<std::int64_t>(windows.size()));
}

PyMethodDef kMethods[] = {
    {"fold_layout_file", fold_layout_file, METH_VARARGS, kDoc},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "fold._native",
    "Native fold of step logs in the writers' exact layout (see fold.native).",
    -1,
    kMethods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&kModule); }
