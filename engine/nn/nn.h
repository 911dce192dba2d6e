// Everything of engine/nn in one include: modules, layers and initialization.
#pragma once

#include "engine/nn/batch_norm.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/init.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/nn/module.h"
#include "engine/nn/sequential.h"
