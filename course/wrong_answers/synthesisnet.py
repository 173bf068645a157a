"""Plausible wrong answers to the synthesisnet assignment; each must lose the marks of its question.

``WRONG_ANSWERS[question][name] = (why it is wrong, code)``: the code replaces the question's answer cell.
"""

WRONG_ANSWERS = {
    "q1": {
        "shared-draw": (
            "draws one noise vector and broadcasts it to every row, so the rows are not independent and the "
            "differences between released records carry no noise",
            '''
def metric_laplace(n, d, epsilon, generator):
    uniforms = torch.rand((1, d), generator=generator, dtype=torch.float64)
    radius = -torch.log1p(-uniforms).sum(dim=1) / epsilon
    direction = torch.randn((1, d), generator=generator, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=1, keepdim=True)
    return (radius[:, None] * direction).expand(n, d).clone()
''',
        ),
        "coordinate-laplace": (
            "draws d independent one-dimensional Laplace(1/epsilon) coordinates, whose density is "
            "exp(-epsilon ||x||_1): the radius law is wrong (mean about sqrt(2d)/epsilon instead of d/epsilon)",
            '''
def metric_laplace(n, d, epsilon, generator):
    u = torch.rand((n, d), generator=generator, dtype=torch.float64)
    sign = torch.where(torch.rand((n, d), generator=generator, dtype=torch.float64) < 0.5, -1.0, 1.0)
    return sign * (-torch.log1p(-u)) / epsilon
''',
        ),
        "gamma-shape-d-minus-1": (
            "draws the radius from Gamma(d - 1, 1/epsilon), confusing the sphere-area factor r^(d-1) with the "
            "Gamma shape, so the noise is too small by 1/epsilon on average",
            '''
def metric_laplace(n, d, epsilon, generator):
    uniforms = torch.rand((n, max(d - 1, 1)), generator=generator, dtype=torch.float64)
    radius = -torch.log1p(-uniforms).sum(dim=1) / epsilon
    direction = torch.randn((n, d), generator=generator, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=1, keepdim=True)
    return radius[:, None] * direction
''',
        ),
    },
    "q2": {
        "clip-after-noise": (
            "adds the noise first and clips afterwards, which throws most of the noise away instead of bounding "
            "the inputs the guarantee is about",
            '''
def _identity_noise(n, d, epsilon, generator):
    uniforms = torch.rand((n, d), generator=generator, dtype=torch.float64)
    radius = -torch.log1p(-uniforms).sum(dim=1) / epsilon
    direction = torch.randn((n, d), generator=generator, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=1, keepdim=True)
    return radius[:, None] * direction


def privatize(z_id, epsilon, clip_norm, generator):
    z = z_id.to(torch.float64)
    noisy = z + _identity_noise(z.shape[0], z.shape[1], epsilon, generator)
    norms = torch.linalg.vector_norm(noisy, dim=1, keepdim=True)
    return noisy * torch.clamp(clip_norm / norms.clamp_min(1e-300), max=1.0)
''',
        ),
        "clip-batch-norm": (
            "clips the norm of the whole batch (its Frobenius norm) instead of each row, so small rows are shrunk "
            "and the per-face bound depends on the rest of the batch",
            '''
def _identity_noise(n, d, epsilon, generator):
    uniforms = torch.rand((n, d), generator=generator, dtype=torch.float64)
    radius = -torch.log1p(-uniforms).sum(dim=1) / epsilon
    direction = torch.randn((n, d), generator=generator, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=1, keepdim=True)
    return radius[:, None] * direction


def privatize(z_id, epsilon, clip_norm, generator):
    z = z_id.to(torch.float64)
    norm = float(torch.linalg.vector_norm(z))
    clipped = z * min(1.0, clip_norm / max(norm, 1e-300))
    return clipped + _identity_noise(z.shape[0], z.shape[1], epsilon, generator)
''',
        ),
    },
    "q3": {
        "radius-not-diameter": (
            "uses e^(epsilon R), forgetting that two latents in the ball of radius R can be 2R apart",
            '''
def pair_bound(z1, z2, epsilon, clip_norm):
    def clip(z):
        z = z.to(torch.float64)
        norm = float(torch.linalg.vector_norm(z))
        return z if norm <= clip_norm else z * (clip_norm / norm)
    return math.exp(epsilon * float(torch.linalg.vector_norm(clip(z1) - clip(z2))))


def indistinguishability_bound(epsilon, clip_norm):
    return math.exp(epsilon * clip_norm)


def epsilon_for_ratio(ratio, clip_norm):
    return math.log(ratio) / clip_norm


def expected_noise_radius(d, epsilon):
    return d / epsilon
''',
        ),
        "radius-without-d": (
            "gives the mean noise radius as 1/epsilon, the one-dimensional value, forgetting that the radius "
            "is Gamma(d, 1/epsilon) with mean d/epsilon",
            '''
def pair_bound(z1, z2, epsilon, clip_norm):
    def clip(z):
        z = z.to(torch.float64)
        norm = float(torch.linalg.vector_norm(z))
        return z if norm <= clip_norm else z * (clip_norm / norm)
    return math.exp(epsilon * float(torch.linalg.vector_norm(clip(z1) - clip(z2))))


def indistinguishability_bound(epsilon, clip_norm):
    return math.exp(2.0 * epsilon * clip_norm)


def epsilon_for_ratio(ratio, clip_norm):
    return math.log(ratio) / (2.0 * clip_norm)


def expected_noise_radius(d, epsilon):
    return 1.0 / epsilon
''',
        ),
        "pair-without-clipping": (
            "measures the distance between the raw latents in pair_bound, but the guarantee is about the "
            "clipped latents that the mechanism actually perturbs",
            '''
def pair_bound(z1, z2, epsilon, clip_norm):
    return math.exp(epsilon * float(torch.linalg.vector_norm(z1.to(torch.float64) - z2.to(torch.float64))))


def indistinguishability_bound(epsilon, clip_norm):
    return math.exp(2.0 * epsilon * clip_norm)


def epsilon_for_ratio(ratio, clip_norm):
    return math.log(ratio) / (2.0 * clip_norm)


def expected_noise_radius(d, epsilon):
    return d / epsilon
''',
        ),
    },
    "q4": {
        "euclidean-distance": (
            "returns the mean Euclidean distance between rows, which depends on the latents' lengths and is not "
            "the cosine distance face recognisers use",
            '''
def identity_distance(z, z_pub):
    return float(torch.linalg.vector_norm(z.to(torch.float64) - z_pub.to(torch.float64), dim=1).mean())
''',
        ),
        "cosine-similarity": (
            "returns the mean cosine similarity instead of one minus it, so a more private release gets a "
            "smaller value",
            '''
def identity_distance(z, z_pub):
    a = z.to(torch.float64)
    b = z_pub.to(torch.float64)
    cos = (a * b).sum(dim=1) / (torch.linalg.vector_norm(a, dim=1) * torch.linalg.vector_norm(b, dim=1))
    return float(cos.mean())
''',
        ),
    },
}
