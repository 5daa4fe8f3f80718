"""Stage 2, folding: steps attributed to legs, summed, and turned into figures with intervals."""
