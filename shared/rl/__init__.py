"""RL post-training: sampler, advantages, policy losses, the learner loop (filled in module by module)."""
