// Columns handed to polars through the Arrow C data interface (PyCapsules), without a copy.
// Part of fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_ARROW_EXPORT_H_
#define FOLD_NATIVE_ARROW_EXPORT_H_

#include <Python.h>

#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace fold_native {

// -- the Arrow C data interface ------------------------------------------------------------

struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  std::int64_t flags;
  std::int64_t n_children;
  ArrowSchema** children;
  ArrowSchema* dictionary;
  void (*release)(ArrowSchema*);
  void* private_data;
};

struct ArrowArray {
  std::int64_t length;
  std::int64_t null_count;
  std::int64_t offset;
  std::int64_t n_buffers;
  std::int64_t n_children;
  const void** buffers;
  ArrowArray** children;
  ArrowArray* dictionary;
  void (*release)(ArrowArray*);
  void* private_data;
};

constexpr std::int64_t kNullable = 2;

struct ArrowArrayStream {
  int (*get_schema)(ArrowArrayStream*, ArrowSchema* out);
  int (*get_next)(ArrowArrayStream*, ArrowArray* out);
  const char* (*get_last_error)(ArrowArrayStream*);
  void (*release)(ArrowArrayStream*);
  void* private_data;
};

// One chunk of a list column taken from Python (``__arrow_c_stream__``), read in place.
template <class T>
struct ListChunk {
  std::int64_t rows = 0;
  const std::int64_t* large_offsets = nullptr;  // "+L"
  const std::int32_t* offsets = nullptr;        // "+l"
  const T* values = nullptr;

  std::int64_t begin(std::int64_t row) const {
    return large_offsets != nullptr ? large_offsets[row] : offsets[row];
  }
};

// What a schema owns: its child (for a list) and the child's pointer array.
struct SchemaHolder {
  ArrowSchema child{};
  ArrowSchema* children[1] = {&child};
};

inline void release_schema(ArrowSchema* schema) {
  delete static_cast<SchemaHolder*>(schema->private_data);
  schema->release = nullptr;
}

inline void release_child_schema(ArrowSchema* schema) { schema->release = nullptr; }

// A vector whose elements are left uninitialized when it is sized: a column that is filled
// in place (on several threads) is not first zeroed on one.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* place) noexcept {
    ::new (static_cast<void*>(place)) U;
  }
  template <class U, class... Args>
  void construct(U* place, Args&&... args) {
    ::new (static_cast<void*>(place)) U(std::forward<Args>(args)...);
  }
};
using FilledInPlace = std::vector<std::int64_t, UninitializedAllocator<std::int64_t>>;
// The step intervals' values (step_export.h), 32 bits each.
using GapsInPlace = std::vector<std::uint32_t, UninitializedAllocator<std::uint32_t>>;

// What an array owns: its values (or offsets) and, for a list, its child array.
struct ArrayHolder {
  std::vector<std::int64_t> data;
  FilledInPlace filled;  // instead of data, for a column filled in place
  GapsInPlace gaps;      // instead of both, for 32-bit values
  const void* buffers[2] = {nullptr, nullptr};
  ArrowArray* children[1] = {nullptr};
  ArrowArray* child = nullptr;
};

inline void release_array(ArrowArray* array) {
  auto* holder = static_cast<ArrayHolder*>(array->private_data);
  if (holder->child != nullptr) {
    if (holder->child->release != nullptr) holder->child->release(holder->child);
    delete holder->child;
  }
  delete holder;
  array->release = nullptr;
}

inline void schema_capsule_destructor(PyObject* capsule) {
  auto* schema = static_cast<ArrowSchema*>(PyCapsule_GetPointer(capsule, "arrow_schema"));
  if (schema != nullptr && schema->release != nullptr) schema->release(schema);
  delete schema;
}

inline void array_capsule_destructor(PyObject* capsule) {
  auto* array = static_cast<ArrowArray*>(PyCapsule_GetPointer(capsule, "arrow_array"));
  if (array != nullptr && array->release != nullptr) array->release(array);
  delete array;
}

inline ArrowArray* primitive_array(std::vector<std::int64_t>&& values,
                                   FilledInPlace&& filled = FilledInPlace()) {
  auto* holder = new ArrayHolder;
  holder->data = std::move(values);
  holder->filled = std::move(filled);
  bool in_place = !holder->filled.empty();
  holder->buffers[1] = in_place ? holder->filled.data() : holder->data.data();
  auto* array = new ArrowArray{};
  array->length = static_cast<std::int64_t>(in_place ? holder->filled.size() : holder->data.size());
  array->n_buffers = 2;
  array->buffers = holder->buffers;
  array->release = release_array;
  array->private_data = holder;
  return array;
}

// (schema capsule, array capsule) of a 64-bit column ("l" signed, "L" unsigned), or of a
// large list of int64 ("+L") when `offsets` is given: values are then the child's.
// `filled`, when given, holds the column's (or with offsets the list's) values instead of
// `values`.
inline PyObject* arrow_column(std::vector<std::int64_t>&& values, bool is_unsigned,
                              std::vector<std::int64_t>* offsets = nullptr,
                              FilledInPlace* filled = nullptr) {
  auto* schema = new ArrowSchema{};
  schema->name = "";
  schema->flags = kNullable;
  schema->release = release_schema;
  auto* schema_holder = new SchemaHolder;
  schema->private_data = schema_holder;
  ArrowArray* array;
  if (offsets == nullptr) {
    schema->format = is_unsigned ? "L" : "l";
    array = filled != nullptr ? primitive_array(std::vector<std::int64_t>(), std::move(*filled))
                              : primitive_array(std::move(values));
  } else {
    schema->format = "+L";
    schema->n_children = 1;
    schema->children = schema_holder->children;
    schema_holder->child.format = "l";
    schema_holder->child.name = "item";
    schema_holder->child.flags = kNullable;
    schema_holder->child.release = release_child_schema;
    ArrowArray* child = filled != nullptr
                            ? primitive_array(std::vector<std::int64_t>(), std::move(*filled))
                            : primitive_array(std::move(values));
    array = primitive_array(std::move(*offsets));
    array->length -= 1;
    auto* holder = static_cast<ArrayHolder*>(array->private_data);
    holder->child = child;
    holder->children[0] = child;
    array->n_children = 1;
    array->children = holder->children;
  }
  PyObject* schema_capsule = PyCapsule_New(schema, "arrow_schema", schema_capsule_destructor);
  if (schema_capsule == nullptr) {
    schema->release(schema);
    delete schema;
    array->release(array);
    delete array;
    return nullptr;
  }
  PyObject* array_capsule = PyCapsule_New(array, "arrow_array", array_capsule_destructor);
  if (array_capsule == nullptr) {
    Py_DECREF(schema_capsule);
    array->release(array);
    delete array;
    return nullptr;
  }
  PyObject* pair = PyTuple_Pack(2, schema_capsule, array_capsule);
  Py_DECREF(schema_capsule);
  Py_DECREF(array_capsule);
  return pair;
}

// A column filled in place (its pages written where its values land, not zeroed first).
inline PyObject* arrow_column(FilledInPlace&& filled, bool is_unsigned) {
  return arrow_column(std::vector<std::int64_t>(), is_unsigned, nullptr, &filled);
}

// A large list of uint32 ("+L" of "I"): list i holds values [offsets[i], offsets[i + 1]).
inline PyObject* uint32_lists(std::vector<std::int64_t>&& offsets, GapsInPlace&& values) {
  // Built as a list of int64 over no values, then its child pointed at the 32-bit values.
  std::vector<std::int64_t> no_values;
  PyObject* pair = arrow_column(std::move(no_values), false, &offsets);
  if (pair == nullptr) return nullptr;
  auto* schema = static_cast<ArrowSchema*>(
      PyCapsule_GetPointer(PyTuple_GET_ITEM(pair, 0), "arrow_schema"));
  auto* array = static_cast<ArrowArray*>(
      PyCapsule_GetPointer(PyTuple_GET_ITEM(pair, 1), "arrow_array"));
  static_cast<SchemaHolder*>(schema->private_data)->child.format = "I";
  auto* child = static_cast<ArrayHolder*>(array->children[0]->private_data);
  child->gaps = std::move(values);
  child->buffers[1] = child->gaps.data();
  array->children[0]->length = static_cast<std::int64_t>(child->gaps.size());
  return pair;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_ARROW_EXPORT_H_
