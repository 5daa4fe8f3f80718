"""Stage 1, inputs: the readers of every outside format, and what a step or a counter may be."""
