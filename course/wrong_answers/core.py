"""Plausible wrong answers to the core assignment; each must lose the marks of its question.

``WRONG_ANSWERS[question][name] = (why it is wrong, code)``: the code replaces the question's answer cell.
"""

WRONG_ANSWERS = {
    "q1": {
        "classic-sigma": (
            "returns the classic sigma sqrt(2 ln(1.25/delta))/eps, which adds too much noise below eps = 1 "
            "and too little at eps = 10",
            '''
def gaussian_delta(epsilon, sigma, sensitivity=1.0):
    a = sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
    b = -sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
    return float(norm.cdf(a) - math.exp(epsilon) * norm.cdf(b))


def analytic_sigma(epsilon, delta, sensitivity=1.0):
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon
''',
        ),
        "sensitivity-ignored": (
            "bisects delta(eps, sigma) for sensitivity 1 whatever the query's sensitivity, so a query with "
            "sensitivity 2 gets half the noise it needs",
            '''
def gaussian_delta(epsilon, sigma, sensitivity=1.0):
    a = 1 / (2 * sigma) - epsilon * sigma
    b = -1 / (2 * sigma) - epsilon * sigma
    return float(norm.cdf(a) - math.exp(epsilon) * norm.cdf(b))


def analytic_sigma(epsilon, delta, sensitivity=1.0):
    lo, hi = 1e-6, 1.0
    while gaussian_delta(epsilon, hi) > delta:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-10 * hi:
        mid = (lo + hi) / 2
        if gaussian_delta(epsilon, mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi
''',
        ),
    },
    "q2": {
        "half-noise": (
            "adds noise of standard deviation sigma / 2: half the noise the calibration asked for",
            '''
def gaussian_mechanism(values, sigma, generator):
    noise = torch.randn(values.shape, generator=generator, dtype=torch.float64)
    return values.to(torch.float64) + (sigma / 2) * noise
''',
        ),
        "one-shared-draw": (
            "draws one noise value and adds it to every entry, so the entries are not independently protected",
            '''
def gaussian_mechanism(values, sigma, generator):
    noise = torch.randn(1, generator=generator, dtype=torch.float64)
    return values.to(torch.float64) + sigma * noise
''',
        ),
    },
    "q3": {
        "point-estimates": (
            "plugs in the measured rates instead of their upper confidence bounds, so sampling luck "
            "is reported as privacy loss",
            '''
def clopper_pearson_upper(k, n, alpha):
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(1 - alpha, k + 1, n - k))


def audit_epsilon(out0, out1, threshold, delta, alpha):
    fpr = max(np.mean(out0 >= threshold), 1e-12)
    fnr = max(np.mean(out1 < threshold), 1e-12)
    best = 0.0
    for a, b in ((fnr, fpr), (fpr, fnr)):
        if 1 - delta - a > 0:
            best = max(best, math.log((1 - delta - a) / b))
    return best
''',
        ),
        "delta-forgotten": (
            "drops delta from the bound, ln((1 - FNR) / FPR), which overstates epsilon when delta is not tiny",
            '''
def clopper_pearson_upper(k, n, alpha):
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(1 - alpha, k + 1, n - k))


def audit_epsilon(out0, out1, threshold, delta, alpha):
    fpr = clopper_pearson_upper(int(np.sum(out0 >= threshold)), len(out0), alpha / 2)
    fnr = clopper_pearson_upper(int(np.sum(out1 < threshold)), len(out1), alpha / 2)
    best = 0.0
    for a, b in ((fnr, fpr), (fpr, fnr)):
        if 1 - a > 0:
            best = max(best, math.log((1 - a) / b))
    return best
''',
        ),
    },
}
