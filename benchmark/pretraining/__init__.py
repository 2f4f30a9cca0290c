"""Pre-training on the public corpus: the shipped tiny VT5 base model (recipe, trainer, run)
and another family's tiny shape from random weights (family_recipe, family_qa)."""
