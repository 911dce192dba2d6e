// ImageListDataset and the CUB-200-2011 / Stanford Online Products list readers (image_list.h).
// CARS196 has its own file (cars.cpp): two layouts, one of them a MATLAB file.
#include "data/image_list.h"

#include <algorithm>
#include <unordered_map>

#include "data/list_file.h"
#include "engine/io/file_io.h"
#include "kernels/common/check.h"

namespace data {

using detail::file_exists;
using detail::join_path;
using engine::fail;

namespace {

void check_split(const std::string& name, const std::string& split) {
  if (split != "train" && split != "test") {
    fail(name, ": unknown split '", split, "' (expected train or test)");
  }
}

void check_root(const std::string& name, const std::string& root, const std::string& expected) {
  if (root.empty())
    fail(name, ": a root directory is required (the folder holding ", expected, ")");
}

// "<id> <rest of the line>" -> (id, rest); the rest may not be empty.
std::pair<int64_t, std::string> id_and_rest(const std::string& line, const std::string& path,
                                            int64_t line_number, const char* what) {
  const std::size_t start = line.find_first_not_of(" \t");
  const std::size_t space = line.find_first_of(" \t", start);
  const std::size_t rest =
      space == std::string::npos ? space : line.find_first_not_of(" \t", space);
  if (start == std::string::npos || rest == std::string::npos) {
    fail(path, ":", line_number, ": expected '<image_id> <", what, ">', got '", line, "'");
  }
  const int64_t id =
      detail::parse_int(line.substr(start, space - start), path, line_number, "image_id");
  std::string value = line.substr(rest);
  value.erase(value.find_last_not_of(" \t") + 1);
  return {id, value};
}

}  // namespace

ImageList read_cub_list(const std::string& root, const std::string& split) {
  check_split("cub200", split);
  check_root("cub200", root, "CUB_200_2011/images.txt");
  std::string dir = root;
  if (!file_exists(join_path(dir, "images.txt")) &&
      file_exists(join_path(join_path(root, "CUB_200_2011"), "images.txt"))) {
    dir = join_path(root, "CUB_200_2011");
  }
  const std::string images =
      engine::detail::read_whole_file(join_path(dir, "images.txt"), "CUB image list");
  const std::string labels = engine::detail::read_whole_file(
      join_path(dir, "image_class_labels.txt"), "CUB class label list");
  return parse_cub_lists(dir, split, images, labels);
}

ImageList parse_cub_lists(const std::string& dir, const std::string& split,
                          std::string_view images_txt, std::string_view image_class_labels_txt) {
  check_split("cub200", split);
  const std::string images_path = join_path(dir, "images.txt");
  const std::string labels_path = join_path(dir, "image_class_labels.txt");
  const std::vector<std::string> image_lines = detail::split_lines(images_txt);
  const std::vector<std::string> label_lines = detail::split_lines(image_class_labels_txt);

  std::unordered_map<int64_t, int64_t> class_of;
  for (std::size_t i = 0; i < label_lines.size(); ++i) {
    if (detail::is_blank(label_lines[i])) continue;
    const int64_t line = static_cast<int64_t>(i) + 1;
    const std::vector<std::string> fields = detail::split_fields(label_lines[i], ' ');
    if (fields.size() != 2) {
      fail(labels_path, ":", line, ": expected '<image_id> <class_id>', got '", label_lines[i],
           "'");
    }
    const int64_t id = detail::parse_int(fields[0], labels_path, line, "image_id");
    const int64_t cls = detail::parse_int(fields[1], labels_path, line, "class_id");
    if (cls < 1 || cls > 200) fail(labels_path, ":", line, ": class_id ", cls, " is not in 1..200");
    if (!class_of.emplace(id, cls).second) {
      fail(labels_path, ":", line, ": image_id ", id, " listed twice");
    }
  }
  // Zero-shot split: the first 100 classes train, the other 100 test.
  const int64_t lo = split == "train" ? 1 : 101, hi = split == "train" ? 100 : 200;
  ImageList list;
  std::unordered_map<int64_t, int64_t> seen;
  for (std::size_t i = 0; i < image_lines.size(); ++i) {
    if (detail::is_blank(image_lines[i])) continue;
    const int64_t line = static_cast<int64_t>(i) + 1;
    const auto [id, path] = id_and_rest(image_lines[i], images_path, line, "path");
    if (!seen.emplace(id, line).second)
      fail(images_path, ":", line, ": image_id ", id, " listed twice");
    const auto found = class_of.find(id);
    if (found == class_of.end()) {
      fail(labels_path, ": no class for image_id ", id, " (", images_path, " line ", line, ")");
    }
    if (found->second < lo || found->second > hi) continue;
    list.paths.push_back(join_path(join_path(dir, "images"), path));
    list.class_ids.push_back(found->second);
  }
  return list;
}

ImageList read_sop_list(const std::string& root, const std::string& split) {
  check_split("sop", split);
  check_root("sop", root, "Stanford_Online_Products/Ebay_train.txt");
  const std::string file = split == "train" ? "Ebay_train.txt" : "Ebay_test.txt";
  // The data set folder (image paths are relative to it) and where its lists are.
  std::string dir = root;
  if (!file_exists(join_path(dir, file)) &&
      !file_exists(join_path(join_path(dir, "Info_Files"), file)) &&
      detail::directory_exists(join_path(root, "Stanford_Online_Products"))) {
    dir = join_path(root, "Stanford_Online_Products");
  }
  std::string list_path = join_path(dir, file);
  std::string image_dir = dir;
  if (!file_exists(list_path) && file_exists(join_path(join_path(dir, "Info_Files"), file))) {
    list_path = join_path(join_path(dir, "Info_Files"), file);
    // The "Revisiting DML" repackaging (Roth et al., which MDProp's code reads) keeps the lists in
    // Info_Files/ and the class folders under images/.
    if (detail::directory_exists(join_path(dir, "images"))) image_dir = join_path(dir, "images");
  }
  return parse_sop_list(engine::detail::read_whole_file(list_path, "SOP " + split + " list"),
                        list_path, image_dir);
}

ImageList parse_sop_list(std::string_view text, const std::string& list_path,
                         const std::string& image_dir) {
  const std::vector<std::string> lines = detail::split_lines(text);
  ImageList list;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (detail::is_blank(lines[i])) continue;
    const int64_t line = static_cast<int64_t>(i) + 1;
    const std::vector<std::string> fields = detail::split_fields(lines[i], ' ');
    if (list.paths.empty() && !fields.empty() && fields[0] == "image_id") continue;  // header
    if (fields.size() != 4) {
      fail(list_path, ":", line, ": expected 'image_id class_id super_class_id path', got '",
           lines[i], "'");
    }
    (void)detail::parse_int(fields[0], list_path, line, "image_id");
    const int64_t cls = detail::parse_int(fields[1], list_path, line, "class_id");
    (void)detail::parse_int(fields[2], list_path, line, "super_class_id");
    if (cls < 1) fail(list_path, ":", line, ": class_id ", cls, " is not positive");
    list.paths.push_back(join_path(image_dir, fields[3]));
    list.class_ids.push_back(cls);
  }
  return list;
}

SplitSummary summarize_list(const ImageList& list, const std::string& split) {
  std::vector<int64_t> ids = list.class_ids;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  SplitSummary summary;
  summary.split = split;
  summary.size = static_cast<int64_t>(list.paths.size());
  summary.num_classes = static_cast<int64_t>(ids.size());
  summary.first_class_id = ids.empty() ? 0 : ids.front();
  summary.last_class_id = ids.empty() ? 0 : ids.back();
  return summary;
}

ImageListDataset::ImageListDataset(std::string name, std::string split, ImageList list,
                                   ImageTransform transform)
    : name_(std::move(name)),
      split_(std::move(split)),
      paths_(std::move(list.paths)),
      transform_(transform) {
  ENGINE_CHECK(paths_.size() == list.class_ids.size(), name_, " ", split_, ": ", paths_.size(),
               " paths but ", list.class_ids.size(), " class ids");
  ENGINE_CHECK(!paths_.empty(), name_, " ", split_, ": the split has no images");
  ENGINE_CHECK(transform_.crop > 0, name_, ": crop size must be positive");
  class_ids_ = list.class_ids;
  std::sort(class_ids_.begin(), class_ids_.end());
  class_ids_.erase(std::unique(class_ids_.begin(), class_ids_.end()), class_ids_.end());
  labels_.reserve(paths_.size());
  for (int64_t id : list.class_ids) {
    labels_.push_back(std::lower_bound(class_ids_.begin(), class_ids_.end(), id) -
                      class_ids_.begin());
  }
}

int64_t ImageListDataset::label(int64_t index) const {
  ENGINE_CHECK(index >= 0 && index < size(), name_, " ", split_, ": index ", index,
               " out of range [0, ", size(), ")");
  return labels_[static_cast<std::size_t>(index)];
}

const std::string& ImageListDataset::path(int64_t index) const {
  ENGINE_CHECK(index >= 0 && index < size(), name_, " ", split_, ": index ", index,
               " out of range [0, ", size(), ")");
  return paths_[static_cast<std::size_t>(index)];
}

int64_t ImageListDataset::class_id(int64_t label_index) const {
  ENGINE_CHECK(label_index >= 0 && label_index < num_classes(), name_, ": label ", label_index,
               " out of range [0, ", num_classes(), ")");
  return class_ids_[static_cast<std::size_t>(label_index)];
}

engine::Tensor ImageListDataset::image(int64_t index, engine::Generator& gen) const {
  return transform_.apply(decode_image(path(index)), gen);
}

engine::Shape ImageListDataset::image_shape() const {
  return {3, transform_.crop, transform_.crop};
}

std::unique_ptr<ImageListDataset> open_image_list_dataset(const std::string& name,
                                                          const std::string& split,
                                                          const std::string& root, bool augment,
                                                          TransformRecipe recipe) {
  ImageList list;
  if (name == "cub200") {
    list = read_cub_list(root, split);
  } else if (name == "cars196") {
    list = read_cars_list(root, split);
  } else if (name == "sop") {
    list = read_sop_list(root, split);
  } else {
    fail("unknown image data set '", name, "' (expected cub200, cars196 or sop)");
  }
  if (list.paths.empty()) {
    fail(name, " ", split, ": the lists under ", root, " hold no image of the split's classes");
  }
  ImageTransform transform;
  transform.train = augment;
  transform.recipe = recipe;
  return std::make_unique<ImageListDataset>(name, split, std::move(list), transform);
}

}  // namespace data
