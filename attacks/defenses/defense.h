// Adversarial-training recipes (docs/defenses.md): what one training step computes for one SPC-2
// batch when a defense is on. A recipe = a training-time adversary (attacks/pgd.h plus an
// objective) and a training objective (losses/); each recipe lives in its own file in this folder:
//
//   est.cpp     EST, Embedding-Shifted Triplet (Zhou et al. TPAMI §4.1; robrank defenses/est.py)
//   rest.cpp    REST, revised EST (robrank defenses/pnp.py)
//   ses.cpp     SES, Suppressing Embedding Shift (Zhou et al. TPAMI §4.1; robrank defenses/ses.py)
//   act.cpp     ACT, Anti-Collapse Triplet (Zhou et al. TPAMI §4.2; robrank defenses/pnp.py)
//   madry.cpp   Madry min-max triplet (robrank defenses/pnp.py, mmt; docs/defenses.md)
//   hm.cpp      Hardness Manipulation HM[H_S, H_D], gradual adversary, ICS (HM;
//               robrank defenses/amd.py)
//   mdprop.cpp  AdvProp-D and MDProp with K BN branches (MDProp Algorithm 1)
// and common.h holds what several of them share (clean embeddings, the ES adversary).
//
// FGSM variants are the same recipes with pgd.steps = 1 (attacks/pgd.h: the step is then eps).
//
// The trainer (tools/dml/trainer.cpp) calls step() with the model in train mode on every batch and
// then does backward(result.loss) and the optimizer step itself, exactly as for vanilla training.
// A recipe runs its adversary with the model in eval mode (adversary_pgd, common.h) and returns
// with the model in train mode again. No parameter gradient is computed while attacking (attacks
// use engine::grad, which returns input gradients only), so the optimizer sees exactly the gradient
// of result.loss.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attacks/pgd.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/losses.h"
#include "models/model.h"

namespace attacks::defenses {

// The recipes (`defense.name` in a config), in docs order.
enum class Recipe { None, Est, Rest, Ses, Act, Madry, Hm, Mdprop };

// The recipe names, in docs order ("none" first).
const std::vector<std::string>& defense_names();
// A name of defense_names(); anything else throws engine::Error naming it.
Recipe parse_recipe(const std::string& name);
const char* recipe_name(Recipe recipe);
// Whether the recipe trains on triplet rows itself (act rest madry hm), so the config's loss must
// be the triplet loss; est, ses and mdprop train with whatever loss is configured.
bool needs_triplet_loss(Recipe recipe);

// H_D of Hardness Manipulation: a miner's hardness (its triplets' hardness on the clean
// embeddings), or a pseudo-hardness of HM §3.2 with l = clamp(previous adversarial loss, 0,
// u) / u (u = hm.loss_upper, gamma by default), named as in configs:
//   Miner  H_D(destination_miner)        the miner's own name: random, semihard, ...
//   GB     H_D(destination_miner) + xi (1 - l)   "g_b"
//   GLga   -gamma l   (robrank's gradual)        "g_lga"
//   G2     -gamma l^2                            "g_2"
//   GSqrt  -gamma sqrt(l)                        "g_sqrt"
//   Const0 0,  ConstHalfGamma -gamma / 2,  ConstGamma -gamma
//          "const_0", "const_half_gamma", "const_gamma"
enum class HmDestination { Miner, GB, GLga, G2, GSqrt, Const0, ConstHalfGamma, ConstGamma };
// The PGD objective of HM: Et = mean (min(0, H_S - H_D))^2 (the papers', "et"), L2 = mean
// (H_S - H_D)^2 ("l2").
enum class HmObjective { Et, L2 };

// "et" or "l2"; anything else throws engine::Error naming hm.objective.
HmObjective parse_hm_objective(const std::string& name);
const char* hm_objective_name(HmObjective objective);

// Hardness Manipulation (HM §3; robrank defenses/amd.py).
struct HmOptions {
  // H_S: the miner whose triplets are perturbed.
  losses::Miner source = losses::Miner::Softhard;
  HmDestination destination = HmDestination::GLga;
  // The miner behind H_D for destination Miner (the miner a config's hm.destination names) and
  // GB (a config's hm.destination_miner).
  losses::Miner destination_miner = losses::Miner::Semihard;
  HmObjective objective = HmObjective::Et;
  double gamma = 0.2;         // the triplet margin, also u of the normalization
  double xi = 0.1;            // g_b's shift
  double initial_loss = 2.0;  // l_{-1}: robrank starts the gradual adversary at 2.0 (l = 1)
  bool ics = false;           // add the Intra-Class Structure term (HM §3.3)
  double ics_lambda = 0.5;    // 0.05 on SOP
  double ics_margin = 0.0;    // the margin of L_ICS: 0 in HM §3.3, 0.2 in supplement Table 10
  // u of l = clamp(l_{t-1}, 0, u) / u (supplement §(3)); 0 means u = gamma, the paper's choice.
  // Table 7 also trains u = 2.2, the loss's upper bound (no clipping).
  double loss_upper = 0.0;
  double stop_tolerance = 1e-7;  // robrank's early stop of the HM attack (attacks/pgd.h)
};

// Sets hm.destination from its config name: a miner's full name (random ... hardest: Miner, and
// that miner as hm.destination_miner) or g_b ... const_gamma. Anything else throws engine::Error
// naming hm.destination.
void set_hm_destination(HmOptions& hm, const std::string& name);
// The config name back: the miner's name for Miner, else "g_b" ... "const_gamma".
std::string hm_destination_name(const HmOptions& hm);
// Every name hm.destination accepts: the miners, then the pseudo-hardness functions.
std::vector<std::string> hm_destination_names();

// How MDProp joins its K branch losses (below).
enum class MdpropReduction { Sum, Mean };
// "sum" or "mean"; anything else throws engine::Error naming mdprop.reduction.
MdpropReduction parse_mdprop_reduction(const std::string& name);
const char* mdprop_reduction_name(MdpropReduction reduction);

// AdvProp-D / MDProp (MDProp §3, Algorithm 1): branch 0 takes the clean batch, branch k >= 1 the
// batch perturbed toward targets[k-1] different-class targets (1 = a single-targeted STAX, T > 1 =
// a multi-targeted MTAX). AdvProp-D = {1}; MDProp = {1, T}; the model needs targets.size() + 1 BN
// branches. `reduction` joins the K branch losses: Sum ("sum") as Algorithm 1 line 11 writes it,
// or Mean ("mean") as eq. 5's expectation over k (1/K of the sum; the same minimizer, but K times
// less weight against the optimizer's coupled weight decay and 1/K of the step of plain SGD).
struct MdpropOptions {
  std::vector<int64_t> targets = {1, 5};
  MdpropReduction reduction = MdpropReduction::Sum;
  // The baselines of MDProp Appendix C.2 (Tables 1 and 4): every part through ONE shared BN
  // (adversaries in eval mode through it, one train-mode forward of all parts with joint batch
  // statistics); targets {1} = adversarial training with clean and STAX examples, {T} = MTAX
  // without separate BNs. The model then has one BN branch (or no BN).
  bool shared_bn = false;
};

// ACT's anchor embedding in its training loss (robrank defenses/pnp.py, pnp_training_step):
//   Normalized    a train-mode forward of the clean anchors, L2-normalized for metrics N and C
//                 like f(p~) and f(n~): robrank since its issue #7 (2021-07-10, d20df3a),
//                 "normalized"
//   Unnormalized  robrank before it (2021-06, when its FGSM models rc2f2pf/rc2f2df were added):
//                 the anchors' rows of the clean eval-mode forward, with gradient, NOT normalized,
//                 against normalized f(p~) and f(n~); for metric N the loss is then
//                 relu(||f(a) - f^(p~)|| - ||f(a) - f^(n~)|| + m), "unnormalized". C and E
//                 normalize the same way in both (1 - cos ignores norms; E normalizes nothing),
//                 so there only the anchor forward's mode differs (a model with BN).
enum class ActAnchor { Normalized, Unnormalized };
// "normalized" or "unnormalized"; anything else throws engine::Error naming act.anchor.
ActAnchor parse_act_anchor(const std::string& name);
const char* act_anchor_name(ActAnchor anchor);

// Every option of every recipe, with the papers' defaults for 28x28 images (docs/defenses.md: the
// defense attack is eps = 77/255, alpha = 3/255, 32 steps). A recipe reads only its own fields.
// `dml train` fills this from the config's "defense" object (docs/config.md), where every name
// is parsed once.
struct DefenseOptions {
  Recipe recipe = Recipe::None;
  PgdOptions pgd = {77.0 / 255.0, 3.0 / 255.0, 32, false, 0, 0.0};
  double ses_weight = 1.0;  // SES: weight of the embedding-shift term (robrank: 1.0)
  HmOptions hm;
  MdpropOptions mdprop;
  ActAnchor act_anchor = ActAnchor::Normalized;  // ACT (above); robrank today: Normalized
};

// Throws engine::Error naming the option when a value is out of range.
void validate(const DefenseOptions& options);

// What a recipe may use from the trainer.
struct TrainingContext {
  models::Model& model;
  // The configured loss on a batch's embeddings (what vanilla training minimizes, e.g. triplet
  // with the configured miner), drawing from the generator it is given when it mines (the
  // recipes pass `mining`). EST, SES and MDProp train on it.
  std::function<engine::Tensor(const engine::Tensor& embeddings, const engine::Tensor& labels,
                               engine::Generator& mining)>
      loss;
  losses::Metric metric;      // loss.metric of the config (N, E or C)
  losses::Miner miner;        // loss.miner of the config (REST, ACT and Madry sample with it)
  double margin;              // loss.margin of the config (the triplet margin: 0.2 for N and C)
  engine::Generator& mining;  // the trainer's mining stream (checkpointed by the trainer)
};

// The result of one training step.
struct StepResult {
  engine::Tensor loss;  // one element, differentiable with respect to the model's parameters
  // Values worth logging (one-element tensors, left on the device: the trainer reads them only
  // when it writes a log line), e.g. {"clean_loss", ...}, {"attack_objective", ...}.
  std::vector<std::pair<std::string, engine::Tensor>> logs;
  // Forward+backward passes spent on this batch, the papers' cost measure: PGD steps taken + 1
  // (fewer steps when HM's early stop ends its attack sooner; 1 when HM skips the attack).
  int64_t passes = 1;
};

class Defense {
 public:
  virtual ~Defense() = default;
  virtual const char* name() const = 0;
  // images [2B, C, H, W] in [0, 1] laid out a0, p0, a1, p1, ... (data/sampler.h SPC-2), labels
  // I64 [2B] on the images' device.
  virtual StepResult step(TrainingContext& context, const engine::Tensor& images,
                          const engine::Tensor& labels) = 0;
  // State carried from one step to the next (HM's previous adversarial loss), saved by the
  // trainer in its checkpoint as "defense.<key>" so --resume stays bit-identical. Empty for
  // stateless recipes.
  virtual std::map<std::string, engine::Tensor> state() const { return {}; }
  // Restores what state() returned. Throws engine::Error naming the key for a key the recipe
  // does not keep or a value of the wrong shape; an empty map is the state before the first
  // step (HM then starts from hm.initial_loss).
  virtual void load_state(const std::map<std::string, engine::Tensor>& state);
};

// The recipe options.recipe (after validate()); null for Recipe::None (the trainer's vanilla
// path).
std::unique_ptr<Defense> make_defense(const DefenseOptions& options);

// EST's adversary without its training loss (est.cpp), for train.mining_scope "global"
// (tools/dml/global_mining.h, docs/distributed.md): EST trains on the configured loss of the
// adversarial embeddings alone and its attack mines nothing, so the trainer can embed each
// micro-batch's x~ and mine the loss's triplets over the whole step. step() is this followed by
// that loss on the micro-batch's own embeddings.
struct AttackedBatch {
  engine::Tensor adversarial;  // x~, shaped as the images
  engine::Tensor clean_loss;  // EST: the configured loss on the clean embeddings, detached (logged)
  PgdTrace trace;
};
AttackedBatch est_attack(const PgdOptions& pgd, TrainingContext& context,
                         const engine::Tensor& images, const engine::Tensor& labels);
// The step's result of a recipe that trains on `adversarial_loss` (EST, REST, ACT, Madry): the
// loss, its logs ("clean_loss", "adversarial_loss", then the attack's) and passes (common.h).
StepResult adversarial_loss_result(const engine::Tensor& adversarial_loss,
                                   const engine::Tensor& clean_loss, const PgdTrace& trace);

// SES's parts (ses.cpp), for train.mining_scope "global" likewise: its attack mines nothing and its
// loss is the configured loss of the clean embeddings plus a per-row term, so the trainer makes
// each micro-batch's x~ and shifts alone and mines the loss over the step. step() is ses_attack,
// the two train-mode forwards f(x) and f(x~), the configured loss of f(x), ses_embedding_shift
// and ses_loss_result of its mean.
// The ES adversary on `images` against their clean (eval-mode) embeddings; clean_loss is left
// undefined (SES trains on its clean loss, in train mode, rather than logging one).
AttackedBatch ses_attack(const PgdOptions& pgd, TrainingContext& context,
                         const engine::Tensor& images);
// Each row's embedding shift between `shifted` = f(x~) and `clean` = f(x) ([rows, D] each), [rows]:
// ||n(f(x~)) - n(f(x)) + 1e-6|| for N, 1 - cos for C, ||n(f(x~)) - f(x) + 1e-6|| for E (n: L2
// normalization; robrank's quirk for E, docs/defenses.md).
engine::Tensor ses_embedding_shift(const engine::Tensor& shifted, const engine::Tensor& clean,
                                   losses::Metric metric);
// SES's step result: loss = clean_loss + weight * mean_shift, logs "clean_loss" and
// "embedding_shift", then the attack's, and passes (common.h).
StepResult ses_loss_result(const engine::Tensor& clean_loss, const engine::Tensor& mean_shift,
                           double weight, const PgdTrace& trace);

}  // namespace attacks::defenses
