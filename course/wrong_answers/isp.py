"""Plausible wrong answers to the isp assignment; each must lose the marks of its question.

``WRONG_ANSWERS[question][name] = (why it is wrong, code)``: the code replaces the question's answer cell.
"""

WRONG_ANSWERS = {
    "q1": {
        "keeps-identity-subspace": (
            "returns U_r U_r^T, the projector onto the identity subspace, instead of I - U_r U_r^T, so it keeps "
            "exactly what ISP should remove (rank r, not d - r)",
            '''
def isp_projector(embeddings, labels, rank):
    x = embeddings.double()
    classes, inv = torch.unique(labels, return_inverse=True)
    sums = torch.zeros(classes.numel(), x.shape[1], dtype=torch.float64).index_add_(0, inv, x)
    counts = torch.bincount(inv, minlength=classes.numel()).double()
    means = sums / counts[:, None]
    centred = (means - means.mean(0, keepdim=True)).T
    u, _, _ = torch.linalg.svd(centred, full_matrices=False)
    u_r = u[:, :rank]
    return u_r @ u_r.T
''',
        ),
        "bottom-directions": (
            "removes the r singular directions with the smallest singular values (the last columns of U) "
            "instead of the leading ones, so the strongest between-person directions survive",
            '''
def isp_projector(embeddings, labels, rank):
    x = embeddings.double()
    classes, inv = torch.unique(labels, return_inverse=True)
    sums = torch.zeros(classes.numel(), x.shape[1], dtype=torch.float64).index_add_(0, inv, x)
    counts = torch.bincount(inv, minlength=classes.numel()).double()
    means = sums / counts[:, None]
    centred = (means - means.mean(0, keepdim=True)).T
    u, _, _ = torch.linalg.svd(centred, full_matrices=False)
    u_r = u[:, -rank:]
    return torch.eye(x.shape[1], dtype=torch.float64) - u_r @ u_r.T
''',
        ),
        "uncentred-means": (
            "takes the SVD of the raw class means without subtracting the mean of the means, so the first "
            "removed direction is the common offset of all embeddings, not a between-person direction",
            '''
def isp_projector(embeddings, labels, rank):
    x = embeddings.double()
    classes, inv = torch.unique(labels, return_inverse=True)
    sums = torch.zeros(classes.numel(), x.shape[1], dtype=torch.float64).index_add_(0, inv, x)
    counts = torch.bincount(inv, minlength=classes.numel()).double()
    means = sums / counts[:, None]
    u, _, _ = torch.linalg.svd(means.T, full_matrices=False)
    u_r = u[:, :rank]
    return torch.eye(x.shape[1], dtype=torch.float64) - u_r @ u_r.T
''',
        ),
    },
    "q2": {
        "one-over-n": (
            "takes 1/N as the smallest resolvable FAR, so it reports TARs whose threshold rests on one to nine "
            "impostor scores instead of returning nan",
            '''
def smallest_resolvable_far(n_impostor):
    return math.inf if n_impostor == 0 else 1 / n_impostor


def tar_at_far(genuine, impostor, far):
    n = impostor.numel()
    if far < smallest_resolvable_far(n) * (1 - 1e-12):
        return math.nan
    k = int(math.floor(far * n * (1 + 1e-12)))
    if k >= n:
        return math.nan
    tau = torch.sort(impostor.double(), descending=True).values[k]
    return float((genuine.double() > tau).double().mean())
''',
        ),
        "accept-at-threshold": (
            "accepts scores greater than or equal to tau, so with ties at the threshold more than K impostors "
            "pass and genuine scores equal to tau are counted as accepted",
            '''
def smallest_resolvable_far(n_impostor):
    return math.inf if n_impostor == 0 else 10 / n_impostor


def tar_at_far(genuine, impostor, far):
    n = impostor.numel()
    if far < smallest_resolvable_far(n) * (1 - 1e-12):
        return math.nan
    k = int(math.floor(far * n * (1 + 1e-12)))
    if k >= n:
        return math.nan
    tau = torch.sort(impostor.double(), descending=True).values[k]
    return float((genuine.double() >= tau).double().mean())
''',
        ),
        "genuine-quantile": (
            "sets the threshold at the (1 - FAR) quantile of the genuine scores instead of the impostor scores, "
            "so the threshold no longer controls the false-accept rate",
            '''
def smallest_resolvable_far(n_impostor):
    return math.inf if n_impostor == 0 else 10 / n_impostor


def tar_at_far(genuine, impostor, far):
    n = impostor.numel()
    if far < smallest_resolvable_far(n) * (1 - 1e-12):
        return math.nan
    tau = torch.quantile(genuine.double(), 1 - far)
    return float((genuine.double() > tau).double().mean())
''',
        ),
    },
    "q3": {
        "self-pairs": (
            "includes the pairs (i, i) in the genuine set, which all score exactly 1 and inflate the TAR",
            '''
def pair_scores(embeddings, labels):
    x = embeddings.double()
    x = x / x.norm(dim=1, keepdim=True)
    n = x.shape[0]
    i, j = torch.triu_indices(n, n, offset=0)
    s = (x @ x.T)[i, j]
    same = labels[i] == labels[j]
    return s[same], s[~same]
''',
        ),
        "ordered-pairs": (
            "counts every pair twice, as (i, j) and (j, i), so the pair counts (and the resolvable FAR) are wrong",
            '''
def pair_scores(embeddings, labels):
    x = embeddings.double()
    x = x / x.norm(dim=1, keepdim=True)
    n = x.shape[0]
    s = x @ x.T
    off = ~torch.eye(n, dtype=torch.bool)
    same = (labels[:, None] == labels[None, :]) & off
    diff = labels[:, None] != labels[None, :]
    return s[same], s[diff]
''',
        ),
    },
    "q4": {
        "no-intercept": (
            "fits the ridge regression on the raw, uncentred embeddings without an intercept, which fails when "
            "the class signal lies along the embeddings' common offset",
            '''
def probe_accuracy(train_x, train_y, test_x, test_y, lam=1e-3):
    x = train_x.double()
    c = int(max(int(train_y.max()), int(test_y.max()))) + 1
    y = torch.nn.functional.one_hot(train_y.long(), c).double()
    w = torch.linalg.solve(x.T @ x + lam * torch.eye(x.shape[1], dtype=torch.float64), x.T @ y)
    pred = (test_x.double() @ w).argmax(1)
    return float((pred == test_y.long()).double().mean())
''',
        ),
        "train-accuracy": (
            "reports the accuracy on the training set, which overstates what the probe learned (it can fit "
            "random labels perfectly)",
            '''
def probe_accuracy(train_x, train_y, test_x, test_y, lam=1e-3):
    x = train_x.double()
    mu = x.mean(0)
    xc = x - mu
    c = int(max(int(train_y.max()), int(test_y.max()))) + 1
    y = torch.nn.functional.one_hot(train_y.long(), c).double()
    ybar = y.mean(0)
    w = torch.linalg.solve(xc.T @ xc + lam * torch.eye(x.shape[1], dtype=torch.float64), xc.T @ (y - ybar))
    pred = (xc @ w + ybar).argmax(1)
    return float((pred == train_y.long()).double().mean())
''',
        ),
    },
}
