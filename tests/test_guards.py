"""Paper-scale resource guards (privkit.studies.guards) on a rehearsal data root: every input of each paper branch is
checked before anything loads, all missing parts are reported at once, and the plan counts and probes the run."""

from __future__ import annotations

import pytest

from privkit import config
from privkit.errors import InvalidArgumentError, MissingResourceError, UnknownNameError
from privkit.reproduce import write_rehearsal_root
from privkit.studies.guards import check_paper_inputs, plan_paper_run

pytestmark = pytest.mark.slow  # writes a rehearsal root (about 10 s)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = tmp_path_factory.mktemp("rehearsal") / "root"
    write_rehearsal_root(r)
    return r


@pytest.mark.parametrize("paper", ["isp", "dppose", "scoreshield", "synthesisnet"])
def test_every_input_of_the_paper_branch_is_found(root, paper):
    found = dict(check_paper_inputs(paper, config.load(paper, "rehearsal"), root))
    assert found and all(str(root) in where for where in found.values())
    plan = plan_paper_run(paper, config.load(paper, "rehearsal"), root, probe_images=2)
    text = plan.text()
    assert f"Paper-scale run of {paper}" in text and "planned:" in text and all(w in text for w in found)
    if paper in ("isp", "synthesisnet"):
        assert plan.probe["decode"] > 0 and plan.estimate_seconds > 0 and plan.memory_bytes > 0
    if paper == "isp":  # every encoder the notebook embeds with is probed
        assert {k for k in plan.probe if k.startswith("embed")} == {
            "embed dlib-resnet-fr", "embed clip-vit-b16", "embed dinov2-vitb14", "embed sscd"}
    if paper == "scoreshield":
        assert plan.counts["LFW images"] > 0 and "embed dlib-resnet-fr" in plan.probe


def test_all_missing_inputs_are_listed_at_once(root, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(root, broken)
    (broken / "celeba" / "identity_CelebA.txt").unlink()
    shutil.rmtree(broken / "weights" / "sscd")
    with pytest.raises(MissingResourceError) as err:
        check_paper_inputs("isp", config.load("isp", "rehearsal"), broken)
    msg = str(err.value)
    assert "2 input(s) of the isp paper path" in msg and "identity_CelebA.txt" in msg and "sscd" in msg
    assert "Nothing was loaded yet" in msg
    (broken / "lfw" / "pairs.txt").write_text("10 6\nnot a pair line\n")
    with pytest.raises(MissingResourceError, match="pairs.txt"):
        check_paper_inputs("scoreshield", config.load("scoreshield", "rehearsal"), broken)
    shutil.rmtree(broken / "weights" / "tiny_vit_5m")
    with pytest.raises(MissingResourceError, match="TinyViT-5M"):
        check_paper_inputs("dppose", config.load("dppose", "rehearsal"), broken)


def test_bad_arguments(root, tmp_path):
    with pytest.raises(UnknownNameError, match="paper"):
        check_paper_inputs("nope", None, root)
    with pytest.raises(MissingResourceError, match="data root"):
        check_paper_inputs("isp", config.load("isp", "rehearsal"), tmp_path / "nowhere")
    with pytest.raises(InvalidArgumentError, match="probe_images"):
        plan_paper_run("isp", config.load("isp", "rehearsal"), root, probe_images=-1)
