// .npy: NumPy's single-array file (numpy/lib/format.py), our exchange format for embeddings and
// labels (`dml embed` writes them, `dml metrics` reads them).
//
// File layout:
//   "\x93NUMPY"  major  minor                        magic and version: 1.0, 2.0 or 3.0
//   header length: u16 little-endian (1.0) or u32 little-endian (2.0, 3.0)
//   header: a Python dict literal, e.g.
//       {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//     padded with spaces and a final '\n' so the data starts at a multiple of 64 bytes
//   data: numel * itemsize bytes, C (row-major) order, byte order as `descr` says.
//
// Supported descr: '<f4' '<f8' '<i8' '<i4' and '|u1' (also written '<u1'). Big-endian data,
// fortran_order True, structured dtypes and trailing bytes after the data are errors, each an
// engine::Error naming the file. Writing is atomic (temp file, fsync, rename), version 1.0 when
// the header fits (2.0 otherwise), with the header NumPy itself writes for the same array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace engine {

namespace detail {
class AtomicFileWriter;  // engine/io/file_io.h
}

enum class NpyDType { F32, F64, I64, I32, U8 };

const char* npy_descr(NpyDType dtype);  // "<f4", "<f8", "<i8", "<i4", "|u1"
std::size_t npy_dtype_size(NpyDType dtype);

struct NpyArray {
  NpyDType dtype = NpyDType::F32;
  Shape shape;                 // () = rank-0 scalar (one element)
  std::vector<uint8_t> bytes;  // numel * itemsize bytes, little-endian, C order
};

// ---- raw level ----
NpyArray parse_npy(const uint8_t* data, std::size_t size, const std::string& name_for_errors);
NpyArray read_npy(const std::string& path);
std::vector<uint8_t> serialize_npy(const NpyArray& array);  // the exact bytes write_npy writes
void write_npy(const std::string& path, const NpyArray& array);

// Writes one array whose shape is known up front block by block along the first dimension, in
// order, without holding it all (`dml attack --save-adversarial` streams every adversarial image of
// a split this way). Atomic like write_npy: the file appears, complete, only when finish() has
// checked that exactly shape[0] rows arrived; destroying the writer earlier leaves no file.
class NpyRowWriter {
 public:
  // dtype f32, f64 or i64 (stored <f4, <f8, <i8); shape has at least one dimension.
  NpyRowWriter(const std::string& path, DType dtype, Shape shape);
  ~NpyRowWriter();
  NpyRowWriter(const NpyRowWriter&) = delete;
  NpyRowWriter& operator=(const NpyRowWriter&) = delete;

  // rows: [k, shape[1], ...] of the writer's dtype (any device; copied to the host). Throws, naming
  // the file, on a wrong dtype or row shape, or when the rows would exceed shape[0].
  void append(const Tensor& rows);
  void finish();
  int64_t rows_written() const { return rows_written_; }

 private:
  std::string path_;
  DType dtype_;
  Shape shape_;
  int64_t rows_written_ = 0;
  std::unique_ptr<detail::AtomicFileWriter> writer_;
};

// ---- Tensor level ----
// <f4 -> f32, <f8 -> f64, <i8 and <i4 -> i64, u1 -> i64 (integers stay integers; convert
// explicitly with .to(DType::F32) where pixel values are wanted). A CPU tensor.
Tensor load_npy(const std::string& path);
// f32 -> <f4, f64 -> <f8, i64 -> <i8; CUDA tensors copied to the host, views made contiguous.
void save_npy(const std::string& path, const Tensor& tensor);

}  // namespace engine
