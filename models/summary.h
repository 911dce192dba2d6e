// Human-readable descriptions of models for `dml info`: the module tree and parameter counts.
#pragma once

#include <cstdint>
#include <string>

#include "engine/nn/module.h"

namespace models {

// 11689512 -> "11,689,512"; negative numbers keep their sign.
std::string with_thousands(int64_t value);

// One module, PyTorch repr style: "Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)",
// "BatchNorm2d(64, eps=1e-05, momentum=0.1, branches=2)", "Linear(512, 128)", "BasicBlock", ...
std::string describe_module(const engine::nn::Module& module);

// One line per module, depth-first in registration order, indented by depth:
//   <dotted name>  <describe_module>  <parameter count of the subtree, if any>
// with the model itself first (named by its registry name when it is a models::Model), and a
// final line "parameters: 11,689,512".
std::string module_tree(engine::nn::Module& model);

}  // namespace models
