// Everything in losses/: metrics, miners and the DML losses (docs/config.md, Losses).
#pragma once

#include "losses/arcface.h"
#include "losses/contrastive.h"
#include "losses/distance.h"
#include "losses/fused_triplet.h"
#include "losses/ics.h"
#include "losses/lifted.h"
#include "losses/margin.h"
#include "losses/miners.h"
#include "losses/multi_similarity.h"
#include "losses/npair.h"
#include "losses/triplet.h"
