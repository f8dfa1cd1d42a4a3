"""SSP (arXiv:2510.18821): search self-play on a synthetic KB."""
