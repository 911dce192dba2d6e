// CARS196 list reader: the original cars_annos.mat layout and the CSV re-packaging (the layouts
// are described in image_list.h). Zero-shot split: classes 1..98 train, 99..196 test.
#include <filesystem>
#include <map>

#include "data/image_list.h"
#include "data/list_file.h"
#include "data/mat_file.h"
#include "engine/io/file_io.h"
#include "kernels/common/check.h"

namespace data {

using detail::file_exists;
using detail::join_path;
using engine::fail;

namespace {

bool in_split(int64_t class_id, const std::string& split) {
  return split == "train" ? class_id <= 98 : class_id >= 99;
}

ImageList read_cars_mat(const std::string& root, const std::string& split) {
  const std::string mat_path = join_path(root, "cars_annos.mat");
  const std::vector<MatArray> variables = read_mat_file(mat_path);
  const MatArray* annotations = nullptr;
  for (const MatArray& v : variables) {
    if (v.name == "annotations") annotations = &v;
  }
  if (annotations == nullptr || annotations->kind != MatArray::Kind::Struct) {
    fail(mat_path, ": no struct array variable 'annotations'");
  }
  // The field names are relative_im_path, bbox_x1, bbox_y1, bbox_x2, bbox_y2, class, test;
  // robrank reads them by position (0 = path, 5 = class), which we fall back to.
  std::size_t path_field = 0, class_field = 5;
  const bool by_name =
      annotations->has_field("relative_im_path") && annotations->has_field("class");
  if (!by_name && annotations->field_names.size() != 7) {
    (void)annotations->field(0, "relative_im_path");  // throws, listing the fields present
  }
  for (std::size_t f = 0; by_name && f < annotations->field_names.size(); ++f) {
    if (annotations->field_names[f] == "relative_im_path") path_field = f;
    if (annotations->field_names[f] == "class") class_field = f;
  }
  ImageList list;
  for (int64_t i = 0; i < annotations->numel(); ++i) {
    const MatArray& path = annotations->field(i, path_field);
    const MatArray& cls = annotations->field(i, class_field);
    if (path.kind != MatArray::Kind::Char || path.text.empty()) {
      fail(mat_path, ": annotations(", i + 1, ").", annotations->field_names[path_field],
           " is not a file name");
    }
    if (cls.kind != MatArray::Kind::Numeric || cls.numbers.size() != 1) {
      fail(mat_path, ": annotations(", i + 1, ").", annotations->field_names[class_field],
           " is not a number");
    }
    const double value = cls.numbers[0];
    if (!(value >= 1 && value <= 196) ||
        value != static_cast<double>(static_cast<int64_t>(value))) {
      fail(mat_path, ": annotations(", i + 1, ") has class ", value, ", expected 1..196");
    }
    const int64_t class_id = static_cast<int64_t>(value);
    if (!in_split(class_id, split)) continue;
    list.paths.push_back(join_path(root, path.text));
    list.class_ids.push_back(class_id);
  }
  return list;
}

// File name -> full path of every file under `dir` (the images of one CSV split).
std::map<std::string, std::string> index_images(const std::string& dir) {
  if (!detail::directory_exists(dir))
    fail(dir, ": image folder of the CARS196 CSV layout is missing");
  std::map<std::string, std::string> index;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string name = it->path().filename().string();
    const auto [where, added] = index.emplace(name, it->path().string());
    if (!added) {
      fail(dir, ": image file name ", name, " is ambiguous (", where->second, " and ",
           it->path().string(), ")");
    }
  }
  if (ec) fail(dir, ": cannot list the image folder: ", ec.message());
  return index;
}

ImageList read_cars_csv(const std::string& root, const std::string& split) {
  ImageList list;
  // PML pools both CSV files and then splits by class; so do we.
  for (const std::string part : {"train", "test"}) {
    const std::string csv = join_path(root, "anno_" + part + ".csv");
    const std::vector<CarsCsvEntry> entries =
        parse_cars_csv(engine::detail::read_whole_file(csv, "CARS196 annotation list"), csv);
    const std::string image_dir =
        join_path(join_path(join_path(root, "car_data"), "car_data"), part);
    std::map<std::string, std::string> images;
    bool indexed = false;
    for (const CarsCsvEntry& entry : entries) {
      if (!in_split(entry.class_id, split)) continue;
      if (!indexed) {  // list the folder only when this CSV contributes to the split
        images = index_images(image_dir);
        indexed = true;
      }
      const auto found = images.find(entry.file);
      if (found == images.end()) {
        fail(csv, ":", entry.line, ": image ", entry.file, " not found under ", image_dir);
      }
      list.paths.push_back(found->second);
      list.class_ids.push_back(entry.class_id);
    }
  }
  return list;
}

}  // namespace

std::vector<CarsCsvEntry> parse_cars_csv(std::string_view text, const std::string& csv) {
  const std::vector<std::string> lines = detail::split_lines(text);
  std::vector<CarsCsvEntry> entries;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (detail::is_blank(lines[i])) continue;
    const int64_t line = static_cast<int64_t>(i) + 1;
    const std::vector<std::string> fields = detail::split_fields(lines[i], ',');
    if (fields.size() != 6) {
      fail(csv, ":", line, ": expected 'file,x1,y1,x2,y2,class', got '", lines[i], "'");
    }
    const int64_t class_id = detail::parse_int(fields[5], csv, line, "class");
    if (class_id < 1 || class_id > 196) {
      fail(csv, ":", line, ": class ", class_id, " is not in 1..196");
    }
    entries.push_back({fields[0], class_id, line});
  }
  return entries;
}

ImageList read_cars_list(const std::string& root, const std::string& split) {
  if (split != "train" && split != "test") {
    fail("cars196: unknown split '", split, "' (expected train or test)");
  }
  if (root.empty()) {
    fail(
        "cars196: a root directory is required (the folder holding cars_annos.mat or "
        "anno_train.csv)");
  }
  if (file_exists(join_path(root, "cars_annos.mat"))) return read_cars_mat(root, split);
  if (file_exists(join_path(root, "anno_train.csv"))) return read_cars_csv(root, split);
  fail("cars196: cannot find ", join_path(root, "cars_annos.mat"), " (original layout) or ",
       join_path(root, "anno_train.csv"), " (CSV re-packaging)");
}

}  // namespace data
