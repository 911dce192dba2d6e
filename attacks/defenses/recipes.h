// The constructors of the recipes, one per file of this folder (defense.h lists them); only
// make_defense (defense.cpp) calls them, after validate().
#pragma once

#include <memory>

#include "attacks/defenses/defense.h"

namespace attacks::defenses {

std::unique_ptr<Defense> make_est(const DefenseOptions& options);
std::unique_ptr<Defense> make_rest(const DefenseOptions& options);
std::unique_ptr<Defense> make_ses(const DefenseOptions& options);
std::unique_ptr<Defense> make_act(const DefenseOptions& options);
std::unique_ptr<Defense> make_madry(const DefenseOptions& options);
std::unique_ptr<Defense> make_hm(const DefenseOptions& options);
std::unique_ptr<Defense> make_mdprop(const DefenseOptions& options);

}  // namespace attacks::defenses
