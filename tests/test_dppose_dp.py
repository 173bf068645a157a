"""privkit.dppose: per-sample gradients, clipping, sensitivity, public subspace, auditing, trainers."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from privkit.data.types import PoseSet
from privkit.dppose import (
    DPSpec,
    PublicSpec,
    Schedule,
    METHODS,
    GaussianBlur,
    build_pose_model,
    clip_per_sample,
    clipped_grad_sum,
    evaluate_pckh,
    flatten_grads,
    per_sample_grads,
    per_sample_norms,
    pose_batch,
    pose_loss,
    public_subspace,
    public_subspace_from_model,
    train,
    trainable_parameters,
)
from privkit.dppose.grads import ClippedSum, add_gaussian_noise
from privkit.dppose.train import private_clipped_sum
from privkit.errors import (
    InsufficientDataError,
    InvalidArgumentError,
    MissingResourceError,
    PrivacyBudgetError,
    UnknownNameError,
)
from privkit.privacy import analytic_gaussian_epsilon, audit


SIZE = 32

# A stick figure in MPII order on a 32 x 32 canvas (x, y).
TEMPLATE = torch.tensor([
    [12.0, 28.0], [12.5, 23.0], [13.0, 18.0], [19.0, 18.0], [19.5, 23.0], [20.0, 28.0], [16.0, 18.0], [16.0, 10.0],
    [16.0, 8.0], [16.0, 3.0], [9.0, 17.0], [10.0, 13.0], [12.0, 9.0], [20.0, 9.0], [22.0, 13.0], [23.0, 17.0],
])


def make_poseset(n: int, *, seed: int, id_offset: int = 0, jitter: float = 3.0) -> PoseSet:
    """A learnable synthetic pose set: the template shifted per image, drawn as bright blobs on noise."""
    g = torch.Generator().manual_seed(seed)
    shift = (torch.rand(n, 1, 2, generator=g) * 2 - 1) * jitter
    kp = TEMPLATE.unsqueeze(0) + shift + 0.5 * torch.randn(n, 16, 2, generator=g)
    yy, xx = torch.meshgrid(torch.arange(SIZE, dtype=torch.float32), torch.arange(SIZE, dtype=torch.float32),
                            indexing="ij")
    d2 = (xx.view(1, 1, SIZE, SIZE) - kp[..., 0, None, None]) ** 2 + (yy.view(1, 1, SIZE, SIZE) - kp[..., 1, None, None]) ** 2
    blobs = torch.exp(-d2 / 2.0)  # (n, 16, S, S)
    colour = torch.rand(16, 3, generator=g)
    img = 0.15 * torch.rand(n, 3, SIZE, SIZE, generator=g) + torch.einsum("njhw,jc->nchw", blobs, colour)
    head = torch.cat([kp[:, 9] - 3.0, kp[:, 9] + 3.0], dim=1)
    return PoseSet(images=img.clamp(0, 1), keypoints=kp, visible=torch.rand(n, 16, generator=g) > 0.1,
                   head_box=head, identity=torch.arange(n) + id_offset, name="stick")


def small_model(seed: int = 0, width: int = 4):
    return build_pose_model(SIZE, width=width, seed=seed)


def batch_of(model, data: PoseSet, n: int | None = None):
    idx = None if n is None else torch.arange(n)
    return pose_batch(model, data, idx)


@pytest.fixture(scope="module")
def data() -> PoseSet:
    return make_poseset(48, seed=0)


@pytest.fixture(scope="module")
def public() -> PoseSet:
    return make_poseset(24, seed=1, id_offset=10_000)


# ------------------------------------------------------------------------------------------- per-sample gradients
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_per_sample_grads_match_opacus(data):
    from opacus import GradSampleModule

    model = small_model()
    batch = batch_of(model, data, 8)
    ours = per_sample_grads(model, pose_loss, batch)
    hooks = per_sample_grads(model, pose_loss, batch, method="hooks")
    chunked = per_sample_grads(model, pose_loss, batch, chunk_size=3)
    ref_model = small_model()
    gsm = GradSampleModule(ref_model)
    pose_loss(gsm(batch[0]), *batch[1:]).backward()
    ref = {n.removeprefix("_module."): p.grad_sample for n, p in gsm.named_parameters()}
    assert list(ours) == list(trainable_parameters(model))
    scale = max(float(r.abs().max()) for r in ref.values())
    assert scale > 0
    for name, g in ours.items():
        assert g.shape == (8, *trainable_parameters(model)[name].shape)
        assert float((g - ref[name]).abs().max()) <= 1e-5
        assert float((g - ref[name]).abs().max()) <= 1e-4 * scale, name  # relative: the grads are small
        assert float((hooks[name] - g).abs().max()) <= 1e-4 * scale, name
        assert float((chunked[name] - g).abs().max()) <= 1e-5 * scale, name
    # per-sample gradients sum to the batch gradient (times B)
    model.zero_grad()
    pose_loss(model(batch[0]), *batch[1:]).backward()
    for name, p in trainable_parameters(model).items():
        assert torch.allclose(ours[name].sum(0) / 8, p.grad, atol=1e-6 * scale, rtol=1e-4)


def test_clipping_and_fast_clipped_sum(data):
    model = small_model()
    batch = batch_of(model, data, 10)
    ps = per_sample_grads(model, pose_loss, batch)
    norms = per_sample_norms(ps)
    clip = float(norms.median())
    clipped = clip_per_sample(ps, clip)
    cn = per_sample_norms(clipped)
    big = norms > clip
    assert bool(big.any()) and bool((~big).any())
    factor = torch.clamp(clip / (norms + 1e-6), max=1.0)  # min(1, C / (|g| + 1e-6))
    assert torch.allclose(cn, norms * factor, rtol=1e-5)
    assert bool((cn <= clip).all()) and torch.allclose(cn[big], torch.full_like(cn[big], clip), rtol=1e-3)
    small = norms + 1e-6 <= clip
    assert bool(small.any()) and torch.equal(cn[small], norms[small])  # factor exactly 1 below C
    ref = {n: g.sum(0) for n, g in clipped.items()}
    scale = max(float(r.abs().max()) for r in ref.values())
    for method in ("hooks", "vmap"):
        cs = clipped_grad_sum(model, pose_loss, batch, clip=clip, method=method)
        assert torch.allclose(cs.norms, norms, rtol=1e-4)
        assert cs.batch_size == 10 and cs.loss.item() == pytest.approx(pose_loss(model(batch[0]), *batch[1:]).item(),
                                                                         rel=1e-5)
        for n in ref:
            assert float((cs.grads[n] - ref[n]).abs().max()) <= 1e-4 * scale, (method, n)
    empty = clipped_grad_sum(model, pose_loss, tuple(t[:0] for t in batch), clip=clip)
    assert empty.batch_size == 0 and float(empty.flat().abs().sum()) == 0.0
    with pytest.raises(InvalidArgumentError):
        clipped_grad_sum(model, pose_loss, batch, clip=0.0)
    with pytest.raises(InvalidArgumentError):
        clip_per_sample(ps, -1.0)


class _Zoo(torch.nn.Module):
    """Every layer type the hooks path handles: grouped/1x1/strided convs, GroupNorm, LayerNorm, a shared Linear."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=True)
        self.gn = torch.nn.GroupNorm(2, 4)
        self.c2 = torch.nn.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2)
        self.c3 = torch.nn.Conv2d(6, 5, 1)
        self.ln = torch.nn.LayerNorm(5)
        self.shared = torch.nn.Linear(5, 5)
        self.out = torch.nn.Linear(5, 3, bias=False)
        self.frozen = torch.nn.Linear(3, 3)
        self.frozen.weight.requires_grad_(False)  # only its bias is trained

    def forward(self, x):
        h = self.c3(torch.tanh(self.c2(torch.relu(self.gn(self.c1(x))))))  # (B, 5, 4, 4)
        h = self.ln(h.flatten(2).transpose(1, 2))  # (B, 16, 5): a sequence of 16 tokens
        h = self.shared(torch.tanh(self.shared(h)))  # the same Linear twice
        return self.frozen(self.out(h).mean(1))


def test_hooks_path_covers_every_supported_layer_type():
    g = torch.Generator().manual_seed(0)
    with torch.random.fork_rng():
        torch.manual_seed(0)  # test code only: the zoo's default initialisation
        net = _Zoo()
    x = torch.randn(6, 3, 8, 8, generator=g)
    y = torch.randn(6, 3, generator=g)

    def loss_fn(out, target):
        return ((out - target) ** 2).sum(1).mean()

    ref = per_sample_grads(net, loss_fn, (x, y), method="vmap")
    hooks = per_sample_grads(net, loss_fn, (x, y), method="hooks")
    assert list(ref) == list(hooks) and "frozen.weight" not in ref and "frozen.bias" in ref
    for name in ref:
        assert torch.allclose(hooks[name], ref[name], atol=1e-6, rtol=1e-4), name
    clip = float(per_sample_norms(ref).median())
    a = clipped_grad_sum(net, loss_fn, (x, y), clip=clip, method="hooks")
    b = clipped_grad_sum(net, loss_fn, (x, y), clip=clip, method="vmap")
    assert torch.allclose(a.norms, b.norms, rtol=1e-4)
    assert torch.allclose(a.flat(), b.flat(), atol=1e-6, rtol=1e-4)


def test_batchnorm_in_train_mode_is_refused():
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(), torch.nn.LazyLinear(2))
    x = torch.rand(4, 3, 8, 8)
    net(x)
    with pytest.raises(InvalidArgumentError, match="BatchNorm"):
        per_sample_grads(net, lambda o, y: ((o - y) ** 2).mean(), (x, torch.zeros(4, 2)))


# ------------------------------------------------------------------------------------------- sensitivity
@pytest.mark.parametrize("method", [m for m in METHODS if m != "nonprivate"])
def test_private_part_sensitivity(data, method):
    model = small_model(seed=1)
    clip = 1e-4  # far below every gradient norm: every record is clipped to exactly C
    full = batch_of(model, data, 12)
    s_full = private_clipped_sum(model, full, method=method, clip=clip)
    assert bool((s_full.norms > clip).all())
    for i in (0, 5, 11):
        keep = torch.tensor([j for j in range(12) if j != i])
        removed = tuple(t[keep] for t in full)
        s_rem = private_clipped_sum(model, removed, method=method, clip=clip)
        d = float(torch.linalg.vector_norm(s_full.flat() - s_rem.flat()))
        assert d <= clip * (1 + 1e-4)
        assert d == pytest.approx(clip, rel=1e-3)  # one clip per record: exactly C, never 2C
        other = pose_batch(model, data, torch.tensor([20 + i]))
        replaced = tuple(torch.cat([t[keep], o]) for t, o in zip(full, other))
        s_rep = private_clipped_sum(model, replaced, method=method, clip=clip)
        d2 = float(torch.linalg.vector_norm(s_full.flat() - s_rep.flat()))
        assert 0 < d2 <= 2 * clip * (1 + 1e-4)


# ------------------------------------------------------------------------------------------- public subspace
def test_public_subspace_is_the_top_k_orthogonal_projector():
    g = torch.Generator().manual_seed(0)
    m, p, k = 12, 40, 5
    grads = torch.randn(m, 3, generator=g, dtype=torch.float64) @ torch.randn(3, p, generator=g, dtype=torch.float64)
    grads = grads * 3 + 0.3 * torch.randn(m, p, generator=g, dtype=torch.float64)
    sub = public_subspace(grads, k=k)
    proj = sub.projector()
    assert sub.rank == k and sub.dim == p
    assert torch.allclose(proj, proj.T, atol=1e-12)
    assert torch.allclose(proj @ proj, proj, atol=1e-10)
    assert int(torch.linalg.matrix_rank(proj)) == k
    assert torch.allclose(sub.basis.T @ sub.basis, torch.eye(k, dtype=torch.float64), atol=1e-10)
    q, _ = torch.linalg.qr(grads.T)  # range of the public gradients
    assert torch.allclose(q @ (q.T @ sub.basis), sub.basis, atol=1e-10)
    evals, evecs = torch.linalg.eigh(grads.T @ grads / m)  # the p x p second moment, directly
    top = evecs[:, -k:]
    assert torch.allclose(top @ top.T, proj, atol=1e-8)
    assert torch.allclose(sub.eigenvalues, evals.flip(0)[:k], rtol=1e-8)
    v = torch.randn(p, generator=g, dtype=torch.float64)
    assert torch.allclose(sub.project(v), proj @ v, atol=1e-12)
    full = public_subspace(grads, k=m)
    assert torch.allclose(full.project(grads), grads, atol=1e-9)  # k = m: the span of the public gradients
    with pytest.raises(InvalidArgumentError):
        public_subspace(grads, k=m + 1)
    with pytest.raises(InsufficientDataError):
        public_subspace(grads[:0], k=1)
    low = torch.randn(m, 2, generator=g, dtype=torch.float64) @ torch.randn(2, p, generator=g, dtype=torch.float64)
    with pytest.raises(InsufficientDataError, match="span only 2"):
        public_subspace(low, k=4)
    assert public_subspace(low, k=4, allow_lower_rank=True).rank == 2


@pytest.mark.slow
def test_public_subspace_from_model_uses_per_sample_public_gradients(public):
    model = small_model()
    pub = batch_of(model, public, 16)
    sub = public_subspace_from_model(model, pose_loss, pub, k=6)
    g = flatten_grads(per_sample_grads(model, pose_loss, pub), batched=True)
    assert sub.rank == 6 and sub.dim == g.shape[1]
    assert torch.allclose(sub.basis.T @ sub.basis, torch.eye(6), atol=1e-4)
    # the top direction captures more public-gradient energy than any single other basis direction
    energy = (g @ sub.basis).pow(2).sum(0)
    assert bool((energy[:-1] >= energy[1:] * (1 - 1e-4)).all())


# ------------------------------------------------------------------------------------------- auditing one step
def _audit_model():
    model = small_model(seed=2)
    for name, p in model.named_parameters():  # a small trainable set keeps the noise vectors cheap
        p.requires_grad_(name.startswith("backbone.body.0") or name.startswith("head.proj"))
    return model


def _noisy_step_mechanism(direction: torch.Tensor, sigma: float, clip: float):
    """One noisy clipped-sum release, post-processed onto a fixed direction (post-processing keeps DP)."""

    def mechanism(total: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
        noisy = add_gaussian_noise(total.expand(n, -1), clip=clip, noise_multiplier=sigma, generator=generator)
        return (noisy @ direction).unsqueeze(1)

    return mechanism


@pytest.mark.slow
def test_one_noisy_step_audits_below_its_claim_and_double_clipping_is_caught(data):
    model = _audit_model()
    clip, sigma, delta = 1e-4, 1.0, 1e-3
    blur = GaussianBlur(kernel_size=3, sigma=0.6)
    full = batch_of(model, data, 6)
    removed = tuple(t[1:] for t in full)
    replaced = tuple(torch.cat([t[1:], o]) for t, o in zip(full, pose_batch(model, data, torch.tensor([30]))))
    s_full = private_clipped_sum(model, full, method="feature", clip=clip).flat()
    s_rem = private_clipped_sum(model, removed, method="feature", clip=clip).flat()
    s_rep = private_clipped_sum(model, replaced, method="feature", clip=clip).flat()
    claim_remove = analytic_gaussian_epsilon(sigma * clip, delta, sensitivity=clip)
    claim_replace = analytic_gaussian_epsilon(sigma * clip, delta, sensitivity=2 * clip)
    for other, claim in ((s_rem, claim_remove), (s_rep, claim_replace)):
        u = (other - s_full) / torch.linalg.vector_norm(other - s_full)
        res = audit(_noisy_step_mechanism(u, sigma, clip), s_full, other, n_samples=40_000, delta=delta,
                    claimed_epsilon=claim, seed=1)
        assert res.passed, str(res)
        assert res.epsilon_lower > 0.3  # the audit has power: the step is not trivially private

    # The public code's bug: raw AND blurred per-sample gradients both enter the clipped sum.
    def double_clipped(batch):
        raw = clipped_grad_sum(model, pose_loss, batch, clip=clip).flat()
        blurred = (blur(batch[0]), *batch[1:])
        return raw + clipped_grad_sum(model, pose_loss, blurred, clip=clip).flat()

    b_full, b_rem = double_clipped(full), double_clipped(removed)
    assert float(torch.linalg.vector_norm(b_full - b_rem)) > 1.5 * clip  # sensitivity ~2C, not C
    u = (b_rem - b_full) / torch.linalg.vector_norm(b_rem - b_full)
    res = audit(_noisy_step_mechanism(u, sigma, clip), b_full, b_rem, n_samples=40_000, delta=delta,
                claimed_epsilon=claim_remove, seed=1)
    assert res.passed is False, str(res)
    assert res.epsilon_lower > claim_remove


# ------------------------------------------------------------------------------------------- trainers
def _params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@pytest.mark.slow
def test_dpsgd_accounting_matches_opacus_and_is_never_zero(data):
    from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
    from dp_accounting.rdp import RdpAccountant
    from opacus.accountants import RDPAccountant

    res = train(small_model(), data, method="dpsgd", dp=DPSpec(epsilon=3.0, delta=1e-5, clip=0.01, accountant="rdp"),
                schedule=Schedule(epochs=2, batch_size=12, log_every=2), device="cpu")
    assert res.steps == 8 and res.sample_rate == pytest.approx(12 / 48)
    acc = RDPAccountant()
    for _ in range(res.steps):
        acc.step(noise_multiplier=res.noise_multiplier, sample_rate=res.sample_rate)
    eps = acc.get_epsilon(delta=1e-5)
    assert res.guarantee.epsilon == pytest.approx(eps, rel=1e-9)
    assert 3.0 - 0.02 <= res.guarantee.epsilon <= 3.0
    assert res.guarantee.meets_request and res.guarantee.delta == 1e-5
    eps_hist = [h["eps_so_far"] for h in res.history]
    assert [h["step"] for h in res.history] == [2, 4, 6, 8]
    assert all(e > 0 for e in eps_hist) and eps_hist == sorted(eps_hist)
    assert eps_hist[-1] == pytest.approx(res.guarantee.epsilon)
    g = res.guarantee
    assert g.neighbours.relation == "add-remove-one" and g.neighbours.bound == 0.01 and g.neighbours.norm == "l2"
    assert "add/remove" in g.neighbouring and g.accountant == "opacus-rdp"
    # the event is the history the accountant was given: 8 steps of Poisson(q)-sampled Gaussian(sigma)
    assert isinstance(g.event, SelfComposedDpEvent) and g.event.count == res.steps
    assert isinstance(g.event.event, PoissonSampledDpEvent)
    assert g.event.event.sampling_probability == pytest.approx(res.sample_rate)
    assert g.event.event.event == GaussianDpEvent(res.noise_multiplier)
    # ... and dp_accounting's RDP accountant, at opacus's orders, turns it into the same epsilon
    rdp = RdpAccountant(orders=RDPAccountant.DEFAULT_ALPHAS, neighboring_relation=g.neighbours.accounting_relation())
    rdp.compose(g.event)
    assert rdp.get_epsilon(1e-5) == pytest.approx(g.epsilon, rel=1e-4)
    # a shorter run at the same noise spends less: epsilon follows the steps actually run
    half = train(small_model(), data, method="dpsgd",
                 dp=DPSpec(noise_multiplier=res.noise_multiplier, epsilon=3.0, delta=1e-5, clip=0.01, accountant="rdp"),
                 schedule=Schedule(epochs=1, batch_size=12), device="cpu")
    assert half.steps == 4 and half.guarantee.epsilon < res.guarantee.epsilon
    acc1 = RDPAccountant()
    for _ in range(half.steps):
        acc1.step(noise_multiplier=half.noise_multiplier, sample_rate=half.sample_rate)
    assert half.guarantee.epsilon == pytest.approx(acc1.get_epsilon(delta=1e-5), rel=1e-9)


@pytest.mark.slow
def test_trainers_are_deterministic_for_a_seed(data, public):
    dp = DPSpec(noise_multiplier=1.0, delta=1e-5, clip=0.01, accountant="rdp")
    kw = dict(dp=dp, schedule=Schedule(epochs=1, batch_size=16, log_every=3), device="cpu")
    pub = PublicSpec(public_set=public, k=4, refresh=2)
    a = train(None, data, method="feature_projective", public=pub, seed=5, **kw)
    b = train(None, data, method="feature_projective", public=pub, seed=5, **kw)
    c = train(None, data, method="feature_projective", public=pub, seed=6, **kw)
    assert torch.equal(_params(a.model), _params(b.model))
    assert not torch.equal(_params(a.model), _params(c.model))
    assert a.history == b.history
    assert a.noise_multiplier == 1.0 and a.guarantee.epsilon == b.guarantee.epsilon > 0
    d = train(None, data, method="dpsgd", seed=5, **{**kw, "dp": replace(dp, secure=True)})  # OS-entropy noise
    e = train(None, data, method="dpsgd", seed=5, **kw)
    assert not torch.equal(_params(d.model), _params(e.model))


@pytest.mark.parametrize("method", ["nonprivate", pytest.param("dpsgd", marks=pytest.mark.slow),
                                    pytest.param("feature_projective", marks=pytest.mark.slow)])
def test_micro_batches_take_the_same_step(data, public, method):
    """Schedule(micro_batch=m) processes a step's batch in parts and adds their sums: the same training (clipping is
    per record; the means are recombined with the parts' sizes), the subspace included, up to rounding."""
    sched = dict(epochs=1, batch_size=16, lr=0.05, optimizer="sgd", log_every=1)  # SGD: rounding stays rounding
    kw = dict(seed=4, device="cpu")
    if method != "nonprivate":
        kw.update(dp=DPSpec(noise_multiplier=1.0, delta=1e-5, clip=0.05, accountant="rdp"))
    if method == "feature_projective":
        kw.update(public=PublicSpec(public_set=public, k=4, refresh=2))
    whole = train(small_model(seed=2), data, method=method, schedule=Schedule(**sched), **kw)
    parts = train(small_model(seed=2), data, method=method, schedule=Schedule(**sched, micro_batch=5), **kw)
    assert parts.config["micro_batch"] == 5 and whole.config["micro_batch"] is None
    assert parts.steps == whole.steps and parts.guarantee.epsilon == whole.guarantee.epsilon
    assert torch.allclose(_params(parts.model), _params(whole.model), atol=1e-5, rtol=1e-4)
    for a, b in zip(parts.history, whole.history):
        assert a["batch_size"] == b["batch_size"] and a["loss"] == pytest.approx(b["loss"], rel=1e-4)
        if method != "nonprivate":  # a norm within rounding of C could count on one side only: a tolerance
            assert a["clipped_fraction"] == pytest.approx(b["clipped_fraction"], abs=0.1)
    with pytest.raises(InvalidArgumentError, match="micro_batch"):
        Schedule(micro_batch=0)


def test_clipped_sums_of_parts_combine_to_the_whole(data):
    model = small_model(seed=1)
    batch = batch_of(model, data, 12)
    whole = private_clipped_sum(model, batch, method="dpsgd", clip=0.05)
    parts = [private_clipped_sum(model, tuple(t[i:i + 5] for t in batch), method="dpsgd", clip=0.05)
             for i in (0, 5, 10)]
    both = ClippedSum.combine(parts)
    assert both.batch_size == 12 and both.non_finite == 0 and torch.equal(both.norms, torch.cat([p.norms for p in parts]))
    assert torch.allclose(both.flat(), whole.flat(), atol=1e-7, rtol=1e-5)
    assert torch.allclose(both.norms, whole.norms, rtol=1e-5) and float(both.loss) == pytest.approx(float(whole.loss),
                                                                                                    rel=1e-5)
    with pytest.raises(InvalidArgumentError, match="parts"):
        ClippedSum.combine([])


def test_projected_update_lies_in_the_public_subspace(data, public):
    model = small_model(seed=3)
    # one SGD step; a large lr makes the step large next to float32 rounding of the parameters
    kw = dict(dp=DPSpec(epsilon=2.0, delta=1e-5, clip=0.01, accountant="rdp"),
              schedule=Schedule(epochs=1, batch_size=48, optimizer="sgd", lr=1e3), device="cpu")
    res = train(model, data, method="projected", public=PublicSpec(public_set=public, k=5), **kw)
    assert res.steps == 1
    step = _params(res.model) - _params(model)
    sub = public_subspace_from_model(model, pose_loss, batch_of(model, public), k=5)
    norm = float(torch.linalg.vector_norm(step))
    assert norm > 0
    assert float(torch.linalg.vector_norm(step - sub.project(step))) <= 1e-4 * norm
    plain = _params(train(model, data, method="dpsgd", **kw).model) - _params(model)  # unprojected: mostly outside
    assert float(torch.linalg.vector_norm(plain - sub.project(plain))) >= 0.5 * float(torch.linalg.vector_norm(plain))
    assert "post-processing" in " ".join(res.guarantee.notes)


@pytest.mark.slow
def test_feature_methods_state_the_feature_level_guarantee(data, public):
    res = train(small_model(), data, method="feature",
                dp=DPSpec(noise_multiplier=0.3, epsilon=1.0, delta=1e-5, clip=0.01, accountant="rdp"),
                public=PublicSpec(blur=(5, 1.0)), schedule=Schedule(epochs=1, batch_size=16), device="cpu")
    g = res.guarantee
    assert g.neighbours.relation == "replace-one" and g.neighbours.bound == pytest.approx(2 * 0.01)
    assert g.neighbours.scale == pytest.approx(0.01)  # noise multipliers are relative to the clip C
    assert "ψ" in g.neighbours.detail and "labels" in g.neighbours.detail and "5x5" in g.neighbours.detail
    assert "ψ" in g.neighbouring and "5x5" in g.neighbouring  # rendered from the structure
    assert g.event.event.event.noise_multiplier == 0.3 and g.event.count == res.steps
    assert any("public view" in p for p in g.processing)
    assert "NOT the blurred image" in g.protects
    assert any("treated as public" in n and "q = B/n" in n for n in g.notes)  # what else the guarantee assumes
    assert g.epsilon > 1.0 and not g.meets_request and "NOT met" in str(g)  # too little noise for the request
    assert "public_loss" in res.history[-1] and math.isfinite(res.history[-1]["public_loss"])


@pytest.mark.slow
def test_private_and_public_view_batches_are_two_independent_poisson_samples(data, monkeypatch):
    """Every private step draws its batch with the tested Poisson sampler at the accounted rate q = B / n, and the
    feature methods draw the public-view batch with another generator (Algorithm 1: independent batches)."""
    import importlib

    train_module = importlib.import_module("privkit.dppose.train")  # the module (the package exports a function)

    calls = []
    real = train_module.poisson_subset

    def spy(n, q, *, generator):
        idx = real(n, q, generator=generator)
        calls.append((n, q, id(generator), idx))
        return idx

    monkeypatch.setattr(train_module, "poisson_subset", spy)
    res = train(small_model(), data, method="feature", dp=DPSpec(epsilon=1.0, delta=1e-5, clip=0.01, accountant="rdp"),
                public=PublicSpec(blur=(5, 1.0)), schedule=Schedule(epochs=2, batch_size=16), device="cpu", seed=1)
    assert len(calls) == 2 * res.steps and res.steps == 6
    assert all(n == len(data) and q == pytest.approx(res.sample_rate) == pytest.approx(16 / 48) for n, q, _, _ in calls)
    private_gen, view_gen = {c[2] for c in calls[0::2]}, {c[2] for c in calls[1::2]}
    assert len(private_gen) == len(view_gen) == 1 and private_gen != view_gen
    assert any(not torch.equal(a[3], b[3]) for a, b in zip(calls[0::2], calls[1::2]))


@pytest.mark.slow
def test_nonprivate_training_improves_pckh(data):
    model = build_pose_model(SIZE, width=8, seed=0)
    test = make_poseset(32, seed=7)
    before = evaluate_pckh(model, test).mean
    res = train(model, data, method="nonprivate", schedule=Schedule(epochs=25, batch_size=16, lr=3e-3), device="cpu",
                seed=0)
    after = evaluate_pckh(res.model, test).mean
    assert after >= before + 25.0, (before, after)
    assert not res.guarantee.is_meaningful and res.noise_multiplier is None
    assert type(res.guarantee.event).__name__ == "NonPrivateDpEvent" and res.guarantee.accountant is None
    assert torch.equal(_params(model), _params(build_pose_model(SIZE, width=8, seed=0)))  # input not modified


def test_trainer_argument_errors(data, public, tmp_path):
    dp = DPSpec(epsilon=1.0, delta=1e-5, clip=0.01, accountant="rdp")
    kw = dict(dp=dp, schedule=Schedule(epochs=1, batch_size=16), device="cpu")
    with pytest.raises(UnknownNameError, match="feature_projective"):
        train(None, data, method="dp-sgd", **kw)
    with pytest.raises(UnknownNameError, match="setting='epsilon'.*warm_start"):  # train forwards make_private's
        train(None, data, method="dpsgd", epsilon=1.0, **kw)
    for bad in ({"epsilon": 0.0}, {"epsilon": -1.0}, {"delta": 0.0}, {"delta": 1.0}, {"clip": 0.0}, {"clip": -1}):
        with pytest.raises(InvalidArgumentError):
            train(None, data, method="dpsgd", **{**kw, "dp": replace(dp, **bad)})
    with pytest.raises(InsufficientDataError):
        train(None, data, method="projected", public=PublicSpec(k=2), **kw)
    with pytest.raises(InsufficientDataError):
        train(None, data, method="projected", public=PublicSpec(k=2, public_set=public.subset(torch.arange(0))), **kw)
    with pytest.raises(InvalidArgumentError, match="k must lie"):
        train(None, data, method="projected", public=PublicSpec(k=25, public_set=public), **kw)
    with pytest.raises(InvalidArgumentError, match="disjoint"):
        train(None, data, method="projected", public=PublicSpec(k=2, public_set=data.subset(torch.arange(8))), **kw)
    with pytest.raises(PrivacyBudgetError):
        train(None, data, method="dpsgd", **{**kw, "dp": replace(dp, epsilon=0.05, max_noise_multiplier=0.5)})
    with pytest.raises(InvalidArgumentError, match="dp must be a DPSpec"):
        train(None, data, method="dpsgd", dp={"epsilon": 1.0}, device="cpu")
    with pytest.raises(UnknownNameError, match="accountant"):
        DPSpec(accountant="moments")
    with pytest.raises(InvalidArgumentError, match="secure"):
        DPSpec(secure=1)
    with pytest.raises(InvalidArgumentError, match="epochs"):
        Schedule(epochs=0)
    with pytest.raises(UnknownNameError, match="optimizer"):
        Schedule(optimizer="adam")
    with pytest.raises(MissingResourceError):
        train(None, data, method="nonprivate", warm_start=tmp_path / "none.safetensors", device="cpu")
    with pytest.raises(InsufficientDataError):
        train(None, data.subset(torch.arange(0)), method="nonprivate", device="cpu")


def test_public_set_sharing_an_image_with_the_private_set_is_refused():
    from privkit.dppose.train import _check_disjoint

    g = torch.Generator().manual_seed(0)

    def poseset(images, first_id):
        n = images.shape[0]
        return PoseSet(images=images, keypoints=torch.zeros(n, 16, 2), visible=torch.ones(n, 16, dtype=torch.bool),
                       head_box=torch.tensor([[0.0, 0.0, 4.0, 4.0]]).repeat(n, 1),
                       identity=torch.arange(first_id, first_id + n))

    private = poseset(torch.rand(6, 3, 16, 16, generator=g), 0)
    public = poseset(torch.rand(5, 3, 16, 16, generator=g), 100)
    _check_disjoint(private, public)  # other people, other images
    copied = public.images.clone()
    copied[3] = private.images[4]  # the same image under another identity
    with pytest.raises(InvalidArgumentError, match="share identical images"):
        _check_disjoint(private, poseset(copied, 100))
    # equal in the 256 of 768 entries the fingerprint reads, different images: the full comparison tells them apart
    near = public.images.clone()
    near[3] = private.images[4]
    read = set(torch.linspace(0, 767, 256).round().long().tolist())
    near[3].view(-1)[min(set(range(768)) - read)] += 0.5
    assert not torch.equal(near[3], private.images[4])
    _check_disjoint(private, poseset(near, 100))
