"""PNG plot of a run's log.csv: train/validation loss and learning rate over steps (matplotlib, Agg)."""

from __future__ import annotations

import csv
from pathlib import Path


def plot_curves(log_path: Path, png_path: Path) -> None:
    """Draw loss (log scale) and learning rate against the step; the success rate when evaluated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, tuple[list[int], list[float]]] = {}
    with log_path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            for column, label in (("loss", f"{row['split']} loss"), ("lr", "lr"), ("success_rate", "success rate")):
                if row.get(column):
                    steps, values = series.setdefault(label, ([], []))
                    steps.append(int(row["step"]))
                    values.append(float(row[column]))
    figure, (loss_axes, lr_axes) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for label in ("train loss", "val loss"):
        if label in series:
            loss_axes.plot(*series[label], label=label, marker="." if label == "val loss" else None)
    loss_axes.set_ylabel("loss")
    if any(v > 0 for label in ("train loss", "val loss") for v in series.get(label, ([], []))[1]):
        loss_axes.set_yscale("log")
    loss_axes.legend(loc="upper right")
    loss_axes.grid(alpha=0.3)
    if "lr" in series:
        lr_axes.plot(*series["lr"], color="tab:green", label="lr")
    lr_axes.set_ylabel("learning rate")
    lr_axes.set_xlabel("step")
    if "success rate" in series:
        success_axes = lr_axes.twinx()
        success_axes.plot(*series["success rate"], color="tab:red", marker="o", label="success rate")
        success_axes.set_ylim(0, 1)
        success_axes.set_ylabel("success rate")
    figure.tight_layout()
    figure.savefig(png_path, dpi=100)
    plt.close(figure)
