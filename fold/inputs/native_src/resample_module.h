// The bootstrap's Python side (fold.folding.native.resample_sums): numpy's buffers read in
// place, the draws and sums of resample.h run without the GIL. Part of fold/_native.cc, its
// only includer.

#ifndef FOLD_NATIVE_RESAMPLE_MODULE_H_
#define FOLD_NATIVE_RESAMPLE_MODULE_H_

#include <Python.h>

#include <cstdint>
#include <cstring>

#include "resample.h"

namespace fold_native {

inline constexpr char kResampleDoc[] =
    "resample_sums(values, key, first_row, out) -> None\n\n"
    "The bootstrap's stage-2 resamples of one leg: values a C-contiguous int64 buffer of shape\n"
    "(requests, columns), key the leg's stream, out an int64 buffer (rows, columns) filled with\n"
    "resamples first_row ... first_row + rows - 1, each row every column's sum over the\n"
    "requests drawn for it (fold.folding.uncertainty.request_draws gives the same draws).";

// A read-only or writable view of a C-contiguous 2-D buffer of 8-byte integers.
inline bool int64_matrix(PyObject* object, Py_buffer& view, bool writable, const char* name) {
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(object, &view, flags) != 0) return false;
  // Integers only ('l' or 'q', signed or not): a float buffer must not be read as integers.
  const char* format = view.format == nullptr ? "B" : view.format;
  // '@' and '=' are native order; '<' only where the host is little-endian (Python's macro).
  while (*format == '@' || *format == '=' || (*format == '<' && PY_LITTLE_ENDIAN)) ++format;
  bool integers = format[0] != '\0' && format[1] == '\0' && std::strchr("lLqQ", format[0]);
  if (view.ndim != 2 || view.itemsize != 8 || !integers) {
    PyErr_Format(PyExc_ValueError, "resample_sums: %s must be 2-D with 8-byte integers", name);
    PyBuffer_Release(&view);
    return false;
  }
  return true;
}

inline PyObject* resample_sums_py(PyObject*, PyObject* args) {
  PyObject *values_object, *out_object;
  unsigned long long key, first_row;
  if (!PyArg_ParseTuple(args, "OKKO:resample_sums", &values_object, &key, &first_row,
                        &out_object)) {
    return nullptr;
  }
  Py_buffer values, out;
  if (!int64_matrix(values_object, values, false, "values")) return nullptr;
  if (!int64_matrix(out_object, out, true, "out")) {
    PyBuffer_Release(&values);
    return nullptr;
  }
  auto requests = static_cast<std::uint64_t>(values.shape[0]);
  auto columns = static_cast<std::size_t>(values.shape[1]);
  auto rows = static_cast<std::size_t>(out.shape[0]);
  bool shapes = static_cast<std::size_t>(out.shape[1]) == columns;
  bool ok = false;
  if (shapes) {
    Py_BEGIN_ALLOW_THREADS;
    ok = resample_sums(static_cast<const std::int64_t*>(values.buf), requests, columns, key,
                       first_row, rows, static_cast<std::uint64_t*>(out.buf));
    Py_END_ALLOW_THREADS;
  }
  PyBuffer_Release(&values);
  PyBuffer_Release(&out);
  if (!ok) {
    PyErr_SetString(PyExc_ValueError,
                    shapes ? "resample_sums: 1 to 16 columns and 1 to 2^32 - 1 requests"
                           : "resample_sums: values and out differ in columns");
    return nullptr;
  }
  Py_RETURN_NONE;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_RESAMPLE_MODULE_H_
