"""Synthetic async-scheduling + speculative-decoding runs (Model Runner V1 and V2),
with known faults switched on at will, written step by step or as columns."""
