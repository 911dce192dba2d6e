// MNIST / Fashion-MNIST readers over the IDX files (see mnist.h).
#include "data/mnist.h"

#include <cstring>
#include <filesystem>

#include "data/idx.h"
#include "kernels/common/check.h"

namespace data {

using engine::fail;

namespace {

std::string file_prefix(const std::string& name, const std::string& split) {
  if (split == "train") return "train";
  if (split == "test") return "t10k";
  fail(name, ": unknown split '", split, "' (expected train or test)");
}

bool is_file(const std::string& path) {
  std::error_code ignored;
  return std::filesystem::is_regular_file(path, ignored);
}

std::string join(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

// The first of <dir>/<stem>.gz, <dir>/<stem> over the candidate directories; "" if none.
std::string find_file(const std::vector<std::string>& dirs, const std::string& stem) {
  for (const std::string& dir : dirs) {
    if (is_file(join(dir, stem + ".gz"))) return join(dir, stem + ".gz");
    if (is_file(join(dir, stem))) return join(dir, stem);
  }
  return "";
}

void check_u8(const IdxHeader& header, std::size_t rank, const std::string& path) {
  if (header.type_code != 0x08) {
    fail(path, ": expected unsigned-byte IDX data (type 0x08), got type code ",
         int(header.type_code));
  }
  if (header.dims.size() != rank) {
    fail(path, ": expected a ", rank, "-dimensional IDX array, got ", header.dims.size(),
         " dimensions");
  }
}

std::vector<int64_t> read_labels(const std::string& path) {
  IdxArray array = read_idx(path);
  check_u8(array.header, 1, path);
  std::vector<int64_t> labels(array.data.begin(), array.data.end());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] > 9) fail(path, ": label ", labels[i], " at index ", i, " is not in 0..9");
  }
  return labels;
}

void check_counts(int64_t images, int64_t labels, const MnistFiles& files) {
  if (images != labels) {
    fail("label count ", labels, " (", files.labels, ") != image count ", images, " (",
         files.images, ")");
  }
}

}  // namespace

MnistFiles find_mnist_files(const std::string& name, const std::string& split,
                            const std::string& root) {
  const std::string prefix = file_prefix(name, split);
  const std::string folder = name == "fashion-mnist" ? "FashionMNIST" : "MNIST";
  const std::vector<std::string> dirs = {root, join(root, "raw"), join(join(root, folder), "raw")};
  MnistFiles files;
  files.images = find_file(dirs, prefix + "-images-idx3-ubyte");
  files.labels = find_file(dirs, prefix + "-labels-idx1-ubyte");
  for (const auto& [found, stem] : {std::pair{files.images, prefix + "-images-idx3-ubyte"},
                                    std::pair{files.labels, prefix + "-labels-idx1-ubyte"}}) {
    if (found.empty()) {
      fail(name, " ", split, ": cannot find ", join(root, stem + ".gz"), " (nor ", stem,
           " without .gz, nor either under ", join(root, "raw"), " or ",
           join(join(root, folder), "raw"), ")");
    }
  }
  return files;
}

std::unique_ptr<MnistDataset> MnistDataset::open(const std::string& name, const std::string& split,
                                                 const std::string& root) {
  const MnistFiles files = find_mnist_files(name, split, root);
  std::vector<int64_t> labels = read_labels(files.labels);
  IdxArray images = read_idx(files.images);
  check_u8(images.header, 3, files.images);
  const int64_t n = images.header.dims[0], h = images.header.dims[1], w = images.header.dims[2];
  check_counts(n, static_cast<int64_t>(labels.size()), files);

  engine::Tensor pixels = engine::Tensor::empty({n, 1, h, w});
  float* out = pixels.data<float>();
  const uint8_t* in = images.data.data();
  const int64_t count = n * h * w;
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(in[i]) / 255.0f;
  return std::make_unique<MnistDataset>(name, split, pixels, std::move(labels));
}

MnistDataset::MnistDataset(std::string name, std::string split, engine::Tensor images,
                           std::vector<int64_t> labels)
    : name_(std::move(name)),
      split_(std::move(split)),
      images_(std::move(images)),
      labels_(std::move(labels)) {
  ENGINE_CHECK(images_.dim() == 4 && images_.size(1) == 1 && images_.dtype() == engine::DType::F32,
               name_, ": images must be f32 [N, 1, H, W], got ", images_.str());
  ENGINE_CHECK(images_.size(0) == static_cast<int64_t>(labels_.size()), name_, ": ",
               images_.size(0), " images but ", labels_.size(), " labels");
  images_ = images_.contiguous();
}

int64_t MnistDataset::label(int64_t index) const {
  ENGINE_CHECK(index >= 0 && index < size(), name_, " ", split_, ": index ", index,
               " out of range [0, ", size(), ")");
  return labels_[static_cast<std::size_t>(index)];
}

engine::Tensor MnistDataset::image(int64_t index,
                                   engine::Generator& /*gen: no augmentation*/) const {
  ENGINE_CHECK(index >= 0 && index < size(), name_, " ", split_, ": image index ", index,
               " out of range [0, ", size(), ")");
  const engine::Shape shape = image_shape();
  engine::Tensor out = engine::Tensor::empty(shape);
  const int64_t per_image = shape[1] * shape[2];
  std::memcpy(out.data<float>(), images_.data<float>() + index * per_image,
              static_cast<std::size_t>(per_image) * sizeof(float));
  return out;
}

engine::Shape MnistDataset::image_shape() const { return {1, images_.size(2), images_.size(3)}; }

std::vector<SplitSummary> describe_mnist(const std::string& name, const std::string& root) {
  std::vector<SplitSummary> out;
  for (const std::string split : {"train", "test"}) {
    const MnistFiles files = find_mnist_files(name, split, root);
    const std::vector<int64_t> labels = read_labels(files.labels);
    const IdxHeader header = read_idx_header(files.images);
    check_u8(header, 3, files.images);
    check_counts(header.dims[0], static_cast<int64_t>(labels.size()), files);
    SplitSummary summary;
    summary.split = split;
    summary.size = static_cast<int64_t>(labels.size());
    summary.num_classes = 10;
    summary.first_class_id = 0;
    summary.last_class_id = 9;
    out.push_back(summary);
  }
  return out;
}

}  // namespace data
