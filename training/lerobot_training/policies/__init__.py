"""Policies as plain `nn.Module`s sharing the `Policy` interface (see `base.py`)."""
