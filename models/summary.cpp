// Module tree and counts for `dml info`.
#include "models/summary.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <utility>
#include <vector>

#include "engine/nn/nn.h"
#include "models/c2f2.h"
#include "models/resnet.h"

namespace models {

namespace nn = engine::nn;

std::string with_thousands(int64_t value) {
  // |value| as unsigned, well defined even for INT64_MIN.
  uint64_t magnitude = value < 0 ? uint64_t(-(value + 1)) + 1 : uint64_t(value);
  std::string digits = std::to_string(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

namespace {

std::string pool_args(const engine::Pool2dOptions& o) {
  std::ostringstream s;
  s << "kernel_size=" << o.kernel_h << ", stride=" << o.stride_h << ", padding=" << o.pad_h;
  return s.str();
}

}  // namespace

std::string describe_module(const nn::Module& module) {
  std::ostringstream s;
  if (auto* conv = dynamic_cast<const nn::Conv2d*>(&module)) {
    const engine::Shape& w = conv->weight().shape();  // [K, C, R, S]
    const engine::Conv2dOptions& o = conv->options();
    s << "Conv2d(" << w[1] << ", " << w[0] << ", kernel_size=" << w[2] << ", stride=" << o.stride_h
      << ", padding=" << o.pad_h;
    if (o.dilation_h != 1) s << ", dilation=" << o.dilation_h;
    if (!conv->bias().defined()) s << ", bias=False";
    s << ")";
  } else if (auto* bn = dynamic_cast<const nn::BatchNorm*>(&module)) {
    s << (dynamic_cast<const nn::BatchNorm1d*>(bn) ? "BatchNorm1d(" : "BatchNorm2d(")
      << bn->channels() << ", eps=" << bn->eps() << ", momentum=" << bn->momentum();
    if (bn->branches() > 1) s << ", branches=" << bn->branches();
    if (bn->frozen()) s << ", frozen";
    s << ")";
  } else if (auto* linear = dynamic_cast<const nn::Linear*>(&module)) {
    s << "Linear(" << linear->in_features() << ", " << linear->out_features();
    if (!linear->bias().defined()) s << ", bias=False";
    s << ")";
  } else if (auto* max_pool = dynamic_cast<const nn::MaxPool2d*>(&module)) {
    s << "MaxPool2d(" << pool_args(max_pool->options()) << ")";
  } else if (auto* avg_pool = dynamic_cast<const nn::AvgPool2d*>(&module)) {
    s << "AvgPool2d(" << pool_args(avg_pool->options()) << ")";
  } else if (dynamic_cast<const nn::AdaptiveAvgPool2d*>(&module)) {
    s << "AdaptiveAvgPool2d(output_size=(1, 1))";
  } else if (dynamic_cast<const nn::ReLU*>(&module)) {
    s << "ReLU";
  } else if (dynamic_cast<const nn::Flatten*>(&module)) {
    s << "Flatten";
  } else if (auto* dropout = dynamic_cast<const nn::Dropout*>(&module)) {
    s << "Dropout(p=" << dropout->p() << ")";
  } else if (dynamic_cast<const nn::Sequential*>(&module)) {
    s << "Sequential";
  } else if (dynamic_cast<const BasicBlock*>(&module)) {
    s << "BasicBlock";
  } else if (dynamic_cast<const Bottleneck*>(&module)) {
    s << "Bottleneck";
  } else if (auto* resnet = dynamic_cast<const ResNet*>(&module)) {
    s << "ResNet(depth=" << resnet->depth() << ", embedding_dim=" << resnet->embedding_dim()
      << ", bn_branches=" << resnet->bn_branches() << ")";
  } else if (auto* c2f2 = dynamic_cast<const C2F2*>(&module)) {
    s << "C2F2(embedding_dim=" << c2f2->embedding_dim() << ", bn_branches=" << c2f2->bn_branches()
      << ")";
  } else {
    s << "Module";
  }
  return s.str();
}

std::string module_tree(nn::Module& model) {
  struct Line {
    std::string name, type, count;
  };
  std::vector<Line> lines;
  size_t name_width = 0, type_width = 0;
  for (const auto& entry : model.named_modules()) {
    std::string name = entry.first;
    if (name.empty()) {
      auto* named = dynamic_cast<Model*>(&model);
      name = named ? named->name() : "model";
    }
    // Depth = number of dots; two spaces per level.
    int64_t depth = entry.first.empty() ? 0 : 1 + std::count(name.begin(), name.end(), '.');
    Line line{std::string(2 * depth, ' ') + name, describe_module(*entry.second), ""};
    int64_t count = entry.second->parameter_count();
    if (count > 0) line.count = with_thousands(count);
    name_width = std::max(name_width, line.name.size());
    type_width = std::max(type_width, line.type.size());
    lines.push_back(std::move(line));
  }
  std::ostringstream out;
  for (const Line& line : lines) {
    out << std::left << std::setw(static_cast<int>(name_width + 2)) << line.name;
    if (line.count.empty()) {
      out << line.type << "\n";
    } else {
      out << std::setw(static_cast<int>(type_width + 2)) << line.type << std::right << std::setw(12)
          << line.count << "\n";
    }
  }
  out << "parameters: " << with_thousands(model.parameter_count()) << "\n";
  return out.str();
}

}  // namespace models
