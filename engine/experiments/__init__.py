"""Experiments from the papers, reproduced with this engine (each backs a `sinew` command)."""
