"""`make bench`: figures and ratios against baselines measured in the same run (never assertions)."""
