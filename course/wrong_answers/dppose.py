"""Plausible wrong answers to the dppose assignment; each must lose the marks of its question.

``WRONG_ANSWERS[question][name] = (why it is wrong, code)``: the code replaces the question's answer cell.
"""

WRONG_ANSWERS = {
    "q1": {
        "batch-mean-repeated": (
            "computes the gradient of the batch-mean loss once and repeats it B times, so every row is the "
            "average gradient instead of that example's own gradient",
            '''
def per_sample_grads(model, x, y, loss_fn):
    model.zero_grad()
    loss_fn(model(x), y).backward()
    b = x.shape[0]
    return {name: p.grad.detach().unsqueeze(0).repeat(b, *([1] * p.ndim))
            for name, p in model.named_parameters()}
''',
        ),
        "no-unsqueeze": (
            "passes the single example to the model and the loss without a batch dimension, so the "
            "'batchmean' KL loss divides by the number of bins instead of 1 and the gradients shrink",
            '''
def per_sample_grads(model, x, y, loss_fn):
    params = {name: p.detach() for name, p in model.named_parameters()}

    def example_loss(prm, xi, yi):
        out = functional_call(model, prm, (xi,))
        return loss_fn(out, yi)

    grads = vmap(grad(example_loss), in_dims=(None, 0, 0))(params, x, y)
    return {name: g.detach() for name, g in grads.items()}
''',
        ),
        "loop-without-zero-grad": (
            "loops over examples with backward() but never zeroes .grad, so row i holds the running sum of "
            "the gradients of examples 0..i",
            '''
def per_sample_grads(model, x, y, loss_fn):
    rows = {name: [] for name, _ in model.named_parameters()}
    model.zero_grad()
    for i in range(x.shape[0]):
        loss_fn(model(x[i:i + 1]), y[i:i + 1]).backward()
        for name, p in model.named_parameters():
            rows[name].append(p.grad.detach().clone())
    return {name: torch.stack(r) for name, r in rows.items()}
''',
        ),
    },
    "q2": {
        "clip-after-sum": (
            "sums the raw per-example gradients and clips the sum to C, which bounds nothing about one "
            "record's influence and gives a different (smaller) gradient",
            '''
def clip_and_noise(per_sample, C, sigma, expected_batch, generator):
    sums = {name: g.sum(0) for name, g in per_sample.items()}
    norm = sum(s.pow(2).sum() for s in sums.values()).sqrt()
    factor = min(1.0, C / (float(norm) + 1e-6))
    out = {}
    for name, s in sums.items():
        total = s * factor
        if sigma > 0:
            total = total + sigma * C * torch.randn(total.shape, generator=generator, dtype=total.dtype)
        out[name] = total / expected_batch
    return out
''',
        ),
        "noise-std-sigma": (
            "adds noise of standard deviation sigma instead of sigma * C (the noise must scale with the "
            "sensitivity C of the clipped sum)",
            '''
def clip_and_noise(per_sample, C, sigma, expected_batch, generator):
    first = next(iter(per_sample.values()))
    b = first.shape[0]
    sq = sum(g.reshape(b, -1).pow(2).sum(1) for g in per_sample.values())
    factor = (C / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    out = {}
    for name, g in per_sample.items():
        total = (g * factor.view(-1, *([1] * (g.ndim - 1)))).sum(0)
        if sigma > 0:
            total = total + sigma * torch.randn(total.shape, generator=generator, dtype=total.dtype)
        out[name] = total / expected_batch
    return out
''',
        ),
        "per-parameter-clipping": (
            "clips each parameter tensor of a record to norm C separately, so one record can move the sum by "
            "C times the square root of the number of tensors",
            '''
def clip_and_noise(per_sample, C, sigma, expected_batch, generator):
    out = {}
    for name, g in per_sample.items():
        b = g.shape[0]
        norms = g.reshape(b, -1).norm(dim=1)
        factor = (C / (norms + 1e-6)).clamp(max=1.0)
        total = (g * factor.view(-1, *([1] * (g.ndim - 1)))).sum(0)
        if sigma > 0:
            total = total + sigma * C * torch.randn(total.shape, generator=generator, dtype=total.dtype)
        out[name] = total / expected_batch
    return out
''',
        ),
        "realised-batch-divisor": (
            "divides by the realised batch size B instead of the expected batch size, which is not what the "
            "accountant assumes and leaks the batch size",
            '''
def clip_and_noise(per_sample, C, sigma, expected_batch, generator):
    first = next(iter(per_sample.values()))
    b = first.shape[0]
    sq = sum(g.reshape(b, -1).pow(2).sum(1) for g in per_sample.values())
    factor = (C / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    out = {}
    for name, g in per_sample.items():
        total = (g * factor.view(-1, *([1] * (g.ndim - 1)))).sum(0)
        if sigma > 0:
            total = total + sigma * C * torch.randn(total.shape, generator=generator, dtype=total.dtype)
        out[name] = total / b
    return out
''',
        ),
    },
    "q3": {
        "one-step": (
            "calls the accountant's step() once, so it accounts a single DP-SGD step whatever the number of "
            "steps (epsilon far too small, sigma far too small)",
            '''
def epsilon_after(q, sigma, steps, delta):
    acc = RDPAccountant()
    acc.step(noise_multiplier=sigma, sample_rate=q)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return float(acc.get_epsilon(delta))


def sigma_for(target_epsilon, q, steps, delta):
    lo, hi = 0.0, 1.0
    while epsilon_after(q, hi, steps, delta) > target_epsilon:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-4 * hi:
        mid = (lo + hi) / 2
        if epsilon_after(q, mid, steps, delta) > target_epsilon:
            lo = mid
        else:
            hi = mid
    return hi
''',
        ),
        "full-batch-rate": (
            "forgets the subsampling and accounts every step with sample_rate = 1, losing the privacy "
            "amplification of Poisson sampling (epsilon far too large, sigma far too large)",
            '''
def epsilon_after(q, sigma, steps, delta):
    acc = RDPAccountant()
    acc.history = [(sigma, 1.0, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return float(acc.get_epsilon(delta))


def sigma_for(target_epsilon, q, steps, delta):
    lo, hi = 0.0, 1.0
    while epsilon_after(q, hi, steps, delta) > target_epsilon:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-4 * hi:
        mid = (lo + hi) / 2
        if epsilon_after(q, mid, steps, delta) > target_epsilon:
            lo = mid
        else:
            hi = mid
    return hi
''',
        ),
    },
    "q4": {
        "eigh-ascending": (
            "takes the first k eigenvectors returned by torch.linalg.eigh of G^T G, which come in ascending "
            "order: the bottom-k directions, where the public gradients are smallest",
            '''
def public_subspace(public_grads, k):
    _, vecs = torch.linalg.eigh(public_grads.T @ public_grads)
    return vecs[:, :k].contiguous()


def project(g, basis):
    return basis @ (basis.T @ g)
''',
        ),
        "unnormalised-gram": (
            "uses the Gram trick G^T U_k but forgets the Lambda^{-1/2} scaling, so the basis columns are "
            "orthogonal with norms sqrt(lambda_i) and the 'projection' rescales the gradient",
            '''
def public_subspace(public_grads, k):
    vals, vecs = torch.linalg.eigh(public_grads @ public_grads.T)
    top = vecs.flip(1)[:, :k]
    return public_grads.T @ top


def project(g, basis):
    return basis @ (basis.T @ g)
''',
        ),
        "centred-pca": (
            "centres the public gradients before the SVD (PCA on the covariance), which throws away the mean "
            "gradient direction, the most useful one",
            '''
def public_subspace(public_grads, k):
    centred = public_grads - public_grads.mean(0, keepdim=True)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    return vh[:k].T.contiguous()


def project(g, basis):
    return basis @ (basis.T @ g)
''',
        ),
    },
}
