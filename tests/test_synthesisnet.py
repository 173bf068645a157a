"""SynthesisNet (paper 4): metric-DP identity noise (distribution, independence, audits with negative controls),
networks, the trained pipeline (tiny fit, publish, ablations, save/load), baselines and metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dp_accounting import LaplaceDpEvent, NonPrivateDpEvent
from scipy import linalg as sla
from scipy import stats

from privkit.data.types import FaceSet
from privkit.encoders import load_encoder
from privkit.errors import (
    InsufficientDataError,
    InvalidArgumentError,
    MissingResourceError,
    PrivkitError,
    ShapeError,
    UnknownNameError,
)
from privkit.privacy import audit, make_generator, sample_laplace, sample_metric_laplace
from privkit.synthesisnet import (
    AttributeEncoder,
    Decoder,
    Discriminator,
    Generator,
    IdentityEncoder,
    SynthesisNet,
    SynthesisNetConfig,
    anonymize,
    attribute_preservation,
    clip_rows,
    default_clip_norm,
    features_for_fid,
    fid,
    frechet_distance,
    identity_distance,
    identity_distance_from_embeddings,
    inception_score,
    load_inception,
    angle_after_noise,
    metric_guarantee,
    noise_radius_mean,
    privatize_identity,
    reidentification_from_embeddings,
    reidentification_rate,
)
from privkit.synthesisnet.models import SpectralNormConv2d, grad_reverse, init_weights

F64 = torch.float64
P_MIN = 1e-3  # fixed seeds make the KS tests deterministic; this only guards against a wrong distribution


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # The networks here are tiny: intra-op threads only add synchronisation, which on a busy 2-core CI machine
    # costs far more than the work (measured: a tiny fit takes 0.8 s on one thread, 15 s on two busy ones).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ============================================================================ metric-DP identity noise
def _noisy(z, eps, clip, seed):
    return privatize_identity(z, epsilon=eps, clip_norm=clip, generator=make_generator(seed))


def test_noise_radius_is_gamma_after_subtracting_the_clipped_input():
    d, eps, clip = 16, 0.5, 30.0
    z = torch.randn(3000, d, generator=torch.Generator().manual_seed(0), dtype=F64) * 20  # many rows get clipped
    out, _ = _noisy(z, eps, clip, seed=1)
    radius = torch.linalg.vector_norm(out - clip_rows(z, clip), dim=1).numpy()
    assert stats.kstest(radius, stats.gamma(a=d, scale=1 / eps).cdf).pvalue > P_MIN
    assert abs(radius.mean() - noise_radius_mean(d, eps)) < 0.05 * d / eps
    # a wrong epsilon is rejected by the same test (the test has power)
    assert stats.kstest(radius, stats.gamma(a=d, scale=1 / (1.2 * eps)).cdf).pvalue < 1e-6


def test_clipping_bounds_rows_and_keeps_short_ones():
    z = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]], dtype=F64)
    c = clip_rows(z, 1.0)
    assert torch.allclose(c[0], torch.tensor([0.6, 0.8], dtype=F64))
    assert torch.equal(c[1:], z[1:])
    out, _ = privatize_identity(z, epsilon=1e9, clip_norm=1.0, generator=make_generator(0))  # negligible noise
    assert torch.allclose(out, c, atol=1e-6)


def test_noise_rows_are_independent():
    n, d = 4000, 8
    out, _ = _noisy(torch.zeros(n, d, dtype=F64), 1.0, 10.0, seed=2)
    u = out / torch.linalg.vector_norm(out, dim=1, keepdim=True)
    cos_next = (u[:-1] * u[1:]).sum(dim=1)  # E = 0, sd = 1/sqrt(d) for independent uniform directions
    assert abs(float(cos_next.mean())) < 4 / math.sqrt(d * (n - 1))
    r = torch.linalg.vector_norm(out, dim=1).numpy()
    assert abs(stats.pearsonr(r[:-1], r[1:])[0]) < 4 / math.sqrt(n)
    assert int(torch.unique(out, dim=0).shape[0]) == n
    # one batch of n rows has the same law as n separate releases (one independent draw per row)
    one_by_one = torch.cat([privatize_identity(torch.zeros(1, d, dtype=F64), epsilon=1.0, clip_norm=10.0,
                                               generator=make_generator(100 + i))[0] for i in range(400)])
    r1 = torch.linalg.vector_norm(one_by_one, dim=1).numpy()
    assert stats.ks_2samp(r, r1).pvalue > P_MIN


@pytest.mark.slow
@pytest.mark.parametrize("eps,clip,d", [(0.01, 10.0, 4), (0.1, 160.0, 16)])
def test_metric_guarantee_event_gives_its_pure_epsilon(eps, clip, d):
    """Fed to dp_accounting's PLD accountant, the Laplace event is pure-DP at exactly the stated ε (δ = 0 there,
    δ > 0 just below): the only statement the guarantee makes for the ℓ2 mechanism."""
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    g = metric_guarantee(eps, clip, d)
    acc = PLDAccountant(neighboring_relation=g.neighbours.accounting_relation(), value_discretization_interval=1e-4)
    acc.compose(g.event)
    assert g.delta == 0.0 and acc.get_delta(g.epsilon) <= 1e-12
    assert acc.get_delta(0.99 * g.epsilon) > 1e-6


def test_guarantee_states_metric_and_two_face_epsilon():
    d, eps, clip = 16, 0.1, default_clip_norm(16)
    assert clip == 160.0
    _, g = _noisy(torch.zeros(4, d), eps, clip, seed=0)
    assert g.epsilon == pytest.approx(eps * 2 * clip) and g.delta == 0.0
    # metric relation: ε per unit of ℓ2 distance, any two clipped latents at most 2 * clip apart
    assert g.neighbours.relation == "metric" and g.neighbours.is_metric
    assert g.neighbours.bound == 2 * clip and g.neighbours.norm == "l2"
    assert g.epsilon_per_unit == pytest.approx(eps)
    # the Laplace event at scale 1/ε per unit distance, relative to the bound: pure ε = 1/noise_multiplier
    assert isinstance(g.event, LaplaceDpEvent) and g.event.noise_multiplier == pytest.approx(1 / (eps * 2 * clip))
    assert g.accountant == "laplace" and g.protects == "the identity latent"
    assert "metric" in g.neighbouring and "multivariate ℓ2 Laplace" in g.mechanism
    text = str(g)
    assert "ε=0.10 per unit of distance" in text
    assert "ε = 0.1 per unit of Euclidean distance" in text and "(32, 0)-DP between any two faces" in text
    assert "Gamma(16, 1/ε)" in text
    # the documented scale choice: mean noise radius d/eps against the clip norm 10 d
    assert noise_radius_mean(d, 0.01) == pytest.approx(10 * clip)
    assert [round(angle_after_noise(d, e, clip)) for e in (1.0, 0.1, 0.01)] == [6, 45, 84]


def test_privatize_reproducible_dtype_device_and_os_entropy():
    z = torch.randn(5, 16)
    a, _ = _noisy(z, 0.3, 160.0, seed=4)
    b, _ = _noisy(z, 0.3, 160.0, seed=4)
    c, _ = _noisy(z, 0.3, 160.0, seed=5)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.dtype == torch.float32 and _noisy(z.double(), 0.3, 160.0, 4)[0].dtype == F64
    state = torch.random.get_rng_state()
    x, _ = privatize_identity(z, epsilon=0.3, clip_norm=160.0)  # generator=None: OS entropy, not the global RNG
    y, _ = privatize_identity(z, epsilon=0.3, clip_norm=160.0)
    assert not torch.equal(x, y) and torch.equal(state, torch.random.get_rng_state())


@pytest.mark.parametrize("kwargs, match", [
    (dict(epsilon=0.0, clip_norm=1.0), "epsilon"),
    (dict(epsilon=-1.0, clip_norm=1.0), "epsilon"),
    (dict(epsilon=float("nan"), clip_norm=1.0), "epsilon"),
    (dict(epsilon=1.0, clip_norm=0.0), "clip_norm"),
])
def test_privatize_bad_arguments(kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        privatize_identity(torch.zeros(2, 3), **kwargs)


def test_privatize_bad_latents():
    with pytest.raises(ShapeError, match="z"):
        privatize_identity(torch.zeros(3), epsilon=1.0, clip_norm=1.0)
    with pytest.raises(InvalidArgumentError, match="NaN"):
        privatize_identity(torch.full((2, 3), float("nan")), epsilon=1.0, clip_norm=1.0)
    with pytest.raises(InvalidArgumentError, match="generator"):
        privatize_identity(torch.zeros(2, 3), epsilon=1.0, clip_norm=1.0, generator=0)


# ---------------------------------------------------------------------------- audits
# A small latent dimension gives the auditor's one-dimensional test the power to see (nearly) the true epsilon;
# the mechanism is the same for every dimension.
AUDIT_D, AUDIT_EPS, AUDIT_CLIP, AUDIT_DIST = 2, 0.5, 10.0, 2.0  # claim: epsilon * D = 1


def _two_latents():
    z0 = torch.zeros(AUDIT_D, dtype=F64)
    z1 = z0.clone()
    z1[0] = AUDIT_DIST
    return z0, z1


def _single_release(eps):
    def mechanism(data, n, generator):
        return privatize_identity(data.expand(n, -1).clone(), epsilon=eps, clip_norm=AUDIT_CLIP,
                                  generator=generator)[0]
    return mechanism


def test_audit_two_point_guarantee_passes():
    z0, z1 = _two_latents()
    r = audit(_single_release(AUDIT_EPS), z0, z1, n_samples=100_000, claimed_epsilon=AUDIT_EPS * AUDIT_DIST, seed=0)
    assert r.passed and 0.6 < r.epsilon_lower <= AUDIT_EPS * AUDIT_DIST  # below the claim, and the audit has power


def test_audit_catches_halved_noise():
    z0, z1 = _two_latents()  # noise drawn at 2 epsilon = half the radius; true epsilon*D = 2
    r = audit(_single_release(2 * AUDIT_EPS), z0, z1, n_samples=100_000,
              claimed_epsilon=AUDIT_EPS * AUDIT_DIST, seed=0)
    assert not r.passed and r.epsilon_lower > 1.3


def test_audit_on_a_diagonal_pair_catches_per_coordinate_laplace_noise():
    """The metric-DP claim is in the L2 distance. Per-coordinate Laplace noise at the same epsilon is DP in the L1
    distance instead, which the axis-aligned pair above cannot tell apart (there L1 = L2). On a diagonal pair
    (L1 = sqrt(2) L2) the L1 likelihood-ratio statistic sees its true loss sqrt(2) epsilon D against the claim
    epsilon D; the statistic is rounded to 1e-6 so that it reads the noise, not the last bits of the floats (the
    floating-point attack the samplers' docstring warns about)."""
    a = AUDIT_DIST / math.sqrt(2)
    z0, z1 = torch.zeros(AUDIT_D, dtype=F64), torch.full((AUDIT_D,), a, dtype=F64)

    def l1_ratio(x):  # log-likelihood ratio of Laplace noise around z1 vs z0, up to a factor epsilon
        return torch.round((x.abs() - (x - a).abs()).sum(-1), decimals=6)

    def per_coordinate(data, n, generator):
        return data + sample_laplace((n, AUDIT_D), scale=1 / AUDIT_EPS, generator=generator, dtype=F64)

    claim = AUDIT_EPS * AUDIT_DIST
    ok = audit(_single_release(AUDIT_EPS), z0, z1, n_samples=200_000, claimed_epsilon=claim, seed=0,
               statistic=l1_ratio)
    broken = audit(per_coordinate, z0, z1, n_samples=200_000, claimed_epsilon=claim, seed=0, statistic=l1_ratio)
    assert ok.passed, str(ok)
    assert not broken.passed and broken.epsilon_lower > 1.2 * claim, str(broken)


def test_audit_paper_scale_latent_passes():
    d, eps = 16, 0.1
    clip = default_clip_norm(d)
    z0 = torch.zeros(d, dtype=F64)
    z1 = z0.clone()
    z1[0] = 20.0

    def mechanism(data, n, generator):
        return privatize_identity(data.expand(n, -1).clone(), epsilon=eps, clip_norm=clip, generator=generator)[0]

    r = audit(mechanism, z0, z1, n_samples=40_000, claimed_epsilon=eps * 20.0, seed=0)
    assert r.passed and r.epsilon_lower > 0.3


def _pair_release_inputs():
    # A batch of two faces released together; the neighbours differ in face 0 by AUDIT_DIST.
    z0, z1 = _two_latents()
    other = torch.full((AUDIT_D,), 3.0, dtype=F64)
    return torch.stack([z0, other]), torch.stack([z1, other])


def test_audit_pair_release_with_independent_noise_passes():
    d0, d1 = _pair_release_inputs()

    def mechanism(data, n, generator):  # n releases of the two-face batch, through privatize_identity
        out, _ = privatize_identity(data.repeat(n, 1), epsilon=AUDIT_EPS, clip_norm=AUDIT_CLIP, generator=generator)
        return out.view(n, 2, AUDIT_D)

    r = audit(mechanism, d0, d1, n_samples=20_000, claimed_epsilon=AUDIT_EPS * AUDIT_DIST, seed=0,
              statistic="whitened")
    assert r.passed


def test_audit_catches_noise_shared_across_the_batch():
    # The known bug: one noise vector for the whole batch. Each face alone is still "Laplace", so a one-face audit
    # cannot see it; but the difference of two released faces is then noise-free, and the whitened test (which
    # can weight the two faces' outputs against each other) separates the neighbours almost perfectly.
    d0, d1 = _pair_release_inputs()

    def shared(data, n, generator):
        noise = sample_metric_laplace(n, AUDIT_D, epsilon=AUDIT_EPS, generator=generator, dtype=F64)
        return data[None] + noise[:, None, :]

    r = audit(shared, d0, d1, n_samples=20_000, claimed_epsilon=AUDIT_EPS * AUDIT_DIST, seed=0,
              statistic="whitened")
    assert not r.passed and r.epsilon_lower > 5.0


# ============================================================================ networks
@pytest.mark.parametrize("size", [16, 32])
def test_network_shapes(size):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 3, size, size) * 2 - 1
    e_id = IdentityEncoder(image_size=size, width=4, dim=5, radius=50.0)
    e_att = AttributeEncoder(image_size=size, width=4, dim=6, radius=60.0)
    for m in (e_id, e_att):
        init_weights(m, g)
    z_id, z_att = e_id(x), e_att(x)
    assert z_id.shape == (3, 5) and torch.allclose(z_id.norm(dim=1), torch.full((3,), 50.0))
    assert torch.allclose(z_att.norm(dim=1), torch.full((3,), 60.0))
    dec = Decoder(image_size=size, width=4, id_dim=5, att_dim=6, id_radius=50.0, att_radius=60.0)
    out = dec(z_id, z_att)
    assert out.shape == (3, 3, size, size) and float(out.detach().abs().max()) <= 1.0
    assert isinstance(Generator(image_size=size, width=4, id_dim=5, att_dim=6, id_radius=50.0, att_radius=60.0),
                      Decoder)
    disc = Discriminator(image_size=size, width=4, n_classes=(2, 3))
    logit, cls = disc(x)
    assert logit.shape == (3,) and [c.shape for c in cls] == [(3, 2), (3, 3)]
    # the classifier has its own last layer; the trunk is shared
    assert disc.cls_head is not disc.adv_head and disc.has_classifier
    plain = Discriminator(image_size=size, width=4)
    assert not plain.has_classifier and plain(x)[1] == []


def test_spectral_norm_and_instance_norm_discriminators():
    g = torch.Generator().manual_seed(0)
    conv = SpectralNormConv2d(5, 7, 3)
    init_weights(conv, g)
    conv.weight.data.normal_(0, 1, generator=g)
    conv.power_iterations(50)
    with torch.no_grad():
        sigma = float(torch.linalg.matrix_norm(conv.weight.flatten(1), ord=2))
        normalized = float(torch.linalg.matrix_norm(conv.normalized_weight().flatten(1), ord=2))
    assert normalized == pytest.approx(1.0, abs=1e-4) and sigma > 2.0  # the raw weight is far from norm 1
    sn = Discriminator(image_size=16, width=4, n_classes=(2,))
    inst = Discriminator(image_size=16, width=4, n_classes=(2,), norm="instance")
    assert not any(isinstance(m, torch.nn.InstanceNorm2d) for m in sn.modules())
    assert any(isinstance(m, torch.nn.InstanceNorm2d) for m in inst.modules())
    assert all(isinstance(m, SpectralNormConv2d) for m in sn.modules() if isinstance(m, torch.nn.Conv2d))
    assert inst(torch.zeros(2, 3, 16, 16))[0].shape == (2,)
    with pytest.raises(UnknownNameError, match="norm"):
        Discriminator(image_size=16, width=4, norm="batch")
    with pytest.raises(UnknownNameError, match="discriminator_norm"):
        SynthesisNetConfig(discriminator_norm="batch")


def test_paper_scale_channels():
    for upsample, kind in (("resize", torch.nn.Conv2d), ("transpose", torch.nn.ConvTranspose2d)):
        dec = Decoder(image_size=128, width=64, id_dim=256, att_dim=256, id_radius=1.0, att_radius=1.0,
                      upsample=upsample)
        convs = [m for m in dec.net if type(m) is kind]
        assert dec.top_channels == 1024 and [c.out_channels for c in convs] == [512, 256, 128, 64, 3]
    enc = IdentityEncoder(image_size=128, width=64, dim=256, radius=1.0)
    assert [m.out_channels for m in enc.trunk.net if isinstance(m, torch.nn.Conv2d)] == [64, 128, 256, 512, 512]


def test_resize_upsampler_has_no_transposed_convs():
    kw = dict(image_size=32, width=4, id_dim=3, att_dim=3, id_radius=1.0, att_radius=1.0)
    dec = Decoder(**kw)  # default: resize
    assert dec.upsample == "resize"
    assert not any(isinstance(m, torch.nn.ConvTranspose2d) for m in dec.modules())
    ups = [m for m in dec.modules() if isinstance(m, torch.nn.Upsample)]
    assert len(ups) == 3 and all(u.mode == "nearest" and u.scale_factor == 2 for u in ups)
    g = torch.Generator().manual_seed(0)
    init_weights(dec, g)
    z = torch.randn(2, 3, generator=g)
    assert dec(z, z).shape == (2, 3, 32, 32)
    trans = Decoder(**kw, upsample="transpose")
    assert sum(isinstance(m, torch.nn.ConvTranspose2d) for m in trans.modules()) == 3
    # same parameter count per layer shape family is not required, but both map latents to images
    init_weights(trans, g)
    assert trans(z, z).shape == (2, 3, 32, 32)
    with pytest.raises(UnknownNameError, match="upsample"):
        Decoder(**kw, upsample="pixelshuffle")
    with pytest.raises(UnknownNameError, match="upsample"):
        SynthesisNetConfig(upsample="bilinear-transpose")
    assert SynthesisNetConfig().upsample == "resize"
    net = SynthesisNet(**TINY, upsample="transpose").fit(_faceset(), epochs_ae=1, epochs_gan=0, batch_size=12,
                                                          seed=0, device="cpu")
    assert any(isinstance(m, torch.nn.ConvTranspose2d) for m in net.modules["generator"].modules())


def test_onet_perceptual_loss():
    from privkit.synthesisnet.losses import ONetPerceptualLoss, make_perceptual_loss

    loss = make_perceptual_loss("onet")
    assert isinstance(loss, ONetPerceptualLoss) and make_perceptual_loss("none") is None
    g = torch.Generator().manual_seed(0)
    target = torch.rand(4, 3, 32, 32, generator=g) * 2 - 1
    out = (target + 0.3 * torch.randn(4, 3, 32, 32, generator=g)).clamp(-1, 1).requires_grad_(True)
    assert float(loss(target, target)) == pytest.approx(0.0, abs=1e-7)
    value = loss(out, target)
    far = loss(-target, target)
    assert 0.0 < float(value.detach()) < float(far)
    value.backward()
    assert out.grad is not None and float(out.grad.abs().sum()) > 0
    assert all(p.grad is None and not p.requires_grad for p in loss.parameters())
    with pytest.raises(ShapeError, match="same shape"):
        loss(out[:2], target)
    with pytest.raises(ShapeError, match="3 channels"):
        loss.features(torch.zeros(1, 1, 16, 16))
    with pytest.raises(UnknownNameError, match="perceptual"):
        make_perceptual_loss("vgg")
    with pytest.raises(UnknownNameError, match="perceptual"):
        SynthesisNetConfig(perceptual="ssl-small")
    with pytest.raises(InvalidArgumentError, match="lambda_perceptual"):
        SynthesisNetConfig(lambda_perceptual=-1.0)


def test_grad_reverse_and_init_are_deterministic():
    x = torch.ones(3, requires_grad=True)
    (grad_reverse(x, 2.0) * 3).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), -6.0))
    a = Decoder(image_size=16, width=4, id_dim=2, att_dim=2, id_radius=1.0, att_radius=1.0)
    b = Decoder(image_size=16, width=4, id_dim=2, att_dim=2, id_radius=1.0, att_radius=1.0)
    init_weights(a, torch.Generator().manual_seed(3))
    init_weights(b, torch.Generator().manual_seed(3))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_config_defaults_follow_latent_sizes():
    import dataclasses

    cfg = SynthesisNetConfig()
    assert (cfg.id_dim, cfg.effective_clip_norm, cfg.lambda_rec, cfg.lambda_cls) == (16, 160.0, 10.0, 1.0)
    assert dataclasses.replace(cfg, id_dim=8).effective_clip_norm == 80.0
    assert SynthesisNetConfig(clip_norm=5.0, id_dim=8).effective_clip_norm == 5.0
    assert SynthesisNetConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(UnknownNameError, match="config key"):
        SynthesisNetConfig.from_dict({"widht": 3})


def test_bad_image_sizes_raise():
    with pytest.raises(InvalidArgumentError, match="power of two"):
        SynthesisNetConfig(image_size=48)
    with pytest.raises(InvalidArgumentError, match="image_size"):
        SynthesisNetConfig(image_size=8)
    with pytest.raises(UnknownNameError, match="noise"):
        SynthesisNetConfig(noise="gaussian")
    with pytest.raises(InvalidArgumentError, match="swap_prob"):
        SynthesisNetConfig(swap_prob=1.0)


# ============================================================================ pipeline
SIZE = 16


def _faceset(n_ids=4, per_id=3, *, attributes=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = n_ids * per_id
    identity = torch.arange(n_ids).repeat_interleave(per_id)
    # each identity a colour, plus noise, so the tiny model has something to learn
    base = torch.rand(n_ids, 3, 1, 1, generator=g)[identity]
    images = (0.7 * base + 0.3 * torch.rand(n, 3, SIZE, SIZE, generator=g)).clamp(0, 1)
    attrs = {"glasses": torch.randint(0, 2, (n,), generator=g), "pose": torch.randint(0, 3, (n,), generator=g)} \
        if attributes else {}
    return FaceSet(images=images, identity=identity, box=torch.tensor([[2.0, 2.0, 14.0, 14.0]]).repeat(n, 1),
                   mask=torch.ones(n, 1, SIZE, SIZE, dtype=torch.bool), context=torch.full((n,), -1),
                   attributes=attrs, name="random")


TINY = dict(image_size=SIZE, width=4, id_dim=4, att_dim=6)


@pytest.fixture(scope="module")
def fitted():
    net = SynthesisNet(**TINY)
    net.fit(_faceset(), epochs_ae=2, epochs_gan=2, batch_size=6, seed=0, device="cpu")
    return net


def test_tiny_fit_records_history_and_throughput(fitted):
    h = fitted.history
    assert [e["epoch"] for e in h["ae"]] == [1, 2] and [e["epoch"] for e in h["gan"]] == [1, 2]
    for key in ("rec_l1", "id_ce", "att_ce", "adv_ce", "adv_acc"):
        assert math.isfinite(h["ae"][-1][key])
    for key in ("d_loss", "g_adv", "g_rec_l1", "g_cls", "cls_real_acc"):
        assert math.isfinite(h["gan"][-1][key])
    assert h["throughput"]["ae_images_per_s"] > 0 and h["throughput"]["gan_images_per_s"] > 0
    assert fitted.attribute_names == ("glasses", "pose") and fitted.attribute_classes == (2, 3)
    assert fitted.n_identities == 4


def test_fit_is_reproducible_and_leaves_global_rng_alone(fitted):
    state = torch.random.get_rng_state()
    again = SynthesisNet(**TINY).fit(_faceset(), epochs_ae=2, epochs_gan=2, batch_size=6, seed=0, device="cpu")
    assert torch.equal(state, torch.random.get_rng_state())
    for name, mod in fitted.modules.items():
        for p, q in zip(mod.state_dict().values(), again.modules[name].state_dict().values()):
            assert torch.equal(p, q), name


def test_publish_returns_images_and_guarantee(fitted):
    x = _faceset(seed=1).images[:5]
    out, g = fitted.publish(x, epsilon=0.1, generator=make_generator(0))
    assert out.shape == x.shape and out.dtype == torch.float32
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    assert g.epsilon == pytest.approx(0.1 * 2 * fitted.config.effective_clip_norm)
    assert g.protects == "the identity latent"
    assert "attribute latent is released WITHOUT noise" in str(g)
    assert "NOT covered: the attribute latent z_att" in str(g)  # what is not protected, stated
    again, _ = fitted.publish(x, epsilon=0.1, generator=make_generator(0))
    other, _ = fitted.publish(x, epsilon=0.1, generator=make_generator(1))
    assert torch.equal(out, again) and not torch.equal(out, other)


def test_epsilon_range_spans_hidden_to_kept(fitted):
    z_id, z_att = fitted.encode(_faceset(seed=2).images)
    assert torch.allclose(z_id.norm(dim=1), torch.full((z_id.shape[0],), fitted.config.effective_clip_norm))
    big = torch.cat([z_id] * 50)  # 600 rows
    cos = {}
    for eps in (0.01, 0.1, 1.0):
        noisy, z_att_out, _ = fitted.privatize(big, torch.cat([z_att] * 50), epsilon=eps,
                                               generator=make_generator(7))
        assert torch.equal(z_att_out, torch.cat([z_att] * 50))
        assert torch.allclose(noisy.norm(dim=1), torch.full((big.shape[0],), fitted.config.effective_clip_norm))
        cos[eps] = float(torch.nn.functional.cosine_similarity(noisy, big, dim=1).mean())
    assert cos[1.0] > 0.95 and 0.45 < cos[0.1] < 0.9 and cos[0.01] < 0.3


@pytest.mark.slow
def test_ablations():
    fs = _faceset()
    none = SynthesisNet(**TINY, noise="none").fit(fs, epochs_ae=1, epochs_gan=1, batch_size=12, seed=0,
                                                   device="cpu")
    x = fs.images[:4]
    out, g = none.publish(x, epsilon=0.5, generator=make_generator(0))
    assert math.isinf(g.epsilon) and not g.is_meaningful and not g.meets_request
    assert isinstance(g.event, NonPrivateDpEvent) and g.accountant is None
    assert torch.equal(out, none.synthesize(*none.encode(x)))
    assert none.publish(x, epsilon=None)[1].requested_epsilon is None

    whole = SynthesisNet(**TINY, noise="whole").fit(fs, epochs_ae=1, epochs_gan=1, batch_size=12, seed=0,
                                                     device="cpu")
    z_id, z_att = whole.encode(x)
    nid, natt, g = whole.privatize(z_id, z_att, epsilon=0.5, generator=make_generator(0))
    assert g.protects == "the whole latent (identity and attribute)"
    radius = math.hypot(whole.config.effective_clip_norm, whole.config.effective_att_radius)
    assert g.neighbours.relation == "metric" and g.neighbours.bound == pytest.approx(2 * radius)
    assert g.epsilon_per_unit == pytest.approx(0.5)
    assert g.epsilon == pytest.approx(0.5 * 2 * radius) and radius == whole.config.whole_clip_norm
    assert not torch.allclose(natt, z_att) and torch.allclose(natt.norm(dim=1), z_att.norm(dim=1))

    no_aux = SynthesisNet(**TINY, auxiliary_classifier=False)
    no_aux.fit(_faceset(attributes=False), epochs_ae=1, epochs_gan=1, batch_size=12, seed=0, device="cpu")
    assert not no_aux.modules["discriminator"].has_classifier
    assert math.isnan(no_aux.history["gan"][0].get("g_cls", float("nan")))
    assert no_aux.publish(x, epsilon=1.0, generator=make_generator(0))[0].shape == x.shape
    with pytest.raises(InsufficientDataError, match="auxiliary_classifier=False"):
        SynthesisNet(**TINY).fit(_faceset(attributes=False), epochs_ae=1, epochs_gan=0, device="cpu")


def test_gan_ablation_shares_the_autoencoder(fitted):
    fs = _faceset()
    no_aux = SynthesisNet(**TINY, auxiliary_classifier=False).fit(fs, epochs_ae=0, epochs_gan=1, batch_size=6,
                                                                   seed=0, device="cpu", autoencoder_from=fitted)
    for name in ("id_encoder", "att_encoder", "decoder"):
        for p, q in zip(no_aux.modules[name].state_dict().values(), fitted.modules[name].state_dict().values()):
            assert torch.equal(p, q), name
    assert no_aux.history["ae"] == fitted.history["ae"] and len(no_aux.history["gan"]) == 1
    assert not no_aux.modules["discriminator"].has_classifier
    x = fs.images[:3]
    assert torch.equal(no_aux.encode(x)[0], fitted.encode(x)[0])
    with pytest.raises(InvalidArgumentError, match="epochs_ae must be 0"):
        SynthesisNet(**TINY).fit(fs, epochs_ae=1, epochs_gan=0, device="cpu", autoencoder_from=fitted)
    with pytest.raises(InvalidArgumentError, match="width"):
        SynthesisNet(**dict(TINY, width=8)).fit(fs, epochs_ae=0, epochs_gan=0, device="cpu", autoencoder_from=fitted)
    with pytest.raises(InvalidArgumentError, match="other identities"):
        SynthesisNet(**TINY).fit(_faceset(n_ids=3), epochs_ae=0, epochs_gan=0, device="cpu",
                                 autoencoder_from=fitted)
    with pytest.raises(InvalidArgumentError, match="fitted SynthesisNet"):
        SynthesisNet(**TINY).fit(fs, epochs_ae=0, epochs_gan=0, device="cpu", autoencoder_from=SynthesisNet(**TINY))


def test_save_load_round_trip(fitted, tmp_path):
    folder = fitted.save(tmp_path / "model")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    loaded = SynthesisNet.load(folder)
    assert loaded.config == fitted.config and loaded.history == fitted.history
    assert loaded.attribute_names == fitted.attribute_names and loaded.n_identities == fitted.n_identities
    x = _faceset(seed=3).images
    a, _ = fitted.publish(x, epsilon=0.2, generator=make_generator(9))
    b, _ = loaded.publish(x, epsilon=0.2, generator=make_generator(9))
    assert torch.equal(a, b)
    with pytest.raises(MissingResourceError):
        SynthesisNet.load(tmp_path / "nothing")


def test_pipeline_bad_inputs(fitted):
    with pytest.raises(PrivkitError, match="not fitted"):
        SynthesisNet(**TINY).encode(torch.rand(1, 3, SIZE, SIZE))
    with pytest.raises(ShapeError, match=f"\\(N, 3, {SIZE}, {SIZE}\\)"):
        fitted.publish(torch.rand(2, 3, 2 * SIZE, 2 * SIZE), epsilon=1.0)
    with pytest.raises(ShapeError):
        fitted.publish(torch.rand(2, 1, SIZE, SIZE), epsilon=1.0)
    with pytest.raises(InvalidArgumentError, match=r"\[0, 1\]"):
        fitted.publish(torch.rand(2, 3, SIZE, SIZE) * 2, epsilon=1.0)
    for eps in (0.0, -0.1):
        with pytest.raises(InvalidArgumentError, match="epsilon"):
            fitted.publish(torch.rand(2, 3, SIZE, SIZE), epsilon=eps)
    with pytest.raises(InvalidArgumentError, match="epsilon is required"):
        fitted.publish(torch.rand(2, 3, SIZE, SIZE), epsilon=None)
    with pytest.raises(ShapeError, match="faceset.images"):
        SynthesisNet(**dict(TINY, image_size=32)).fit(_faceset(), epochs_ae=1, epochs_gan=0, device="cpu")
    with pytest.raises(UnknownNameError, match="attributes"):
        SynthesisNet(**TINY, attributes=("smile",)).fit(_faceset(), epochs_ae=1, epochs_gan=0, device="cpu")
    with pytest.raises(InvalidArgumentError, match="epochs_ae"):
        SynthesisNet(**TINY).fit(_faceset(), epochs_ae=-1, device="cpu")


# ============================================================================ the linear path
def _two_factor_images(n_ids=6, per_id=4, d=48, seed=0):
    """Images = identity pattern + view pattern: the identity part is constant within an identity, the view part
    is one of ``per_id`` patterns shared by every identity."""
    g = torch.Generator().manual_seed(seed)
    ident = torch.randn(n_ids, d, generator=g, dtype=F64)
    view = torch.randn(per_id, d, generator=g, dtype=F64)
    labels = torch.arange(n_ids).repeat_interleave(per_id)
    x = ident[labels] + view[torch.arange(per_id).repeat(n_ids)]
    return x, labels, ident, view


def test_identity_attribute_directions_split_between_and_within_identity():
    from privkit.synthesisnet.models import identity_attribute_directions

    x, labels, ident, view = _two_factor_images()
    mean, id_dirs, att_dirs = identity_attribute_directions(x, labels, id_dim=3, att_dim=3)
    assert id_dirs.shape == (3, 48) and att_dirs.shape == (3, 48) and mean.dtype == F64
    both = torch.cat([id_dirs, att_dirs])
    assert torch.allclose(both @ both.T, torch.eye(6, dtype=F64), atol=1e-10)
    assert torch.allclose(mean, x.mean(0), atol=1e-12)
    # the within-identity scatter spans the centred view patterns (rank per_id - 1 = 3): att_dirs span exactly it
    v = view - view.mean(0)
    assert torch.allclose((v @ att_dirs.T) @ att_dirs, v, atol=1e-9)
    # the identity directions lie in the span of the identity means (off the attribute subspace)
    m = ident - ident.mean(0)
    m_off = m - (m @ att_dirs.T) @ att_dirs
    proj = id_dirs - (id_dirs @ torch.linalg.pinv(m_off)) @ m_off
    assert float(proj.abs().max()) < 1e-8
    # signs are fixed: the largest-magnitude entry of every direction is positive
    for row in both:
        assert float(row[row.abs().argmax()]) > 0


def test_identity_attribute_directions_complete_a_short_span():
    from privkit.synthesisnet.models import identity_attribute_directions

    x, labels, _, _ = _two_factor_images(n_ids=2, per_id=2, d=12)  # between rank 1, within rank 1
    _, id_dirs, att_dirs = identity_attribute_directions(x, labels, id_dim=5, att_dim=2)
    both = torch.cat([id_dirs, att_dirs])
    assert torch.allclose(both @ both.T, torch.eye(7, dtype=F64), atol=1e-10)


def test_identity_attribute_directions_bad_inputs():
    from privkit.synthesisnet.models import identity_attribute_directions

    x, labels, _, _ = _two_factor_images(d=8)
    with pytest.raises(InvalidArgumentError, match=r"id_dim \+ att_dim must be <= 8"):
        identity_attribute_directions(x, labels, id_dim=6, att_dim=3)
    with pytest.raises(InvalidArgumentError, match="id_dim"):
        identity_attribute_directions(x, labels, id_dim=0, att_dim=3)
    with pytest.raises(ShapeError, match="labels"):
        identity_attribute_directions(x, labels[:-1], id_dim=2, att_dim=2)
    with pytest.raises(InsufficientDataError, match="at least 2"):
        identity_attribute_directions(x[:1], labels[:1], id_dim=2, att_dim=2)
    with pytest.raises(InvalidArgumentError, match="finite"):
        identity_attribute_directions(x * float("nan"), labels, id_dim=2, att_dim=2)


def test_linear_path_starts_from_the_closed_form_code_and_stays_frozen():
    from privkit.synthesisnet.models import identity_attribute_directions

    fs = _faceset(n_ids=5, per_id=4)
    net = SynthesisNet(**TINY, linear_path=True).fit(fs, epochs_ae=0, epochs_gan=0, seed=0, device="cpu")
    m = net.modules
    dec = m["decoder"]
    assert float(dec.last_layer.weight.detach().abs().max()) == 0.0  # the convolutional output starts at zero
    x = fs.images.flatten(1).double() * 2 - 1
    _, id_dirs, att_dirs = identity_attribute_directions(x, torch.unique(fs.identity, return_inverse=True)[1],
                                                         id_dim=4, att_dim=6)
    w = m["id_encoder"].linear_path.weight.double()
    assert torch.allclose(w / w.norm(dim=1, keepdim=True), id_dirs, atol=1e-5)
    # whitened: every coordinate of the linear code has the same spread over the training faces
    sd = (x @ w.T).std(0)
    assert float(sd.max() / sd.min()) < 1 + 1e-4
    # the decoder is tanh(linear(z_id)) at the start, and the least-squares fit beats the mean face
    z_id, z_att = net.encode(fs.images)
    rec = net.synthesize(z_id, z_att, network="decoder")
    assert float((rec - fs.images).abs().mean()) < float((fs.images.mean(0) - fs.images).abs().mean())
    # the linear maps are excluded from training in both phases and come back unchanged from save/load
    trained = SynthesisNet(**TINY, linear_path=True).fit(fs, epochs_ae=2, epochs_gan=1, batch_size=5, seed=0,
                                                         device="cpu")
    for name in ("id_encoder", "decoder", "generator"):
        assert not trained.modules[name].linear_path.weight.requires_grad
    # the attribute latent stays convolutional (and trainable): it reaches the image through the convolutions only
    assert m["att_encoder"].linear_path is None and dec.linear_path.weight.shape == (3 * SIZE * SIZE, 4)
    assert all(p.requires_grad for p in trained.modules["att_encoder"].parameters())
    assert torch.equal(trained.modules["id_encoder"].linear_path.weight, m["id_encoder"].linear_path.weight)
    assert torch.equal(trained.modules["generator"].linear_path.weight, trained.modules["decoder"].linear_path.weight)
    assert not torch.equal(trained.modules["decoder"].last_layer.weight, dec.last_layer.weight)
    # without the linear path the networks have no linear maps (and the default is off)
    assert SynthesisNetConfig().linear_path is False and m["id_encoder"].linear_path is not None
    plain = SynthesisNet(**TINY).fit(fs, epochs_ae=1, epochs_gan=0, batch_size=5, device="cpu").modules
    assert all(plain[k].linear_path is None for k in ("id_encoder", "att_encoder", "decoder", "generator"))
    assert all(p.requires_grad for mod in plain.values() for p in mod.parameters())


def test_linear_path_save_load_and_bad_config(tmp_path):
    fs = _faceset(n_ids=4, per_id=3)
    net = SynthesisNet(**TINY, linear_path=True, linear_init_images=8).fit(fs, epochs_ae=1, epochs_gan=1,
                                                                          batch_size=6, seed=1, device="cpu")
    loaded = SynthesisNet.load(net.save(tmp_path / "m"))
    assert loaded.config.linear_path and loaded.config.linear_init_images == 8
    a, _ = net.publish(fs.images, epsilon=0.5, generator=make_generator(3))
    b, _ = loaded.publish(fs.images, epsilon=0.5, generator=make_generator(3))
    assert torch.equal(a, b)
    with pytest.raises(InvalidArgumentError, match="linear_path"):
        SynthesisNetConfig(linear_path=1)
    with pytest.raises(InvalidArgumentError, match="linear_init_images"):
        SynthesisNetConfig(linear_init_images=1)
    with pytest.raises(InvalidArgumentError, match="linear must be a bool"):
        Decoder(image_size=16, width=4, id_dim=2, att_dim=2, id_radius=1.0, att_radius=1.0, linear="yes")


# ============================================================================ baselines
def test_baselines_act_inside_the_box_only():
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    boxes = torch.tensor([[4.0, 6.0, 20.0, 22.0], [0.0, 0.0, 32.0, 32.0]])
    inside = torch.zeros(32, 32, dtype=torch.bool)
    inside[6:22, 4:20] = True
    for method in ("blur", "pixelate", "mask"):
        out = anonymize(x, method, boxes=boxes)
        assert out.shape == x.shape and float(out.min()) >= 0 and float(out.max()) <= 1
        assert torch.equal(out[0][:, ~inside], x[0][:, ~inside])
        assert not torch.allclose(out[0][:, inside], x[0][:, inside])
    blurred = anonymize(x, "blur", boxes=boxes)
    assert float(blurred[0][:, inside].std()) < 0.5 * float(x[0][:, inside].std())
    pix = anonymize(x, "pixelate", boxes=boxes, strength=0.25)  # 4x4-pixel blocks in a 16x16 box
    assert torch.equal(pix[0, :, 6:10, 4:8], pix[0, :, 6:7, 4:5].expand(3, 4, 4))
    assert torch.equal(anonymize(x, "mask", boxes=boxes)[0][:, inside], torch.zeros(3, int(inside.sum())))
    assert torch.allclose(anonymize(x, "mask", strength=0.5), x * 0.5)  # whole image without boxes


def test_baselines_bad_inputs():
    x = torch.rand(1, 3, 16, 16)
    with pytest.raises(UnknownNameError, match="blur, mask, pixelate"):
        anonymize(x, "swirl")
    with pytest.raises(InvalidArgumentError, match="strength"):
        anonymize(x, "blur", strength=0.0)
    with pytest.raises(InvalidArgumentError, match="opacity"):
        anonymize(x, "mask", strength=2.0)
    with pytest.raises(InvalidArgumentError, match="x1 > x0"):
        anonymize(x, "blur", boxes=torch.tensor([[5.0, 5.0, 2.0, 9.0]]))
    with pytest.raises(ShapeError):
        anonymize(x, "blur", boxes=torch.zeros(2, 4))
    with pytest.raises(ShapeError):
        anonymize(torch.rand(1, 4, 16, 16), "blur")


# ============================================================================ metrics
def test_fid_zero_for_itself_and_grows_with_shift():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 8, generator=g, dtype=F64) @ torch.randn(8, 8, generator=g, dtype=F64)
    r = fid(x, x, n_bootstrap=0)
    assert abs(r.value) < 1e-8 and math.isnan(r.ci_low)
    values = [fid(x, x + s, n_bootstrap=0).value for s in (0.1, 0.5, 1.0)]
    assert values == pytest.approx([8 * s * s for s in (0.1, 0.5, 1.0)], rel=1e-6)  # pure mean shift: ||mu||^2
    y = torch.randn(300, 8, generator=g, dtype=F64)
    boot = fid(x, y, n_bootstrap=50, seed=1)
    assert boot.ci_low < boot.value < boot.ci_high and boot.n_real == 400 and boot.dim == 8
    assert fid(x, y, n_bootstrap=50, seed=1) == boot


def test_frechet_distance_matches_scipy_sqrtm():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(6, 6)), rng.normal(size=(6, 6))
    c1, c2 = a @ a.T, b @ b.T
    m1, m2 = rng.normal(size=6), rng.normal(size=6)
    ref = ((m1 - m2) ** 2).sum() + np.trace(c1 + c2 - 2 * sla.sqrtm(c1 @ c2).real)
    got = frechet_distance(*(torch.from_numpy(t) for t in (m1, c1, m2, c2)))
    assert got == pytest.approx(ref, rel=1e-8)


def test_inception_score_bounds():
    k, n = 10, 1000
    uniform = torch.full((n, k), 1.0 / k)
    assert inception_score(uniform).mean == pytest.approx(1.0)
    onehot = torch.nn.functional.one_hot(torch.arange(n) % k, k).double()
    r = inception_score(onehot, splits=10)
    assert r.mean == pytest.approx(k) and r.std == pytest.approx(0.0, abs=1e-9) and len(r.split_scores) == 10
    with pytest.raises(InvalidArgumentError, match="sum to 1"):
        inception_score(torch.ones(20, 3))
    with pytest.raises(InsufficientDataError, match="splits"):
        inception_score(uniform[:5], splits=10)


def test_identity_distance():
    pixels = load_encoder("pixels")
    x = torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    r = identity_distance(x, x.clone(), pixels, n_bootstrap=100)
    assert r.mean == pytest.approx(0.0, abs=1e-6) and float(r.per_image.abs().max()) < 1e-6
    y = torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    r2 = identity_distance(x, y, pixels, identities=torch.tensor([0, 0, 1, 1, 2, 2]), n_bootstrap=200)
    assert 0.5 < r2.mean < 1.5 and r2.ci_low <= r2.mean <= r2.ci_high
    emb = identity_distance_from_embeddings(pixels.embed(x), pixels.embed(y), identities=torch.tensor(
        [0, 0, 1, 1, 2, 2]), n_bootstrap=200)
    assert emb.mean == pytest.approx(r2.mean) and emb.ci_low == pytest.approx(r2.ci_low)
    flat = lambda imgs: imgs.flatten(1)  # noqa: E731  a plain callable encoder
    assert identity_distance(x, x, flat, n_bootstrap=0).mean == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ShapeError):
        identity_distance(x, y[:3], pixels)


def test_reidentification_rate():
    pixels = load_encoder("pixels")
    g = torch.Generator().manual_seed(0)
    ids = torch.arange(10).repeat_interleave(3)
    x = torch.rand(30, 3, 16, 16, generator=g)
    same = reidentification_rate(x, x.clone(), pixels, identities=ids, far=0.01)
    assert same.tar == 1.0 and same.rank1 == 1.0 and same.far_achieved <= 0.01
    assert same.rank1_chance == pytest.approx(0.1) and same.n_impostor == 30 * 27
    noise = torch.rand(30, 3, 16, 16, generator=g)
    rnd = reidentification_rate(x, noise, pixels, identities=ids, far=0.01)
    assert rnd.rank1 < 0.3 and rnd.tar < 0.2
    orig = reidentification_rate(x, x.clone(), pixels, identities=ids, far=0.01, threshold_from="originals")
    assert orig.threshold_from == "originals" and orig.n_impostor == 30 * 27 // 2
    gal = reidentification_rate(x, x.clone(), pixels, identities=ids, far=0.01, gallery=x[::3],
                                gallery_identities=ids[::3])
    assert gal.n_gallery == 10 and gal.rank1_chance == pytest.approx(0.1)
    emb = reidentification_from_embeddings(pixels.embed(x), pixels.embed(noise), identities=ids, far=0.01)
    assert (emb.tar, emb.rank1, emb.n_impostor) == (rnd.tar, rnd.rank1, rnd.n_impostor)
    assert emb.threshold == pytest.approx(rnd.threshold)
    with pytest.raises(InsufficientDataError, match="resolution"):
        reidentification_rate(x, x, pixels, identities=ids, far=1e-4)
    with pytest.raises(InvalidArgumentError, match="gallery_identities"):
        reidentification_rate(x, x, pixels, identities=ids, gallery=x)


def test_attribute_preservation_and_fid_features():
    x = torch.rand(8, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    labels = (x[:, 0].mean(dim=(1, 2)) > 0.5).long()

    def classifier(imgs):  # a perfect classifier for this label
        p = (imgs[:, 0].mean(dim=(1, 2)) > 0.5).long()
        return torch.nn.functional.one_hot(p, 2).float()

    r = attribute_preservation(x, {"bright_red": labels}, classifier=lambda im: {"bright_red": classifier(im)})
    assert r.accuracy == {"bright_red": 1.0} and r.majority["bright_red"] >= 0.5
    r2 = attribute_preservation(x, 1 - labels, classifier)
    assert r2.accuracy["attribute"] == 0.0
    feats = features_for_fid(x, load_encoder("pixels"))
    assert feats.shape == (8, 768) and feats.dtype == F64


def test_inception_needs_supplied_weights(tmp_path):
    with pytest.raises(MissingResourceError, match="Inception-v3"):
        load_inception(weights=tmp_path)  # an empty folder
    with pytest.raises(MissingResourceError):
        load_inception(weights=tmp_path / "missing.pth")


@pytest.mark.slow
def test_training_time_identity_noise():
    fs = _faceset()
    net = SynthesisNet(**TINY, noise_prob=1.0, swap_prob=0.0).fit(fs, epochs_ae=1, epochs_gan=2, batch_size=6, seed=0,
                                                                  device="cpu")
    for row in net.history["gan"]:
        # every sample is privatised, so none gets the reconstruction term
        assert row["noise_rate"] == 1.0 and "g_rec" not in row
    again = SynthesisNet(**TINY, noise_prob=1.0, swap_prob=0.0).fit(fs, epochs_ae=1, epochs_gan=2, batch_size=6,
                                                                    seed=0, device="cpu")
    assert again.history["gan"][-1]["g_loss"] == pytest.approx(net.history["gan"][-1]["g_loss"])  # seeded
    off = SynthesisNet(**TINY).fit(fs, epochs_ae=1, epochs_gan=1, batch_size=6, seed=0, device="cpu")
    assert off.history["gan"][0]["noise_rate"] == 0.0 and "g_rec" in off.history["gan"][0]
    none = SynthesisNet(**TINY, noise="none", noise_prob=1.0).fit(fs, epochs_ae=1, epochs_gan=1, batch_size=6,
                                                                  seed=0, device="cpu")
    assert none.history["gan"][0]["noise_rate"] == 0.0  # the no-noise ablation never sees noise
    for bad in ((0.0, 1.0), (1.0, 0.5), (0.1,), "0.1", (0.1, float("inf"))):
        with pytest.raises(InvalidArgumentError, match="train_epsilons"):
            SynthesisNet(**TINY, train_epsilons=bad)
    with pytest.raises(InvalidArgumentError, match="noise_prob"):
        SynthesisNet(**TINY, noise_prob=1.5)


def test_frechet_distance_from_samples_matches_the_covariance_route():
    from privkit.synthesisnet import frechet_distance, frechet_distance_from_samples
    from privkit.synthesisnet.metrics import _gaussian_fit

    g = torch.Generator().manual_seed(0)
    for n1, n2, d in ((12, 9, 30), (40, 50, 6)):  # fewer rows than dimensions, and more
        a = torch.randn(n1, d, generator=g, dtype=torch.float64)
        b = 0.5 + 2.0 * torch.randn(n2, d, generator=g, dtype=torch.float64)
        ref = frechet_distance(*_gaussian_fit(a), *_gaussian_fit(b))
        assert frechet_distance_from_samples(a, b) == pytest.approx(ref, rel=1e-6, abs=1e-8)
        assert fid(a, b, n_bootstrap=0).value == pytest.approx(ref, rel=1e-6, abs=1e-8)
    a = torch.randn(10, 40, generator=g, dtype=torch.float64)
    assert frechet_distance_from_samples(a, a) == pytest.approx(0.0, abs=1e-8)
    with pytest.raises(InsufficientDataError):
        frechet_distance_from_samples(a[:1], a)


def test_fid_and_inception_score_bootstrap_intervals():
    g = torch.Generator().manual_seed(1)
    real = torch.randn(30, 64, generator=g, dtype=torch.float64)
    fake = 0.3 + torch.randn(30, 64, generator=g, dtype=torch.float64)
    r = fid(real, fake, n_bootstrap=30, seed=0)
    assert r.ci_low <= r.ci_high and math.isfinite(r.ci_low) and r.dim == 64
    logits = 3.0 * torch.randn(40, 5, generator=g, dtype=torch.float64)
    probs = torch.softmax(logits, dim=1)
    plain = inception_score(probs, splits=4)
    assert math.isnan(plain.ci_low) and math.isnan(plain.ci_high)
    boot = inception_score(probs, splits=4, n_bootstrap=40, seed=0)
    assert boot.mean == pytest.approx(plain.mean, rel=1e-12)
    assert 1.0 <= boot.ci_low <= boot.ci_high <= 5.0 and boot.confidence == 0.95
    again = inception_score(probs, splits=4, n_bootstrap=40, seed=0)
    assert (again.ci_low, again.ci_high) == (boot.ci_low, boot.ci_high)  # same computation, same seed
    with pytest.raises(PrivkitError):
        inception_score(probs, splits=4, n_bootstrap=-1)
