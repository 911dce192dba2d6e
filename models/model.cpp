// Input validation shared by every model.
#include "models/model.h"

#include "kernels/common/check.h"

namespace models {

void Model::check_input(const engine::Tensor& x) const {
  ENGINE_CHECK(x.defined(), name_, ": forward of an undefined tensor");
  bool ok = engine::is_floating(x.dtype()) && x.dim() == 4;
  for (size_t d = 0; ok && d < input_shape_.size(); ++d) {
    ok = input_shape_[d] == 0 || x.size(static_cast<int64_t>(d) + 1) == input_shape_[d];
  }
  if (!ok) {
    std::string expected = "[N";
    for (int64_t s : input_shape_)
      expected += ", " + (s == 0 ? std::string("*") : std::to_string(s));
    engine::fail(name_, ": expected a floating-point image batch ", expected, "], got ", x.str());
  }
}

}  // namespace models
