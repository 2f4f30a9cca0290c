"""Pre-training of the shipped tiny VT5 base model on the public corpus."""
