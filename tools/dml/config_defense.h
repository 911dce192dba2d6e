// The defense section of the training config (defense.*, docs/config.md "defense"): its schema
// with the recipes' defaults, and its reading into attacks::defenses::DefenseOptions. Part of the
// config reader (config.cpp), kept apart because the defenses bring most of its keys and rules.
#pragma once

#include <nlohmann/json.hpp>

#include "attacks/defenses/defense.h"
#include "tools/dml/config.h"
#include "tools/dml/config_checker.h"

namespace dml {

// The defense keys with the recipes' defaults (attacks/defenses/defense.h).
nlohmann::json defense_schema();

// defense.*: names and ranges through the ConfigChecker (messages name the key), then the
// cross-key rules (the loss a recipe needs, MDProp's BN branches). `t` holds the config's other
// sections, already read.
attacks::defenses::DefenseOptions resolve_defense(const ConfigChecker& c, const TrainConfig& t);

}  // namespace dml
