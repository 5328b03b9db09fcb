"""Shared test set-up: figures are drawn headless (no display on CI)."""

import matplotlib

matplotlib.use("Agg")
