"""Stage 3, compare: our fold beside the oracles and other runs of ours, and the gap split."""
