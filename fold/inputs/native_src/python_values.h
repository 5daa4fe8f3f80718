// Python values to and from the extension's C++: integer sequences, segment labels, lists of
// str, dicts of new references. Part of fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_PYTHON_VALUES_H_
#define FOLD_NATIVE_PYTHON_VALUES_H_

#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fold_pass.h"
#include "request_keys.h"

namespace fold_native {

// A 1-D buffer of 8-byte signed integers (numpy's int64, as polars hands a column over) is
// copied as it is: a list of 10^6 Python ints costs 8 MB of pointers (40 past the small ints
// CPython caches) and a conversion per item.
// False for anything else, read as a sequence of Python integers instead.
inline bool read_int64_buffer(PyObject* object, std::vector<std::int64_t>& out) {
  if (!PyObject_CheckBuffer(object)) return false;
  Py_buffer view;
  if (PyObject_GetBuffer(object, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    PyErr_Clear();  // a strided view, say: read item by item
    return false;
  }
  const char* format = view.format == nullptr ? "B" : view.format;
  // '@' and '=' are native order; '<' only where the host is little-endian (Python's macro).
  while (*format == '@' || *format == '=' || (*format == '<' && PY_LITTLE_ENDIAN)) ++format;
  bool int64s = view.ndim == 1 && view.itemsize == 8 && format[0] != '\0' &&
                format[1] == '\0' && (format[0] == 'l' || format[0] == 'q');
  if (int64s) {
    auto count = static_cast<std::size_t>(view.shape[0]);
    out.resize(count);
    if (count != 0) std::memcpy(out.data(), view.buf, count * sizeof(std::int64_t));
  }
  PyBuffer_Release(&view);
  return int64s;
}

inline bool read_int64s(PyObject* sequence, std::vector<std::int64_t>& out) {
  if (read_int64_buffer(sequence, out)) return true;
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

// Segment labels: a sequence of (segment, label as str, leg).
inline bool read_segment_labels(PyObject* sequence, Legs& legs) {
  PyObject* fast = PySequence_Fast(sequence, "expected a sequence of (segment, label, leg)");
  if (fast == nullptr) return false;
  legs.segment_labels.assign(legs.segment_leg.size(), {});
  Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < count; ++i) {
    long long segment, leg;
    const char* label;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "Ls#L", &segment, &label, &length,
                          &leg)) {
      Py_DECREF(fast);
      return false;
    }
    if (segment < 0 || static_cast<std::size_t>(segment) >= legs.segment_labels.size()) {
      Py_DECREF(fast);
      PyErr_SetString(PyExc_ValueError, "segment out of range");
      return false;
    }
    legs.segment_labels[static_cast<std::size_t>(segment)].emplace_back(
        std::string(label, static_cast<std::size_t>(length)), leg);
  }
  Py_DECREF(fast);
  return true;
}

// Requests named by columns (writer as int64 bits of its 64-bit id, seq as int64 bits, sid: a
// sequence of str or None, leg), into `keys` in their order.
inline bool read_request_keys(PyObject* writer, PyObject* seq, PyObject* sid, PyObject* leg,
                              RequestKeys& keys) {
  std::vector<std::int64_t> writers, seqs, legs;
  if (!read_int64s(writer, writers) || !read_int64s(seq, seqs) || !read_int64s(leg, legs)) {
    return false;
  }
  PyObject* fast = PySequence_Fast(sid, "expected a sequence of str or None");
  if (fast == nullptr) return false;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
  if (static_cast<std::size_t>(count) != writers.size() || seqs.size() != writers.size() ||
      legs.size() != writers.size()) {
    Py_DECREF(fast);
    PyErr_SetString(PyExc_ValueError, "request key columns of different lengths");
    return false;
  }
  std::string id;
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(fast, i);
    const std::string* sid_of = nullptr;
    if (item != Py_None) {
      Py_ssize_t length;
      const char* text = PyUnicode_AsUTF8AndSize(item, &length);
      if (text == nullptr) {
        Py_DECREF(fast);
        return false;
      }
      id.assign(text, static_cast<std::size_t>(length));
      sid_of = &id;
    }
    auto at = static_cast<std::size_t>(i);
    keys.add(static_cast<std::uint64_t>(writers[at]), static_cast<std::uint64_t>(seqs[at]),
             sid_of, legs[at]);
  }
  Py_DECREF(fast);
  if (keys.size() != writers.size()) {
    PyErr_SetString(PyExc_ValueError, "a request named twice");
    return false;
  }
  return true;
}

// Seeds: a tuple (w, seq, sid, leg, last_t, last_packed, emitted_before, bucket, unordered).
inline bool read_seeds(PyObject* tuple, Seeds& seeds) {
  PyObject *w, *seq, *sid, *leg, *last_t, *last_packed, *emitted_before, *bucket, *unordered;
  if (!PyArg_ParseTuple(tuple, "OOOOOOOOO:seeds", &w, &seq, &sid, &leg, &last_t, &last_packed,
                        &emitted_before, &bucket, &unordered)) {
    return false;
  }
  if (!read_request_keys(w, seq, sid, leg, seeds.keys) || !read_int64s(last_t, seeds.last_t) ||
      !read_int64s(last_packed, seeds.last_packed) ||
      !read_int64s(emitted_before, seeds.emitted_before) || !read_int64s(bucket, seeds.bucket) ||
      !read_int64s(unordered, seeds.unordered)) {
    return false;
  }
  std::size_t count = seeds.keys.size();
  for (auto* column : {&seeds.last_t, &seeds.last_packed, &seeds.emitted_before, &seeds.bucket,
                       &seeds.unordered}) {
    if (column->size() != count) {
      PyErr_SetString(PyExc_ValueError, "seed columns of different lengths");
      return false;
    }
  }
  return true;
}

inline PyObject* string_list(const std::vector<std::string>& items) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(items.size()));
  for (std::size_t i = 0; list != nullptr && i < items.size(); ++i) {
    PyObject* item = PyUnicode_DecodeUTF8(items[i].data(), static_cast<Py_ssize_t>(items[i].size()),
                                          "strict");
    if (item == nullptr) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

// A dict of new references, or nullptr (dropping them all) when any is nullptr.
inline PyObject* dict_of(std::vector<std::pair<const char*, PyObject*>> items) {
  bool ok = std::all_of(items.begin(), items.end(), [](const auto& item) { return item.second; });
  PyObject* dict = ok ? PyDict_New() : nullptr;
  for (auto& [name, value] : items) {
    if (dict != nullptr && PyDict_SetItemString(dict, name, value) != 0) Py_CLEAR(dict);
    Py_XDECREF(value);
  }
  return dict;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_PYTHON_VALUES_H_
