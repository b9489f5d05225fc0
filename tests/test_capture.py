"""Photos to a splat to orbit in one call (gsworkbench.capture): the files a user opens, the summary's
contents, going on from the finished stages, and other inputs into the same folder refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gsworkbench.capture.workflow as workflow
from gsworkbench.capture import capture
from gsworkbench.cli.main import main
from gsworkbench.core.splats import SplatSet
from gsworkbench.io import read_ply
from gsworkbench.studies.photo_set import write_photos
from gsworkbench.viewer.data import bundle_built


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("photos")
    write_photos(folder, 12)
    return folder


def test_photos_become_splats_a_viewer_page_and_a_summary(photos: Path, tmp_path: Path, monkeypatch) -> None:
    said: list[str] = []
    out = tmp_path / "capture"
    result = capture(photos, out, preset="smoke", iterations=40, progress=False, log=said.append)
    assert result.folder == out.resolve() and set(result.seconds) == {"reconstruct", "train", "export"}
    splats = read_ply(result.splats)
    assert isinstance(splats, SplatSet) and len(splats) > 100
    assert (result.viewer is not None) == bundle_built()
    page = result.summary.read_text()
    for part in ("Capture summary", "Minutes per stage", "images registered", "PSNR, held-out photos",
                 "PSNR, background only",
                 "data:image/png;base64,", "held-out photo | render | error"):  # fmt: skip
        assert part in page, part
    if result.viewer is not None:
        assert "href='viewer.html'" in page
    assert result.metrics["psnr_db"] > 10 and len(result.evaluation) >= 1 and len(result.history) == 40
    share = result.evaluation["background_share"]  # the SfM points leave part of each photo uncovered
    assert ((share > 0) & (share < 1)).all() and result.evaluation["psnr_background_db"].notna().all()
    assert any(line.startswith("capture: ") and "held-out PSNR" in line for line in said)
    state = json.loads((out / "capture.json").read_text())
    assert state["inputs"]["preset"] == "smoke" and set(state["seconds"]) == set(result.seconds)

    # the same call again: the finished stages are read back, not run again
    def must_not_run(*a, **k):
        raise AssertionError("a finished stage ran again")

    monkeypatch.setattr(workflow, "train", must_not_run)
    monkeypatch.setattr(workflow, "save_viewer_html", must_not_run)
    again = capture(photos, out, preset="smoke", iterations=40, progress=False, log=None)
    assert again.metrics["psnr_db"] == result.metrics["psnr_db"] and again.seconds == result.seconds
    assert again.viewer == result.viewer and again.summary.read_text() == page
    with pytest.raises(ValueError, match="other input or options .*iterations"):
        capture(photos, out, preset="smoke", iterations=50, progress=False, log=None)


def test_an_interrupted_training_goes_on_from_its_checkpoint(photos: Path, tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C during training: the reconstruction and the training's checkpoint stay; the same call
    resumes the training from them."""
    out = tmp_path / "capture"
    real_train = workflow.train
    calls: list[dict] = []

    def interrupted_once(data, config, **kw):  # noqa: ANN001, ANN202
        calls.append(kw)
        if len(calls) == 1:  # the first run is stopped after a few steps, as Ctrl-C stops it
            real_train(data, config.with_flat(iterations=5), **kw)
            (Path(kw["results_dir"]) / "metrics.json").unlink()  # an interrupted run leaves no metrics
            raise KeyboardInterrupt("training interrupted")
        return real_train(data, config, **kw)

    monkeypatch.setattr(workflow, "train", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        capture(photos, out, preset="smoke", iterations=20, progress=False, log=None)
    assert set(json.loads((out / "capture.json").read_text())["seconds"]) == {"reconstruct"}
    result = capture(photos, out, preset="smoke", iterations=20, progress=False, log=None)
    assert calls[1]["resume"] == out.resolve() / "training" and result.splats.is_file()


def test_the_capture_command_names_missing_photos_in_one_line(tmp_path: Path, capsys) -> None:
    assert main(["capture", str(tmp_path / "nowhere"), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "photos not found" in err
