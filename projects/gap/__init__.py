"""GAP (arXiv 2605.12374) small-scale reproduction: GridOps. Spec ../shared/papers/gap.md section 4."""
