"""Plausible wrong answers to the ScoreShield assignment; each must lose the marks of its question.

``WRONG_ANSWERS[question][name] = (why it is wrong, code)``: the code replaces the question's answer cell.
"""

WRONG_ANSWERS = {
    "q1": {
        "unit-sensitivity": (
            "calibrates sigma for sensitivity 1, but replacing one unit-norm gallery record can move its score "
            "by up to 2, so the noise is half of what the privacy target needs",
            '''
def score_sigma(epsilon, delta):
    return gaussian_sigma(epsilon, delta, sensitivity=1.0)


def release_scores(gallery, query, sigma, generator):
    clean = gallery.to(torch.float64) @ query.to(torch.float64)
    noise = sigma * torch.randn(clean.shape, generator=generator, dtype=torch.float64)
    return (clean + noise).clamp(-1.0, 1.0)
''',
        ),
        "variance-for-std": (
            "scales the standard normal noise by sigma**2 (the variance) instead of sigma, so for sigma < 1 "
            "the released scores carry far too little noise",
            '''
def score_sigma(epsilon, delta):
    return gaussian_sigma(epsilon, delta, sensitivity=2.0)


def release_scores(gallery, query, sigma, generator):
    clean = gallery.to(torch.float64) @ query.to(torch.float64)
    noise = sigma ** 2 * torch.randn(clean.shape, generator=generator, dtype=torch.float64)
    return (clean + noise).clamp(-1.0, 1.0)
''',
        ),
        "clip-before-noise": (
            "clips the clean scores (already in [-1, 1]) and only then adds the noise, so the released scores "
            "leave [-1, 1]",
            '''
def score_sigma(epsilon, delta):
    return gaussian_sigma(epsilon, delta, sensitivity=2.0)


def release_scores(gallery, query, sigma, generator):
    clean = (gallery.to(torch.float64) @ query.to(torch.float64)).clamp(-1.0, 1.0)
    noise = sigma * torch.randn(clean.shape, generator=generator, dtype=torch.float64)
    return clean + noise
''',
        ),
    },
    "q2": {
        "not-symmetrised": (
            "adds the full i.i.d. matrix W, so the released matrix is not symmetric and every off-diagonal "
            "cosine is published twice with independent noise",
            '''
def gram_sensitivity(n):
    return 2.0 * math.sqrt(2.0 * (n - 1))


def noisy_gram(embeddings, sigma, generator):
    E = embeddings.to(torch.float64)
    n = E.shape[0]
    W = sigma * torch.randn((n, n), generator=generator, dtype=torch.float64)
    return E @ E.T + W
''',
        ),
        "forgot-half": (
            "symmetrises with W + W^T instead of (W + W^T)/2, so the off-diagonal noise has variance "
            "2 sigma^2 (not sigma^2/2) and the diagonal 4 sigma^2",
            '''
def gram_sensitivity(n):
    return 2.0 * math.sqrt(2.0 * (n - 1))


def noisy_gram(embeddings, sigma, generator):
    E = embeddings.to(torch.float64)
    n = E.shape[0]
    W = sigma * torch.randn((n, n), generator=generator, dtype=torch.float64)
    M = E @ E.T + (W + W.T)
    return 0.5 * (M + M.T)
''',
        ),
        "row-only-sensitivity": (
            "counts the n - 1 changed entries of the record's row but not their mirror copies in its column, "
            "giving 2 sqrt(n - 1) instead of 2 sqrt(2 (n - 1))",
            '''
def gram_sensitivity(n):
    return 2.0 * math.sqrt(n - 1)


def noisy_gram(embeddings, sigma, generator):
    E = embeddings.to(torch.float64)
    n = E.shape[0]
    W = sigma * torch.randn((n, n), generator=generator, dtype=torch.float64)
    M = E @ E.T + 0.5 * (W + W.T)
    return 0.5 * (M + M.T)
''',
        ),
    },
    "q3": {
        "no-unit-diagonal": (
            "the box step only clips entries into [-1, 1] and the final step skips the diagonal rescale, so "
            "the result is PSD but its diagonal is not 1",
            '''
def project_to_correlation(S, iters=100):
    def psd(Y):
        lam, P = torch.linalg.eigh(Y)
        X = (P * lam.clamp_min(0.0)) @ P.T
        return 0.5 * (X + X.T)

    S_hat = S.to(torch.float64)
    S_hat = 0.5 * (S_hat + S_hat.T)
    for _ in range(iters):
        S_hat = 0.5 * (psd(S_hat) + S_hat.clamp(-1.0, 1.0))
        S_hat = 0.5 * (S_hat + S_hat.T)
    return psd(S_hat)
''',
        ),
        "psd-once-then-unit-diagonal": (
            "one PSD projection followed by overwriting the diagonal with ones: lowering the diagonal of a PSD "
            "matrix breaks positive semidefiniteness",
            '''
def project_to_correlation(S, iters=100):
    Y = S.to(torch.float64)
    Y = 0.5 * (Y + Y.T)
    lam, P = torch.linalg.eigh(Y)
    X = (P * lam.clamp_min(0.0)) @ P.T
    X = 0.5 * (X + X.T)
    X = X.clamp(-1.0, 1.0)
    X.fill_diagonal_(1.0)
    return X
''',
        ),
        "clip-and-rescale-only": (
            "runs only the final step (one eigenvalue clip and a diagonal rescale) and never iterates: feasible, "
            "but several percent farther from the input than the nearest correlation matrix",
            '''
def project_to_correlation(S, iters=100):
    Y = S.to(torch.float64)
    Y = 0.5 * (Y + Y.T)
    lam, P = torch.linalg.eigh(Y)
    X = (P * lam.clamp_min(0.0)) @ P.T
    X = 0.5 * (X + X.T)
    r = torch.diagonal(X).rsqrt()
    X = X * r[:, None] * r[None, :]
    X = 0.5 * (X + X.T)
    X.fill_diagonal_(1.0)
    return X
''',
        ),
    },
    "q4": {
        "no-recalibration": (
            "returns the clean threshold (the score with a clean false-match rate of alpha), which after the "
            "noise lets through far more impostors than alpha",
            '''
def private_fmr(tau, impostor, sigma):
    s = torch.as_tensor(impostor, dtype=torch.float64)
    return float(torch.special.ndtr(-(tau - s) / sigma).mean())


def recalibrated_threshold(impostor, sigma, alpha):
    s = torch.sort(torch.as_tensor(impostor, dtype=torch.float64), descending=True).values
    k = int(math.floor(alpha * s.numel()))
    return float(s[k])
''',
        ),
        "variance-for-std": (
            "divides the threshold gap by sigma**2 instead of sigma in the Gaussian tail, which models far less "
            "noise than there is for sigma < 1",
            '''
def private_fmr(tau, impostor, sigma):
    s = torch.as_tensor(impostor, dtype=torch.float64)
    return float(torch.special.ndtr(-(tau - s) / sigma ** 2).mean())


def recalibrated_threshold(impostor, sigma, alpha):
    if alpha < private_fmr(1.0, impostor, sigma):
        return 1.0
    if alpha > private_fmr(-1.0, impostor, sigma):
        return -1.0
    lo, hi = -1.0, 1.0
    while hi - lo > 1e-12:
        mid = 0.5 * (lo + hi)
        if private_fmr(mid, impostor, sigma) > alpha:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
''',
        ),
    },
}
