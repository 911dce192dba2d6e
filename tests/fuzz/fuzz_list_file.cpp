// libFuzzer target: the data sets' text list files (data/image_list.h): CUB-200-2011's images.txt
// and image_class_labels.txt, SOP's Ebay_{train,test}.txt and CARS196's anno_{train,test}.csv,
// through the same parsers the readers call on the files' text. Any bytes must parse or fail with
// engine::Error; a list that parses must hold one class id per path, in the data set's range, and
// make a data set whose labels are in range (docs/testing.md, Fuzzing).
//
// Input: the first byte picks the list, by its value mod 3 (the seeds use '0' CUB, '1' SOP,
// '2' CARS CSV); the rest is the file. CUB reads two files: images.txt is the text before the first
// '|', image_class_labels.txt the text after it (none: an empty label list).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "data/image_list.h"
#include "kernels/common/check.h"

namespace {

void check_list(const data::ImageList& list, int64_t lo, int64_t hi, const std::string& split) {
  if (list.paths.size() != list.class_ids.size()) std::abort();
  for (const int64_t id : list.class_ids) {
    if (id < lo || id > hi) std::abort();
  }
  const data::SplitSummary summary = data::summarize_list(list, split);
  if (summary.size != static_cast<int64_t>(list.paths.size())) std::abort();
  if (list.paths.empty()) return;  // open_image_list_dataset refuses an empty split
  // What open_image_list_dataset makes of the list: labels 0.. in class id order.
  const data::ImageListDataset dataset("fuzz", split, list, data::ImageTransform());
  if (dataset.num_classes() != summary.num_classes) std::abort();
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const int64_t label = dataset.label(i);
    if (label < 0 || label >= dataset.num_classes()) std::abort();
    if (dataset.class_id(label) != list.class_ids[static_cast<std::size_t>(i)]) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0: {
        const std::size_t bar = text.find('|');
        const std::string_view images = text.substr(0, bar);
        const std::string_view labels =
            bar == std::string_view::npos ? std::string_view() : text.substr(bar + 1);
        for (const char* split : {"train", "test"}) {
          const bool train = std::string(split) == "train";
          check_list(data::parse_cub_lists("CUB_200_2011", split, images, labels), train ? 1 : 101,
                     train ? 100 : 200, split);
        }
        break;
      }
      case 1:
        check_list(data::parse_sop_list(text, "Ebay_train.txt", "sop"), 1, INT64_MAX, "train");
        break;
      default: {
        data::ImageList list;
        for (const data::CarsCsvEntry& entry : data::parse_cars_csv(text, "anno_train.csv")) {
          if (entry.line < 1) std::abort();
          list.paths.push_back(entry.file);
          list.class_ids.push_back(entry.class_id);
        }
        check_list(list, 1, 196, "train");
        break;
      }
    }
  } catch (const engine::Error&) {
  }
  return 0;
}
