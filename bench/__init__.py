"""Speed and load measurements that `make bench` runs (not part of the product)."""
