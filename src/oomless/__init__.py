"""oomless: plan the memory of RL fine-tuning before a GPU is touched."""

__version__ = "0.1.0"
