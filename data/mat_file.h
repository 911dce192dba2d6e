// A reader for MATLAB Level-5 MAT-files, enough for CARS196's cars_annos.mat (a struct array
// `annotations` with char and numeric fields, and a cell array `class_names`).
//
// Format (MathWorks, "MAT-File Format", Level 5):
//   128-byte header: 116 bytes of text ("MATLAB 5.0 MAT-file, ..."), 8 bytes subsystem offset,
//   u16 version 0x0100, 2 bytes endian indicator ("IM" in a little-endian file).
//   Then data elements, each an 8-byte tag [u32 type, u32 byte count] + data padded to 8 bytes;
//   a "small" element packs [u16 count, u16 type] into the first tag word and up to 4 data
//   bytes into the second. Top-level elements are miMATRIX (14) or miCOMPRESSED (15: a zlib
//   stream holding one complete element, not padded).
//   miMATRIX = array flags (miUINT32 x2: class in the low byte, complex bit 0x800), dimensions
//   (miINT32), name (miINT8), then by class:
//     numeric (double, single, int8..uint64):  real part in any numeric element type (MATLAB
//         stores doubles as smaller integer types when they fit), optional imaginary part
//     char:    miUTF8 / miUINT8 / miUINT16 (UTF-16) code units, column-major (read as text:
//              rows joined by '\n'; an empty array, any dimension 0, is the empty text)
//     cell:    one miMATRIX per cell, column-major
//     struct:  field-name length (miINT32), field names (miINT8, null padded), then for each
//              element (column-major) one miMATRIX per field
//
// Supported: everything above in little-endian files. Not supported (clear error naming the
// file): big-endian files, sparse and object arrays, MAT v4 and v7.3 (HDF5) files. Imaginary
// parts are skipped. Every length is checked against the bytes available; nesting is limited to
// 64 levels and one decompressed element to 1 GiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace data {

struct MatArray {
  enum class Kind { Numeric, Char, Cell, Struct };

  Kind kind = Kind::Numeric;
  std::string name;                      // variable name (empty inside cells and structs)
  std::vector<int64_t> dims;             // MATLAB dimensions, at least 2
  std::vector<double> numbers;           // Numeric: real part, column-major
  std::string text;                      // Char: UTF-8; rows of a multi-row array joined by '\n'
  std::vector<std::string> field_names;  // Struct
  std::vector<MatArray> elements;        // Cell: one per cell; Struct: numel * fields, by element

  int64_t numel() const;
  bool has_field(const std::string& field) const;
  // Field `field` of struct element `index`; throws naming the variable and the fields present.
  const MatArray& field(int64_t index, const std::string& field) const;
  const MatArray& field(int64_t index, std::size_t field_position) const;
};

// Top-level variables in file order.
std::vector<MatArray> parse_mat(const uint8_t* data, std::size_t size,
                                const std::string& name_for_errors);
std::vector<MatArray> read_mat_file(const std::string& path);

}  // namespace data
