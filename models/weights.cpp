// safetensors (and torch.save) load, safetensors save, of any model (contract in weights.h).
#include "models/weights.h"

#include <cctype>
#include <cmath>
#include <sstream>
#include <vector>

#include "engine/io/pth.h"
#include "engine/io/safetensors.h"
#include "engine/nn/batch_norm.h"
#include "engine/text.h"
#include "kernels/common/check.h"
#include "models/model.h"

namespace models {

namespace nn = engine::nn;
using engine::Tensor;

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// "aux_bn<N>" with N a positive decimal without leading zero -> N, else 0.
long mdprop_branch(const std::string& component) {
  const std::string stem = "aux_bn";
  if (!starts_with(component, stem) || component.size() == stem.size()) return 0;
  if (component[stem.size()] == '0') return 0;
  long n = 0;
  for (size_t i = stem.size(); i < component.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(component[i])) || n > 100000) return 0;
    n = 10 * n + (component[i] - '0');
  }
  return n;
}

// First non-finite element of a floating tensor, or -1.
int64_t first_non_finite(const Tensor& t) {
  if (!engine::is_floating(t.dtype())) return -1;
  Tensor c = t.device().is_cpu() ? t.contiguous() : t.to(engine::Device::cpu());
  for (int64_t i = 0; i < c.numel(); ++i) {
    double v = c.dtype() == engine::DType::F32 ? double(c.data<float>()[i]) : c.data<double>()[i];
    if (!std::isfinite(v)) return i;
  }
  return -1;
}

// Adds branch-0 copies under aux_bn.<k-1>. for every BN of `model` whose entries in `state`
// name no aux branch (WeightLoadOptions::aux_from_main).
void fill_aux_from_main(nn::Module& model, nn::StateDict& state) {
  for (const auto& entry : model.named_modules()) {
    auto* bn = dynamic_cast<nn::BatchNorm*>(entry.second);
    if (bn == nullptr || bn->branches() == 1) continue;
    const std::string prefix = entry.first.empty() ? "" : entry.first + ".";
    bool has_aux = false;
    for (const auto& item : state) has_aux = has_aux || starts_with(item.first, prefix + "aux_bn.");
    if (has_aux) continue;
    for (const char* field :
         {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}) {
      if (!state.contains(prefix + field)) continue;
      for (int64_t k = 1; k < bn->branches(); ++k) {
        state.set(prefix + "aux_bn." + std::to_string(k - 1) + "." + field,
                  state.at(prefix + field));
      }
    }
  }
}

}  // namespace

std::string canonical_weight_name(const std::string& name) {
  std::string out;
  size_t begin = 0;
  while (true) {
    size_t end = name.find('.', begin);
    std::string component = name.substr(begin, end == std::string::npos ? end : end - begin);
    long branch = mdprop_branch(component);
    out += branch > 0 ? "aux_bn." + std::to_string(branch - 1) : component;
    if (end == std::string::npos) break;
    out += '.';
    begin = end + 1;
  }
  return out;
}

namespace {

// Everything that keeps a file's state from loading into a model, collected before failing.
struct WeightProblems {
  std::vector<std::string> aliased, missing, unexpected, mis_shaped, mis_typed, non_finite;
  size_t matched = 0;  // the model's entries present with the right shape, for the hint
  bool any() const {
    return !aliased.empty() || !missing.empty() || !unexpected.empty() || !mis_shaped.empty() ||
           !mis_typed.empty() || !non_finite.empty();
  }
};

// The file's tensors under canonical names; `spelled` maps each to its name in the file. Two
// spellings of one branch would silently pick one, so the second is recorded as aliased.
nn::StateDict canonical_state(const std::map<std::string, Tensor>& tensors,
                              std::map<std::string, std::string>& spelled,
                              WeightProblems& problems) {
  nn::StateDict state;
  for (const auto& entry : tensors) {
    std::string name = canonical_weight_name(entry.first);
    if (state.contains(name)) {
      problems.aliased.push_back("'" + spelled[name] + "' and '" + entry.first + "'");
      continue;
    }
    spelled[name] = entry.first;
    state.insert(name, entry.second);
  }
  return state;
}

// Compares the state to load with the model's own (`expected`). An entry is named as the file
// spells it, or by its model name where it is in no file (aux_from_main's copies of branch 0).
void compare_with_model(const nn::StateDict& expected, const nn::StateDict& state,
                        const std::map<std::string, std::string>& spelled,
                        WeightProblems& problems) {
  auto shown_name = [&](const std::string& name) {
    auto it = spelled.find(name);
    return "'" + (it != spelled.end() ? it->second : name) + "'";
  };
  for (const auto& entry : expected) {
    const std::string& name = entry.first;
    if (!state.contains(name)) {
      if (!ends_with(name, "num_batches_tracked")) problems.missing.push_back("'" + name + "'");
      continue;
    }
    const Tensor& value = state.at(name);
    const std::string shown = shown_name(name);
    if (value.shape() != entry.second.shape()) {
      problems.mis_shaped.push_back(shown + " (model " + engine::shape_str(entry.second.shape()) +
                                    ", file " + engine::shape_str(value.shape()) + ")");
      continue;
    }
    ++problems.matched;
    if (engine::is_floating(entry.second.dtype()) && !engine::is_floating(value.dtype())) {
      problems.mis_typed.push_back(shown + " (integer data for a floating-point tensor)");
    } else if (int64_t bad = first_non_finite(value); bad >= 0) {
      std::ostringstream where;
      where << shown << " (element " << bad << ")";
      problems.non_finite.push_back(where.str());
    }
  }
  for (const auto& entry : state) {
    if (!expected.contains(entry.first)) problems.unexpected.push_back(shown_name(entry.first));
  }
}

// One error listing every problem by kind, with a hint when most of the model's entries are off.
[[noreturn]] void fail_with_problems(nn::Module& model, const std::string& source,
                                     const WeightProblems& problems, size_t expected_entries) {
  std::ostringstream message;
  auto* named = dynamic_cast<Model*>(&model);
  message << "weights " << source << " do not match the model"
          << (named ? " " + named->name() + " (embedding_dim " +
                          std::to_string(named->embedding_dim()) + ", bn_branches " +
                          std::to_string(named->bn_branches()) + ")"
                    : std::string());
  auto section = [&](const char* title, const std::vector<std::string>& items) {
    if (!items.empty())
      message << "\n  " << title << " (" << items.size() << "): " << engine::join(items);
  };
  section("one branch named twice", problems.aliased);
  section("missing keys", problems.missing);
  section("unexpected keys", problems.unexpected);
  section("mis-shaped keys", problems.mis_shaped);
  section("wrong dtype", problems.mis_typed);
  section("non-finite values", problems.non_finite);
  if (2 * problems.matched < expected_entries) {
    message << "\n  (only " << problems.matched << " of the model's " << expected_entries
            << " entries match: is this file for another model or embedding dimension?)";
  }
  engine::fail(message.str());
}

}  // namespace

void load_weights(nn::Module& model, const std::map<std::string, Tensor>& tensors,
                  const std::string& source, const WeightLoadOptions& options) {
  WeightProblems problems;
  // 1. Canonical names.
  std::map<std::string, std::string> spelled;  // canonical -> name in the file
  nn::StateDict state = canonical_state(tensors, spelled, problems);
  if (options.aux_from_main) fill_aux_from_main(model, state);

  // 2. The entries to keep take the model's own values, whatever the file holds.
  nn::StateDict expected = model.state_dict();
  auto kept = [&](const std::string& name) {
    for (const std::string& prefix : options.keep_prefixes) {
      if (starts_with(name, prefix)) return true;
    }
    return false;
  };
  for (const std::string& name : state.keys()) {
    if (kept(name)) state.erase(name);
  }
  for (const auto& entry : expected) {
    if (kept(entry.first)) state.set(entry.first, entry.second);
  }

  // 3. Compare with the model's own state, collecting every problem before failing.
  compare_with_model(expected, state, spelled, problems);
  if (problems.any()) fail_with_problems(model, source, problems, expected.size());
  model.load_state_dict(state);
}

WeightLayout parse_weight_layout(const std::string& text) {
  if (text == "dml") return WeightLayout::Ours;
  if (text == "robrank") return WeightLayout::Robrank;
  engine::fail("unknown weight layout '", text, "' (known: dml, robrank)");
}

std::map<std::string, Tensor> read_weight_file(const std::string& path) {
  return engine::is_torch_checkpoint_path(path) ? engine::load_pth(path)
                                                : engine::load_safetensors(path);
}

std::map<std::string, Tensor> rename_weights(std::map<std::string, Tensor> tensors,
                                             WeightLayout layout, const std::string& model_name,
                                             const std::string& source) {
  if (layout == WeightLayout::Ours) return tensors;
  const std::string prefix = "backbone.";
  // robrank's C2F2 Sequential: 0 conv, 1 ReLU, 2 pool, 3 conv, 4 ReLU, 5 pool, 6 flatten,
  // 7 linear, 8 ReLU, 9 linear; only the four layers with weights have entries.
  const std::map<std::string, std::string> c2f2_layers = {
      {"0", "conv1"}, {"3", "conv2"}, {"7", "fc1"}, {"9", "fc2"}};
  std::map<std::string, Tensor> out;
  for (auto& [name, tensor] : tensors) {
    if (!starts_with(name, prefix)) continue;  // the loss's entries, optimizer-free extras
    std::string ours = name.substr(prefix.size());
    if (model_name == "c2f2") {
      const size_t dot = ours.find('.');
      const auto layer = c2f2_layers.find(ours.substr(0, dot));
      if (dot == std::string::npos || layer == c2f2_layers.end()) {
        engine::fail(source, ": ", name,
                     " is not a layer of robrank's C2F2 (backbone.0, .3, .7 and .9 hold its "
                     "weights)");
      }
      ours = layer->second + ours.substr(dot);
    }
    out[ours] = std::move(tensor);
  }
  if (out.empty()) {
    engine::fail(source,
                 ": no backbone.* entry: not a robrank checkpoint (its network is under "
                 "backbone.); --layout dml reads the names as they are");
  }
  return out;
}

void load_weights(nn::Module& model, const std::string& path, const WeightLoadOptions& options) {
  load_weights(model, read_weight_file(path), path, options);
}

void save_weights(const nn::Module& model, const std::string& path,
                  std::map<std::string, std::string> metadata) {
  std::map<std::string, Tensor> tensors;
  for (const auto& entry : model.state_dict()) tensors[entry.first] = entry.second;
  metadata.emplace("format", "pt");
  engine::save_safetensors(path, tensors, metadata);
}

}  // namespace models
