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


@pytest.mark.parametrize("paper", ["dppose", "synthesisnet"])
def test_training_probe_is_extrapolated_to_every_planned_run(root, paper):
    import math

    cfg = config.load(paper, "rehearsal")
    plan = plan_paper_run(paper, cfg, root, probe_images=2)
    assert plan.training_seconds > 0 and "estimated training time of every planned run" in plan.text()
    assert plan.probe_peak_bytes is None  # CPU: not measured
    probe = plan.training_probe
    if paper == "synthesisnet":
        n_train = cfg.n_train_identities * cfg.images_per_identity
        expected = n_train * (cfg.epochs_ae / probe["autoencoder images/s"] + 2 * cfg.epochs_gan / probe["GAN images/s"])
    else:
        from privkit.studies.dppose.experiments import design_runs

        runs = design_runs(cfg)
        assert {f"{r.method} s/step" for r in runs} | {"nonprivate s/step"} == {k for k in probe if k.endswith("s/step")}
        assert {k for k in probe if k.endswith("s/refresh")} == {"projected s/refresh", "feature_projective s/refresh"}
        n = plan.counts["private records"]
        expected = cfg.pretrain_epochs * round(cfg.n_public / min(cfg.batch_size, cfg.n_public)) * probe["nonprivate s/step"]
        for r in runs:
            steps = (cfg.nonprivate_epochs if r.method == "nonprivate" else cfg.epochs) * round(n / cfg.batch_size)
            expected += steps * probe[f"{r.method} s/step"] + math.ceil(steps / cfg.refresh) * probe.get(
                f"{r.method} s/refresh", 0.0)
    assert plan.training_seconds == pytest.approx(expected)
    off = plan_paper_run(paper, cfg, root, probe_images=2, probe_training=False)
    assert not off.training_probe and off.training_seconds == 0 and "training probe" not in off.text()
    with pytest.raises(InvalidArgumentError, match="probe_training"):
        plan_paper_run(paper, cfg, root, probe_training="yes")


def test_planned_steps_follow_the_trainer(root):
    """The guard counts a run's steps with the trainer's own rule (epochs × round(n / batch))."""
    from dataclasses import replace

    from privkit.dppose import build_pose_model
    from privkit.dppose.train import DPSpec, Schedule, make_private
    from privkit.studies.guards import _random_poses, run_steps

    for n, bsz, epochs in ((16, 8, 1), (21, 8, 2), (10, 16, 3)):
        cfg = replace(config.load("dppose", "rehearsal"), batch_size=bsz, epochs=epochs, nonprivate_epochs=epochs + 1)
        data = _random_poses(n, 64, first_identity=0, seed=0)
        for method, dp in (("dpsgd", DPSpec(noise_multiplier=1.0, delta=1e-5, clip=1.0)), ("nonprivate", None)):
            sched = Schedule(epochs=epochs + (method == "nonprivate"), batch_size=min(bsz, n))
            trainer = make_private(build_pose_model(64), data, method=method, dp=dp, schedule=sched, device="cpu")
            assert run_steps(cfg, method, n) == trainer.total


def test_probe_seconds_times_steps_and_refreshes():
    from privkit.dppose import build_pose_model
    from privkit.dppose.train import DPSpec, PublicSpec, Schedule, make_private
    from privkit.studies.guards import _random_poses

    private = _random_poses(8, 64, first_identity=0, seed=0)
    public = _random_poses(6, 64, first_identity=8, seed=1)
    dp = DPSpec(noise_multiplier=1.0, delta=1e-5, clip=1.0)
    for method, pub in (("dpsgd", None), ("projected", PublicSpec(public_set=public, k=3, refresh=5))):
        trainer = make_private(build_pose_model(64), private, method=method, dp=dp, public=pub,
                               schedule=Schedule(batch_size=4), device="cpu")
        t = trainer.probe_seconds(steps=1)
        assert t["step"] > 0 and (t["refresh"] > 0) == (method == "projected")
    with pytest.raises(InvalidArgumentError, match="steps"):
        trainer.probe_seconds(steps=0)
    with pytest.raises(InvalidArgumentError, match="probe_seconds"):  # its model took unaccounted steps
        trainer.run()


def test_plan_lists_every_job_with_status_and_estimate(root, tmp_path):
    """python -m privkit plan: at the rehearsal scale every DP pose, SynthesisNet and ISP job is listed with its store
    status and a probed estimate; a stored job shows as done and leaves the estimate of what is still to run."""
    from privkit.jobs import JobResult, ResultStore
    from privkit.plan import plan_papers, plan_text
    from privkit.studies.dppose import jobs as J

    store = ResultStore(tmp_path / "store")
    cfg = config.load("dppose", "rehearsal")
    planned = J.planned_jobs(cfg, scale="rehearsal", seed=0, data_root=str(root))
    store.save(planned[0][2], JobResult(data={"pretend": True}))  # as if the first run had been trained
    plans = plan_papers(["dppose", "synthesisnet", "isp", "scoreshield"], scale="rehearsal", data_root=str(root),
                        device="cpu", store=store)
    dp, sn, isp, ss = plans
    n_dp = len(planned) + 2  # the training runs and the two no-noise controls
    assert len(dp.jobs) == n_dp and dp.counts() == {"done": 1, "failed": 0, "missing": n_dp - 1}
    assert [label for label, _, _ in dp.jobs[-2:]] == ["[controls] dppose dpsgd no-noise control",
                                                        "[controls] dppose projected no-noise control"]
    assert all(est is not None and est > 0 for _, _, est in dp.jobs)
    assert dp.remaining_seconds() == pytest.approx(sum(est for _, s, est in dp.jobs if s != "done"))
    assert [label for label, _, _ in sn.jobs] == ["synthesisnet method", "synthesisnet no_auxiliary_classifier"]
    assert sn.remaining_seconds() > 0
    icfg = config.load("isp", "rehearsal")
    embeds = [label for label, _, _ in isp.jobs if label.startswith("embed ")]
    assert len(embeds) == 2 * len(icfg.encoders)  # each encoder embeds the main set and the other set (ISP-X's fit)
    assert {label.split(" ")[1] for label, _, _ in isp.jobs} == {"attribution", "rank", "inversion", "celeba",
                                                                  "vggface2"}
    assert all(s == "missing" and est is not None and est >= 0 for _, s, est in isp.jobs)
    assert all(est > 0 for label, _, est in isp.jobs if "rank sweep" not in label)  # a [box] sweep embeds no copies
    assert isp.kernel_seconds == 0 and isp.remaining_seconds() == pytest.approx(sum(e for _, _, e in isp.jobs))
    scfg = config.load("scoreshield", "rehearsal")
    labels = [label for label, _, _ in ss.jobs]
    assert labels[0] == "embed lfw with dlib-resnet-fr" and len(labels) == len(set(labels))
    assert len(labels) == len(scfg.face_encoders) * (len(scfg.verification_sets) + (scfg.impostor_set is not None))
    assert all(s == "missing" and est is not None and est > 0 for label, s, est in ss.jobs if "lfw" in label)
    text = plan_text(plans)
    assert "CPU-hours" in text and planned[0][1].label in text and "1 done" in text


def test_plan_checks_every_input_before_probing(tmp_path):
    from privkit.errors import MissingResourceError
    from privkit.jobs import ResultStore
    from privkit.plan import plan_papers

    (tmp_path / "root").mkdir()
    with pytest.raises(MissingResourceError):
        plan_papers(["dppose"], scale="paper", data_root=str(tmp_path / "root"), store=ResultStore(tmp_path / "s"))
