"""What is made of attributions once joined: files for viewers (export) and comparisons (diff)."""
