// Image-folder data sets (CUB-200-2011, CARS196, Stanford Online Products) as lists of
// (image file, class id) read from each data set's own split files, with the zero-shot splits
// of deep metric learning (docs/architecture.md; research/ecosystem.md §6.4):
//
//   cub200   <root>[/CUB_200_2011]/images.txt               "<image_id> <path under images/>"
//                                 /image_class_labels.txt   "<image_id> <class_id 1..200>"
//            train = classes 1..100, test = classes 101..200 (train_test_split.txt is not used).
//   cars196  original layout: <root>/cars_annos.mat, struct array `annotations` with fields
//            relative_im_path (e.g. "car_ims/000001.jpg", relative to <root>) and class (1..196)
//            (by name; if those names are absent and the struct has 7 fields, robrank's field
//            positions 0 and 5 are used); the `test` flag is ignored.
//            CSV re-packaging (Kaggle "stanford-car-dataset-by-classes-folder", which
//            pytorch-metric-learning downloads): <root>/anno_train.csv and anno_test.csv, lines
//            "<file name>,x1,y1,x2,y2,<class_id>" without a header; images under
//            <root>/car_data/car_data/{train,test}/, in class folders or flat — found by file name
//            within the split's folder. Both CSV files are pooled, as PML does.
//            train = classes 1..98, test = classes 99..196.
//   sop      <root>[/Stanford_Online_Products][/Info_Files]/Ebay_{train,test}.txt with a header
//            line "image_id class_id super_class_id path"; paths relative to the data set folder
//            (the one holding Ebay_*.txt, or its parent for Info_Files/; with Info_Files/, its
//            images/ folder when there is one, the "Revisiting DML" layout). train and test are
//            the two files (11,318 / 11,316 classes).
//
// Labels are the class ids of the split remapped to 0, 1, ... in increasing id order (for the
// full data sets: id - first id, e.g. CUB test 101..200 -> 0..99). Images are decoded when asked
// for, so opening a data set does not touch the image files (except the CARS CSV layout, which
// lists the image folders once to find the files).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"

namespace data {

struct ImageList {
  std::vector<std::string> paths;  // full paths of the split's images, in list-file order
  std::vector<int64_t> class_ids;  // the data set's own class id of each image
};

ImageList read_cub_list(const std::string& root, const std::string& split);
ImageList read_cars_list(const std::string& root, const std::string& split);
ImageList read_sop_list(const std::string& root, const std::string& split);

// The rules of the list files, on their text: the readers above find and read the files and
// call these, and tests/fuzz/fuzz_list_file.cpp hands them any bytes. Anything malformed throws
// engine::Error naming the file (the path given) and the line.
//
// CUB: `dir` is the folder of images.txt and image_class_labels.txt (their paths in errors, and
// the images under <dir>/images); the split's images in images.txt order.
ImageList parse_cub_lists(const std::string& dir, const std::string& split,
                          std::string_view images_txt, std::string_view image_class_labels_txt);
// SOP: one of Ebay_{train,test}.txt (`list_path`), its image paths relative to `image_dir`.
ImageList parse_sop_list(std::string_view text, const std::string& list_path,
                         const std::string& image_dir);
// CARS196's CSV re-packaging: one anno_{train,test}.csv (`csv`), every line's image file name
// (found later under the split's image folder) and class id 1..196, of either split.
struct CarsCsvEntry {
  std::string file;
  int64_t class_id = 0;
  int64_t line = 0;  // 1-based, for errors
};
std::vector<CarsCsvEntry> parse_cars_csv(std::string_view text, const std::string& csv);

// A split summary (size, class count, id range) of a list, without decoding any image.
SplitSummary summarize_list(const ImageList& list, const std::string& split);

class ImageListDataset : public Dataset {
 public:
  ImageListDataset(std::string name, std::string split, ImageList list, ImageTransform transform);

  std::string name() const override { return name_; }
  std::string split() const override { return split_; }
  int64_t size() const override { return static_cast<int64_t>(paths_.size()); }
  int64_t num_classes() const override { return static_cast<int64_t>(class_ids_.size()); }
  int64_t label(int64_t index) const override;
  // Decodes the file and applies the split's transform (random draws from `gen` for train).
  engine::Tensor image(int64_t index, engine::Generator& gen) const override;
  engine::Shape image_shape() const override;

  const std::string& path(int64_t index) const;
  int64_t class_id(int64_t label_index) const;  // the data set's own id of a label
  const ImageTransform& transform() const { return transform_; }

 private:
  std::string name_, split_;
  std::vector<std::string> paths_;
  std::vector<int64_t> labels_;
  std::vector<int64_t> class_ids_;  // sorted; label l <-> class_ids_[l]
  ImageTransform transform_;
};

// name: "cub200", "cars196" or "sop"; split: "train" or "test"; augment: the recipe's training
// transform or its evaluation one (center crop, either split). Throws naming the missing file or
// directory.
std::unique_ptr<ImageListDataset> open_image_list_dataset(const std::string& name,
                                                          const std::string& split,
                                                          const std::string& root, bool augment,
                                                          TransformRecipe recipe);

}  // namespace data
