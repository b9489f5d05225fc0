"""What the notebooks show: result links, the metrics table, inline interactive flamegraphs, quiet
profiler output, the stage-breakdown labels and the scaling series of compiled variants."""

from __future__ import annotations

import math
import os
import re
import sys
import xml.dom.minidom

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from gsworkbench.bench.scaling import SPECS, fit_table, plot_scaling, scaling_fits, series_columns  # noqa: E402
from gsworkbench.jupyter import display  # noqa: E402
from gsworkbench.profiling import flamegraph, quiet  # noqa: E402

FOLDED = {"main (a.py:1);f (a.py:3)": 6, "main (a.py:1);h (a.py:9);kernel (csrc/cpu/x.cpp:3)": 4}


# ---- links -------------------------------------------------------------------------------------


def test_result_link_is_relative_to_the_showing_notebook(tmp_path, monkeypatch):
    run = tmp_path / "results" / "run1"
    run.mkdir(parents=True)
    (run / "curves.png").write_bytes(b"png")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    monkeypatch.chdir(notebooks)  # JupyterLab: the kernel runs in the notebook's folder
    link = display.result_link(run / "curves.png", "", "plot")
    assert link.href == "../results/run1/curves.png"
    assert "<a href='../results/run1/curves.png' target='_blank'>" in link._repr_html_()
    assert repr(link) == f"plot: {run / 'curves.png'}"  # text: the absolute path
    papermill = display.result_link(run / "curves.png", str(run))  # executed notebook saved in run
    assert papermill.href == "curves.png"


def test_folder_links_point_the_file_browser_there(tmp_path, monkeypatch):
    """JupyterLab's editor refuses a folder ("is a directory"): a folder links to the server's
    lab/tree URL (and the file browser command), relative to the server's root, not to the notebook."""
    run = tmp_path / "results" / "run 1"
    run.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    server = display.ServerRoot(tmp_path, "/user/me/")
    link = display.result_link(run, "", "results", server=server)
    assert link.kind == "folder" and link.tree_path == "results/run 1"
    assert link.href == "/user/me/lab/tree/results/run%201"
    out = link._repr_html_()
    assert "href='/user/me/lab/tree/results/run%201'" in out and "target='_blank'" in out
    assert "data-commandlinker-command='filebrowser:go-to-path'" in out
    assert "data-commandlinker-args='{&quot;path&quot;: &quot;results/run 1&quot;}'" in out
    # no server to link into (headless, or the folder outside its root): the folder is named, unlinked
    monkeypatch.setenv(display.HEADLESS_ENV, "1")
    plain = display.result_link(run, "", "results")
    assert plain.kind == "name" and "<a " not in plain._repr_html_() and str(run) in plain._repr_html_()
    outside = display.result_link(run, "", server=display.ServerRoot(tmp_path / "elsewhere"))
    assert outside.kind == "name"


def test_jupyter_server_root_is_the_deepest_server_root_holding_the_folder(tmp_path, monkeypatch):
    import jupyter_server.serverapp as serverapp

    (tmp_path / "a" / "b").mkdir(parents=True)
    servers = [{"root_dir": str(tmp_path), "base_url": "/"}, {"root_dir": str(tmp_path / "a"), "base_url": "/x/"},
               {"root_dir": str(tmp_path / "other"), "base_url": "/y/"}]  # fmt: skip
    monkeypatch.setattr(serverapp, "list_running_servers", lambda: iter(servers))
    monkeypatch.delenv(display.HEADLESS_ENV, raising=False)
    assert display.jupyter_server_root(tmp_path / "a" / "b") == display.ServerRoot((tmp_path / "a").resolve(), "/x/")
    assert display.jupyter_server_root(tmp_path / "c") == display.ServerRoot(tmp_path.resolve(), "/")
    monkeypatch.setattr(serverapp, "list_running_servers", lambda: iter([]))
    assert display.jupyter_server_root(tmp_path) is None


def test_binary_files_get_download_links_text_and_images_open(tmp_path):
    """JupyterLab opens a file it has no viewer for in its text editor ("is not UTF-8 encoded"):
    binary files download instead; text (UTF-8, a character cut at the probe's end too) and images open."""
    (tmp_path / "splats.ply").write_bytes(b"ply\nformat binary_little_endian 1.0\nend_header\n" + bytes(range(256)))
    (tmp_path / "checkpoint.pt").write_bytes(b"PK\x03\x04\x00\x00\xff\xfe")
    (tmp_path / "curves.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")
    (tmp_path / "cut.txt").write_bytes(("x" * 9 + "é").encode()[:10])  # 'é' cut in half at the probe's end
    for name, kind in (("splats.ply", "download"), ("checkpoint.pt", "download"), ("curves.png", "file"),
                       ("table.csv", "file")):  # fmt: skip
        link = display.result_link(tmp_path / name, str(tmp_path), name)
        assert link.kind == kind, name
        assert link.href == name
    ply = display.result_link(tmp_path / "splats.ply", str(tmp_path))._repr_html_()
    assert "<a href='splats.ply' download>" in ply and "target=" not in ply
    assert display.opens_as_text_or_image(tmp_path / "cut.txt", probe_bytes=10)


def test_result_link_escapes_html(tmp_path):
    odd = tmp_path / "a'b<c>.txt"
    odd.write_text("x")
    html_text = display.result_link(odd, str(tmp_path))._repr_html_()
    assert "<c>" not in html_text and "&#x27;" in html_text


# ---- readable tables ---------------------------------------------------------------------------


def test_readable_tables_have_no_exponents():
    raw = pd.DataFrame({"case": ["a", "b"], "per_s": [2.509551e06, 0.000123], "median_s": [2.31e-05, 0.0123],
                        "runs": [10, 10]})  # fmt: skip
    assert "2.509551e+06" in raw._repr_html_() and "2.509551e+06" in repr(raw)  # what pandas does by itself
    table = display.readable(raw)
    for shown in (table._repr_html_(), repr(table)):
        assert not re.search(r"\de[+-]\d", shown), shown
        assert "2,509,551" in shown and "0.000123" in shown and "0.0000231" in shown and "0.0123" in shown
    pd.testing.assert_frame_equal(pd.DataFrame(table), raw)  # the values themselves unchanged
    assert [display.readable_number(v) for v in (123.456, 12345.0, float("nan"), 0.1)] == ["123.5", "12,345", "", "0.1"]


def test_field_training_bar_is_a_notebook_widget_in_a_notebook(monkeypatch):
    """Notebook 01's bar went to stderr as text (a pink box) while 02's is a widget: both use tqdm.auto."""
    import tqdm.auto

    from gsworkbench import field

    made = []

    class Recorder(tqdm.auto.tqdm):
        def __init__(self, *args, **kw) -> None:
            made.append(kw.get("desc"))
            super().__init__(*args, **{**kw, "disable": True})

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    tgt = field.make_target("torus", seed=0)
    model = field.GaussianField(4, "diag", backend="torch", seed=0)
    field.train_field(model, tgt, field.FieldTrainConfig(iterations=2, batch_size=16, seed=0))
    assert made == ["train"]


# ---- metrics -----------------------------------------------------------------------------------


def test_metrics_table_formats_known_and_unknown_metrics():
    metrics = {"train_seconds": 7.306191269999999, "psnr_db": 23.456789, "ssim": 0.812345,
               "lpips": "not computed", "num_gaussians": 12345, "iterations": 150,
               "median_step_ms": float("nan"), "extra": 1.23456789}  # fmt: skip
    table = display.metrics_table(metrics)
    assert list(table.columns) == ["value", "unit"]
    assert list(table.index[:3]) == ["PSNR, test views (mean)", "SSIM, test views (mean)", "LPIPS"]
    assert table.loc["PSNR, test views (mean)", "value"] == "23.46"
    assert table.loc["PSNR, test views (mean)", "unit"] == "dB"
    assert table.loc["training time", "value"] == "7.3" and table.loc["training time", "unit"] == "s"
    assert table.loc["Gaussians at the end", "value"] == "12,345"
    assert table.loc["median step time", "value"] == "n/a"
    assert table.loc["LPIPS", "value"] == "not computed"
    assert table.loc["extra", "value"] == "1.235"  # unknown: its own name, 4 significant digits
    assert len(table) == len(metrics)


def test_the_lpips_note_is_shown_whole():
    """The LPIPS row of the metrics table was cut off mid-sentence (pandas' 50-character cells)."""
    from gsworkbench.train.evaluate import LPIPS_NOTE

    table = display.metrics_table({"psnr_db": 20.0, "lpips": LPIPS_NOTE})
    assert len(LPIPS_NOTE) > 50
    assert LPIPS_NOTE in table._repr_html_() and LPIPS_NOTE in repr(table)
    assert "..." not in repr(table)


# ---- flamegraphs -------------------------------------------------------------------------------


def test_flamegraph_boxes_carry_tooltips_positions_and_the_zoom_script():
    svg = flamegraph.flamegraph_svg(FOLDED, title="t")
    doc = xml.dom.minidom.parseString(svg)  # well-formed XML, script included
    frames = [g for g in doc.getElementsByTagName("g") if g.getAttribute("class") == "fg-f"]
    assert len(frames) == 5  # all, main, f, h, kernel
    for g in frames:
        assert g.getElementsByTagName("title") and g.getElementsByTagName("rect")
        assert {"data-x", "data-w", "data-d"} <= set(g.attributes.keys())
    root = next(g for g in frames if g.getAttribute("data-d") == "0")
    assert float(root.getAttribute("data-w")) == pytest.approx(flamegraph.WIDTH_PX - 2 * flamegraph.MARGIN_PX)
    scripts = doc.getElementsByTagName("script")
    assert len(scripts) == 1 and "currentScript" in scripts[0].firstChild.data
    assert "var W = 1200, M = 10, CH = 6.6;" in svg


def test_cut_labels_keep_their_full_name():
    long = "a_very_long_function_name_that_cannot_fit (module.py:1)"
    svg = flamegraph.flamegraph_svg({f"main (a.py:1);{long}": 1, "main (a.py:1);g (a.py:2)": 400})
    assert f'data-n="{long}"' in svg
    assert flamegraph._fit_label(long, 20) == "" and flamegraph._fit_label("abc", 1000) == "abc"
    assert flamegraph._fit_label(long, 100).endswith("..") and len(flamegraph._fit_label(long, 100)) == 14


def test_inline_svg_fits_the_width_and_keeps_the_view_box():
    svg = flamegraph.flamegraph_svg(FOLDED)
    inline = flamegraph.inline_svg(svg)
    head = inline[: inline.index(">")]
    assert 'width="100%"' in head and "height=" not in head.replace("height: auto", "")
    assert re.search(r'viewBox="0 0 1200 \d+"', head)
    assert inline.count("<title>") == svg.count("<title>") and "<script>" in inline


def test_svg_view_is_inline_html_with_a_link(tmp_path):
    path = tmp_path / "flamegraph.svg"
    path.write_text(flamegraph.flamegraph_svg(FOLDED))
    view = display.svg_view(path, str(tmp_path))
    out = view._repr_html_()
    assert out.lstrip().startswith("<div") and "<svg " in out and "<img" not in out
    assert "<a href='flamegraph.svg'" in out
    assert "flamegraph.svg" in repr(view)


# ---- profiler noise ----------------------------------------------------------------------------

KINETO = (
    "USDT:2026-11-24 06:19:19 6908:6908 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
    "STAGE:2024-01-01 10:00:00 123:456 ActivityProfilerController.cpp:312] Completed Stage: Warm Up\n"
)


def test_drop_lines_keeps_everything_else():
    text = KINETO + "a real warning\n" + "USDT is mentioned here\n"
    assert quiet.drop_lines(text) == "a real warning\nUSDT is mentioned here\n"


def test_filtered_stderr_drops_kineto_lines_written_to_fd_2(capfd):
    with quiet.filtered_stderr():
        os.write(2, KINETO.encode())
        os.write(2, b"kept line\n")
        print("to stdout")
    out, err = capfd.readouterr()
    assert "USDT" not in err and "STAGE" not in err
    assert "kept line" in err and "to stdout" in out


def test_filtered_stderr_restores_fd_2_after_an_error(capfd):
    with pytest.raises(RuntimeError), quiet.filtered_stderr():
        os.write(2, b"before the error\n")
        raise RuntimeError("boom")
    os.write(2, b"after\n")
    sys.stderr.flush()
    err = capfd.readouterr().err
    assert "before the error" in err and "after" in err


# ---- plots and tables --------------------------------------------------------------------------


def _render_bench(configs):
    rows = []
    for b, n, s in configs:
        for k, st in enumerate(["project", "sh", "isect", "rasterize", "backward"]):
            rows.append(dict(backend=b, num=n, width=s, height=s, stage=st, median_s=1e-4 * (k + 1) * n / 500))
    return pd.DataFrame(rows)


def test_stage_breakdown_labels_do_not_overlap():
    import matplotlib.pyplot as plt

    from gsworkbench.splat.plots import stage_breakdown

    configs = [("ext", n, s) for n in (2000, 20000, 100000) for s in (128, 256, 512)] + [("torch", 2000, 128)]
    fig = stage_breakdown(_render_bench(configs), ["ext", "torch"], 3)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = [t for t in ax.get_yticklabels() if t.get_text()]
        assert all("\n" not in t.get_text() for t in labels)
        boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.y0)
        assert all(lo.y1 <= hi.y0 + 0.5 for lo, hi in zip(boxes, boxes[1:])), "tick labels overlap"
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][0] == "N=2k, 128×128"
    plt.close(fig)


def _field_sweep() -> pd.DataFrame:
    rows = []
    for n in (100, 1000, 4096):
        for mode, slow in (("eager", 1.0), ("aot_eager", 1.5), ("inductor", 0.7)):
            rows.append(dict(N=n, B=5000, backend="ext", covariance="full", mode="forward", compile=mode,
                             pairs_per_s=1e9 / slow * n**-0.1))  # fmt: skip
    return pd.DataFrame(rows)


def test_compile_variants_are_separate_scaling_series():
    import matplotlib.pyplot as plt

    df = _field_sweep()
    spec = SPECS["field"][0]
    assert series_columns(df, spec)[-1] == "compile"
    assert series_columns(df[df.compile == "eager"], spec) == spec.series  # one variant: not a series
    fits = scaling_fits(df, spec)
    assert len(fits) == 3 and all("compile=" in s for s in fits.series)
    fig, ax = plt.subplots()
    plot_scaling(ax, df, spec)
    assert len(ax.lines) == 3 and all(len(line.get_xdata()) == 3 for line in ax.lines)  # no stacked points
    plt.close(fig)


def test_fit_table_keeps_the_note_on_one_line():
    note = "cost grows slower than the work (exponent -0.50, expected +0.00): overheads"
    fits = pd.DataFrame([{"series": "backend=ext", "exponent": -0.5, "stderr": 0.01, "expected": 0.0, "sizes": 3,
                          "note": note}])  # fmt: skip
    out = fit_table(fits).to_html()
    assert "white-space: nowrap" in out and "-0.50" in out and "+0" in out
    assert not math.isnan(fits.exponent[0])


def test_html_pages_open_in_a_new_tab_through_the_servers_files_url(tmp_path, monkeypatch):
    """JupyterLab's HTML viewer runs no script until "Trust HTML" is clicked, so the viewer page would
    show blank: a page links to the server's files/ URL in a new browser tab; with no server found, a
    relative link says what to click."""
    run = tmp_path / "results" / "run 1"
    run.mkdir(parents=True)
    (run / "viewer.html").write_text("<html><script>1</script></html>")
    monkeypatch.chdir(tmp_path)
    link = display.result_link(run / "viewer.html", "", "viewer page", server=display.ServerRoot(tmp_path, "/user/me"))
    assert link.kind == "page" and link.href == "/user/me/files/results/run%201/viewer.html"
    out = link._repr_html_()
    assert "target='_blank'" in out and "new browser tab" in out and "Trust HTML" not in out
    monkeypatch.setenv(display.HEADLESS_ENV, "1")
    plain = display.result_link(run / "viewer.html", "", "viewer page")
    assert plain.kind == "page" and plain.href == "results/run 1/viewer.html"
    assert "Trust HTML" in plain._repr_html_()
