"""Test-wide settings: the offline profile (nothing may touch the network), fixed seeds."""
import os

os.environ.setdefault("RAGBOOK_PROFILE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
