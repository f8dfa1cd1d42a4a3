"""Masked diffusion language models (MDM) on the shared transformer (model.causal = False).

  samplers.py  T_SAMPLERS (uniform, clipped, stratified, density) and MASK_SAMPLERS (independent, multi, mirror,
               isad, syrm): how each sample's mask ratio t and its masks are drawn; projects add their own
  loss.py      the MDM loss as a Trainer loss_fn (mdm_loss_fn), config.diffusion (diffusion_config), the
               held-out ELBO
  decode.py    LLaDA-style decoding (llada_decode) and batched AR greedy decoding for the ARM baseline
  task.py      TASKS "mdm": pre-training or SFT with the MDM loss through the shared Trainer, and its pieces for
               projects' own tasks (mask_id_for, mdm_loss_factory, decode_texts, checked_accuracy, heldout_elbo)

The ARM baseline is the same network with model.causal = True trained by the shared "sft"/"pretrain" tasks.
"""
from shared.diffusion.decode import ar_greedy_decode, decode_batch, llada_decode, prompt_layout  # noqa: F401
from shared.diffusion.loss import (diffusion_config, diffusion_options, elbo_loss_fn, evaluate_loss,  # noqa: F401
                                   masked_losses, mdm_inputs, mdm_loss_fn, model_logits_fn, p_mask,
                                   resolve_mask_id)
from shared.diffusion.samplers import (MASK_SAMPLERS, T_SAMPLERS, GridDensity, MaskDraw,  # noqa: F401
                                       make_mask_sampler, make_t_sampler)
from shared.diffusion import task  # noqa: F401  registers TASKS "mdm"
