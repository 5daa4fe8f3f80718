"""Stage 1, inputs: the readers of every outside format, each refusing what it cannot read."""
