"""Figures of the Gaussian field fit (notebook 01)."""

from __future__ import annotations

from typing import Any

from gsworkbench.field.targets import slice_grid


def field_slices(target: Any, model: Any, res: int = 96) -> Any:
    """Target, fit and their difference (target - fit) on the three axis-aligned slices through 0.

    Rows: target, fit (shared colour scale), error (symmetric diverging scale); one colorbar per row.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 3, figsize=(10.5, 10), layout="constrained")
    axes_names = "xyz"
    refs = [slice_grid(target, axis=a, res=res) for a in (2, 1, 0)]
    fits = [slice_grid(model, axis=a, res=res) for a in (2, 1, 0)]
    vmax = max(float(r.max()) for r in refs)
    emax = max(float((r - f).abs().max()) for r, f in zip(refs, fits)) or 1.0
    for col, axis in enumerate((2, 1, 0)):
        h, v = [axes_names[i] for i in range(3) if i != axis]
        for row, (name, img, kw) in enumerate(
            (("target", refs[col], {"vmin": 0, "vmax": vmax, "cmap": "viridis"}),
             ("fit", fits[col], {"vmin": 0, "vmax": vmax, "cmap": "viridis"}),
             ("target − fit", refs[col] - fits[col], {"vmin": -emax, "vmax": emax, "cmap": "RdBu_r"}))  # fmt: skip
        ):
            ax = axes[row, col]
            im = ax.imshow(img.numpy(), origin="lower", extent=(-1, 1, -1, 1), **kw)
            ax.set(title=f"{name}, slice {axes_names[axis]} = 0", xlabel=h, ylabel=v)
            ax.set(xticks=[-1, 0, 1], yticks=[-1, 0, 1])
            if col == 2:
                fig.colorbar(im, ax=axes[row, :], shrink=0.9, label="density" if row < 2 else "error (density)")
    return fig
