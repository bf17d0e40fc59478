"""Data sources: minibatch schemes' inclusion frequencies, reproducibility, XLA."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.data.base import BatchState
from tfp_sgmcmc.data.in_memory import SCHEMES
from tfp_sgmcmc.data.permutation import feistel_permutation, feistel_radices


def _rows(n):
    """Data whose rows are their own indices (float column + int column)."""
    return (np.arange(n, dtype=np.float64)[:, None] * np.ones((1, 2)), np.arange(n))


def _indices(batch):
    return batch[1].numpy()


@pytest.mark.parametrize("num_items", [1, 2, 3, 7, 16, 100, 1000, 4097])
def test_feistel_permutation_is_a_bijection(num_items):
    for s in ([1, 2], [3, 4]):
        perm = feistel_permutation(tf.range(num_items), num_items, tf.constant(s)).numpy()
        np.testing.assert_array_equal(np.sort(perm), np.arange(num_items))
    if num_items >= 100:  # different keys give different permutations
        a = feistel_permutation(tf.range(num_items), num_items, tf.constant([1, 2])).numpy()
        b = feistel_permutation(tf.range(num_items), num_items, tf.constant([1, 3])).numpy()
        assert np.mean(a == b) < 0.1


@pytest.mark.parametrize("num_items", [1, 2, 5, 17, 10**6, 2**32 - 2**16])
def test_feistel_radices_cover_the_domain_tightly(num_items):
    a, b = feistel_radices(num_items)
    assert num_items <= a * b < num_items + a  # a value walks with probability < 1/b
    assert a * b < 2**32  # uint32 arithmetic


def test_feistel_permutation_rejects_a_domain_beyond_uint32():
    with pytest.raises(ValueError, match="num_items"):
        feistel_permutation(tf.range(3), 2**32 - 2**16 + 1, tf.constant([1, 2]))


def _position_law_pvalues(perms):
    """Chi-square p-values of where rows 0 and 1 land in ``perms`` (one permutation per row).

    Under uniformly random permutations of ``[0, m)``, row 0's position is
    uniform (10 bins) and rows 0 and 1 land in quarters as independent draws
    would (16 cells, up to the O(1/m) exclusion of equal positions).
    """
    m = perms.shape[1]
    pos = np.argsort(perms, axis=1)[:, :2]
    q = m // 4
    single = np.bincount(pos[:, 0] * 10 // m, minlength=10)
    joint = np.bincount((pos[:, 0] // q) * 4 + pos[:, 1] // q, minlength=16)
    return scipy.stats.chisquare(single).pvalue, scipy.stats.chisquare(joint).pvalue


def test_feistel_permutation_looks_uniformly_random():
    """Over many keys, rows land uniformly and neighbours are separated; the same
    check rejects a keyed rotation (a bijection whose neighbours stay together)."""
    m, num_keys = 1000, 3000
    keys = np.stack([np.arange(num_keys), np.full(num_keys, 5)], axis=1).astype(np.int32)
    x = np.broadcast_to(np.arange(m), (num_keys, m))
    perms = feistel_permutation(tf.constant(x), m, tf.constant(keys)).numpy()
    p_single, p_joint = _position_law_pvalues(perms)
    assert p_single > 1e-3 and p_joint > 1e-3, (p_single, p_joint)
    # The first batch (n = 1,000 of N = 10**6) draws from the 1,000 blocks of 1,000
    # consecutive rows like random rows: 1000 (1 - (1 - 1/1000)**1000) = 632.3 distinct
    # blocks expected, sd ≈ 9.
    rows = feistel_permutation(tf.range(1000), 10**6, tf.constant([7, 8])).numpy()
    assert abs(len(np.unique(rows // 1000)) - 632.3) < 45

    rotation = (x + 7919 * keys[:, :1]) % m  # power: a bijection that keeps neighbours
    assert min(_position_law_pvalues(rotation)) < 1e-6


@pytest.mark.parametrize("num_items", [3, 5, 7, 10, 13, 50])
def test_feistel_position_law_is_exactly_uniform_on_small_domains(num_items):
    """Over seeds, the row at each position is uniform on [0, N): a batch holds every row
    with probability n/N at every step (the unbiasedness of the "epoch" scheme). Chi-square
    over 20,000 keys at p = 1e-4; power: the same map without its keyed rotation (four
    Feistel rounds alone, measurably non-uniform on the smallest domains) fails."""
    from tfp_sgmcmc.data.permutation import _hashed_keys

    num_keys = 20_000
    keys = np.stack([np.arange(num_keys), np.full(num_keys, 11)], axis=1).astype(np.int32)
    x = np.broadcast_to(np.arange(num_items), (num_keys, num_items))
    perms = feistel_permutation(tf.constant(x), num_items, tf.constant(keys)).numpy()
    offset = (_hashed_keys(tf.constant(keys)).numpy()[:, -1] % num_items)[:, None]
    unrotated = (perms - offset) % num_items
    worst, worst_unrotated = 1.0, 1.0
    for j in range(num_items):  # each position's image
        counts = np.bincount(perms[:, j], minlength=num_items)
        worst = min(worst, scipy.stats.chisquare(counts).pvalue)
        counts = np.bincount(unrotated[:, j], minlength=num_items)
        worst_unrotated = min(worst_unrotated, scipy.stats.chisquare(counts).pvalue)
    assert worst > 1e-4 / num_items, worst  # Bonferroni over the positions
    if num_items <= 10:  # where 20,000 keys resolve the unrotated network's bias
        assert worst_unrotated < 1e-6, worst_unrotated


@pytest.mark.parametrize("big_n,n", [(12, 3), (10, 3), (9, 9 // 2)])
def test_epoch_scheme_visits_every_row_once_per_epoch(big_n, n, seed):
    data = sg.InMemoryData(_rows(big_n), scheme="epoch")
    state = data.init_batch_state()
    per_epoch = big_n // n
    seeds = tf.random.experimental.stateless_split([seed, 0], 3 * per_epoch)
    epochs = []
    for e in range(3):
        seen = []
        for b in range(per_epoch):
            batch, state = data.sample_batch(n, state, seeds[e * per_epoch + b])
            idx = _indices(batch)
            np.testing.assert_array_equal(batch[0].numpy()[:, 0], idx)  # arrays stay aligned
            seen.extend(idx.tolist())
        assert int(state.position) == 0  # a new epoch starts
        assert len(set(seen)) == len(seen) == per_epoch * n  # no row twice within an epoch
        if big_n % n == 0:
            assert sorted(seen) == list(range(big_n))  # every row exactly once
        epochs.append(seen)
    assert epochs[0] != epochs[1]  # a fresh permutation each epoch


def test_epoch_scheme_inclusion_frequency_with_remainder(seed):
    """N = 10, n = 3: each epoch skips one row of a fresh permutation, so over
    many epochs every row is included with frequency 9/10 per epoch."""
    big_n, n, num_epochs = 10, 3, 300
    data = sg.InMemoryData(_rows(big_n), scheme="epoch")

    @tf.function
    def one_epoch(state, sd):
        seeds = tf.random.experimental.stateless_split(sd, 3)
        idx = []
        for b in range(3):
            batch, state = data.sample_batch(n, state, seeds[b])
            idx.append(batch[1])
        return tf.concat(idx, 0), state

    counts = np.zeros(big_n)
    state = data.init_batch_state()
    for e in range(num_epochs):
        idx, state = one_epoch(state, tf.constant([seed, e]))
        counts += np.bincount(idx.numpy(), minlength=big_n)
    p = 0.9
    z = (counts - num_epochs * p) / np.sqrt(num_epochs * p * (1 - p))
    assert np.all(np.abs(z) < 3.5), z


def test_with_replacement_indices_are_uniform(seed):
    big_n, n, draws = 10, 50, 100
    data = sg.InMemoryData(_rows(big_n), scheme="with_replacement")
    state = data.init_batch_state()
    counts = np.zeros(big_n)
    for k in range(draws):
        batch, _ = data.sample_batch(n, state, tf.constant([seed, k]))
        counts += np.bincount(_indices(batch), minlength=big_n)
    assert scipy.stats.chisquare(counts).pvalue > 1e-3
    # Power: the same test rejects a 30% excess on one row (~9 binomial sds).
    skewed = counts.copy()
    skewed[0] *= 1.3
    assert scipy.stats.chisquare(skewed, skewed.sum() / big_n * np.ones(big_n)).pvalue < 1e-3


def test_random_window_inclusion_is_exactly_n_over_N(seed):
    """Each of the N windows holds n distinct rows and every row lies in exactly n
    windows: the inclusion probability of a uniform window is n/N."""
    big_n, n = 8, 3
    data = sg.InMemoryData(_rows(big_n), scheme="random_window", shuffle_seed=seed)
    data.prepare(n)
    state = data.init_batch_state()
    windows = set()
    for k in range(300):  # P(some window never drawn) < 8·(7/8)^300 ≈ 3e-17
        batch, _ = data.sample_batch(n, state, tf.constant([seed, k]))
        idx = tuple(_indices(batch).tolist())
        assert len(set(idx)) == n
        windows.add(idx)
    assert len(windows) == big_n
    counts = np.bincount(np.concatenate([list(w) for w in windows]), minlength=big_n)
    np.testing.assert_array_equal(counts, np.full(big_n, n))


def test_random_window_copy_is_built_once_outside_a_traced_program():
    """A program that builds its estimator while tracing (as the tuner does per arm)
    captures the shuffled copy; the shuffle and the N-row gather are not graph ops, so
    they do not run again at every call."""
    data = sg.InMemoryData(_rows(50), scheme="random_window")

    @tf.function
    def program(seed):
        est = sg.MinibatchEstimator(lambda t, b: -tf.square(t), data, batch_size=5)
        return est.data.sample_batch(5, data.init_batch_state(), seed)[0]

    graph = program.get_concrete_function(tf.TensorSpec([2], tf.int32)).graph
    ops = {op.type for op in graph.get_operations()}
    assert not any("Shuffle" in t for t in ops), sorted(ops)
    copy = data._windowed[5][0]
    assert hasattr(copy, "numpy")  # an eager tensor, computed once
    batch = tf.nest.flatten(program(tf.constant([1, 2])))
    assert batch[0].shape[0] == 5


@pytest.mark.parametrize("scheme", SCHEMES)
def test_same_seed_same_batch_and_full_batch(scheme):
    data = sg.InMemoryData(_rows(20), scheme=scheme)
    data.prepare(5)
    st = data.init_batch_state()
    a, _ = data.sample_batch(5, st, tf.constant([1, 2]))
    b, _ = data.sample_batch(5, st, tf.constant([1, 2]))
    c, _ = data.sample_batch(5, st, tf.constant([1, 3]))
    np.testing.assert_array_equal(_indices(a), _indices(b))
    assert not np.array_equal(_indices(a), _indices(c))
    full, _ = data.sample_batch(20, st, tf.constant([1, 2]))  # n = N: the data set itself
    np.testing.assert_array_equal(_indices(full), np.arange(20))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_sample_batch_compiles_with_xla(scheme):
    data = sg.InMemoryData(_rows(50), scheme=scheme)
    data.prepare(10)

    @tf.function(jit_compile=True)
    def draw(sd):
        b, st = data.sample_batch(10, data.init_batch_state(), sd)
        return b[1], st.position

    idx, pos = draw(tf.constant([4, 5]))
    assert idx.shape == [10] and np.all((idx.numpy() >= 0) & (idx.numpy() < 50))
    assert len(set(idx.numpy().tolist())) == (10 if scheme != "with_replacement" else
                                              len(set(idx.numpy().tolist())))


@pytest.mark.parametrize("pack_rows", [False, True])
@pytest.mark.parametrize("big_n", [400, 403])  # 400 = 20 x 20: no cycle walk; 403 walks
@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_epoch_batches_are_the_documented_rows_in_every_mode(mode, big_n, pack_rows):
    """The k-th batch of an epoch is rows ``π(k n), ..., π(k n + n - 1)`` of the keyed
    permutation, whatever XLA does with the index computation (the indices are
    computed into their own buffer before the gather): eagerly, in a graph and
    under XLA, from the packed copy and array by array, and per chain."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((big_n, 3)).astype(np.float32)
    ids = np.arange(big_n, dtype=np.int32)
    data = sg.InMemoryData((x, ids), pack_rows=pack_rows)
    n = 40
    data.prepare(n)

    def draws(seed):
        st, out = data.init_batch_state(), []
        for _ in range(3):
            (xb, ib), st = data.sample_batch(n, st, seed)
            out.append((xb, ib))
        chains = BatchState(tf.broadcast_to(st.epoch_seed, [2, 2]), tf.constant([1, 2]))
        (xc, ic), _ = data.sample_chain_batches(n, chains, seed)
        return out, st.epoch_seed, (xc, ic), chains.epoch_seed

    run = {"eager": draws, "graph": tf.function(draws),
           "xla": tf.function(draws, jit_compile=True)}[mode]
    out, epoch_seed, (xc, ic), chain_seeds = run(tf.constant([8, 1]))
    for k, (xb, ib) in enumerate(out):
        want = feistel_permutation(
            tf.range(k * n, (k + 1) * n), big_n, epoch_seed, index_dtype=tf.int32
        ).numpy()
        np.testing.assert_array_equal(ib.numpy(), want)
        np.testing.assert_array_equal(xb.numpy(), x[want])
    for c, position in enumerate([1, 2]):  # chains at batches 1 and 2 of their epochs
        want = feistel_permutation(
            tf.range(position * n, (position + 1) * n), big_n, chain_seeds[c],
            index_dtype=tf.int32,
        ).numpy()
        np.testing.assert_array_equal(ic.numpy()[c], want)
        np.testing.assert_array_equal(xc.numpy()[c], x[want])


def test_materialized_indices_returns_the_indices_unchanged():
    """The fusion boundary in front of the gather is the identity on in-range indices,
    for any shape and both index dtypes, eagerly and under XLA."""
    from tfp_sgmcmc.data.in_memory import _materialized_indices

    idx = np.random.default_rng(1).integers(0, 97, (4, 25))
    for dtype in (tf.int32, tf.int64):
        t = tf.constant(idx, dtype)
        np.testing.assert_array_equal(_materialized_indices(t, 97).numpy(), idx)
        compiled = tf.function(lambda v: _materialized_indices(v, 97), jit_compile=True)
        np.testing.assert_array_equal(compiled(t).numpy(), idx)
        assert _materialized_indices(t, 97).dtype == dtype


def test_materialized_indices_of_empty_and_dynamic_shapes():
    """No element to test (an empty batch), or a shape known only at run time."""
    from tfp_sgmcmc.data.in_memory import _materialized_indices

    empty = tf.zeros([0], tf.int32)
    assert _materialized_indices(empty, 5).shape == [0]
    dynamic = tf.function(
        lambda v: _materialized_indices(v, 10),
        input_signature=[tf.TensorSpec([None], tf.int64)],
    )
    np.testing.assert_array_equal(dynamic(tf.constant([3, 9, 0], tf.int64)).numpy(), [3, 9, 0])
    assert dynamic(tf.zeros([0], tf.int64)).shape == [0]


@pytest.mark.parametrize(
    "words, padded",
    [(1, 2), (2, 2), (3, 4), (5, 8), (6, 8), (11, 16), (16, 16), (17, 32), (33, 48)],
)
def test_packed_row_width_keeps_rows_inside_cache_lines(words, padded):
    """Whole 64-bit words; a power of two up to a 64-byte line, whole lines beyond,
    so a row of a line-aligned table never straddles two lines."""
    from tfp_sgmcmc.data.in_memory import _padded_row_words

    got = _padded_row_words(words)
    assert got == padded
    row_bytes = 4 * got
    offsets = np.arange(64) * row_bytes  # 64 rows from a line-aligned start
    first, last = offsets // 64, (offsets + 4 * words - 1) // 64
    assert np.all(last - first == -(-4 * words // 64) - 1)  # the fewest lines a row can span


def _mixed_rows(big_n, rng, float_dtype):
    """Arrays of every packing case: 4- and 8-byte dtypes (packed), 1- and 2-byte (not)."""
    return {
        "x": rng.standard_normal((big_n, 3, 2)).astype(float_dtype),
        "label": rng.integers(0, 5, big_n).astype(np.int32),
        "w": rng.standard_normal(big_n).astype(float_dtype),
        "count": rng.integers(-(2**40), 2**40, (big_n, 2)),  # int64: two words per value
        "mask": rng.random(big_n) < 0.5,  # bool: gathered on its own
        "code": rng.integers(0, 9, big_n).astype(np.uint16),  # 2 bytes: gathered on its own
    }


@pytest.mark.parametrize("scheme", ["epoch", "with_replacement"])
@pytest.mark.parametrize("big_n", [1000, 1003])  # 1003: the Feistel network cycle-walks
@pytest.mark.parametrize("float_dtype", [np.float32, np.float64])
def test_packed_rows_give_bit_identical_batches(scheme, big_n, float_dtype):
    """One gather from the row-packed copy returns exactly the per-array gathers:
    every dtype, dict structure, consecutive steps across epoch boundaries, per-chain
    batches, eagerly and under XLA."""
    arrays = _mixed_rows(big_n, np.random.default_rng(3), float_dtype)
    packed = sg.InMemoryData(arrays, scheme=scheme, pack_rows=True)
    plain = sg.InMemoryData(arrays, scheme=scheme)  # the default: no copy
    n = 100
    packed.prepare(n)
    plain.prepare(n)
    assert packed._packed_cache["rows"] is not None and "rows" not in plain._packed_cache

    def same(a, b):
        assert set(a) == set(b)
        for k in a:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
            np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())

    st = packed.init_batch_state()
    for k in range(23):  # 10 batches per epoch: two epoch boundaries
        sd = tf.constant([k, 3])
        a, st_a = packed.sample_batch(n, st, sd)
        b, st_b = plain.sample_batch(n, st, sd)
        same(a, b)
        np.testing.assert_array_equal(st_a.position.numpy(), st_b.position.numpy())
        st = st_a
    chains = BatchState(tf.zeros([3, 2], tf.int32), tf.constant([0, 4, 9]))
    for k in range(3):
        a, chains_a = packed.sample_chain_batches(n, chains, tf.constant([k, 9]))
        b, _ = plain.sample_chain_batches(n, chains, tf.constant([k, 9]))
        same(a, b)
        assert a["x"].shape == [3, n, 3, 2]
        chains = chains_a
    compiled = tf.function(lambda s, sd: packed.sample_batch(n, s, sd)[0], jit_compile=True)
    same(compiled(packed.init_batch_state(), tf.constant([4, 5])),
         plain.sample_batch(n, plain.init_batch_state(), tf.constant([4, 5]))[0])


def test_packed_rows_skip_narrow_dtypes_and_single_arrays():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((50, 2))
    mixed = {"x": x, "mask": rng.random(50) < 0.5, "k": rng.integers(0, 9, 50).astype(np.uint8)}
    data = sg.InMemoryData(mixed, pack_rows=True)  # one 8-byte array: nothing to pack
    data.prepare(5)
    assert data._packed_cache["rows"] is None
    plain = sg.InMemoryData(mixed, pack_rows=False)
    a, _ = data.sample_batch(5, data.init_batch_state(), tf.constant([1, 2]))
    b, _ = plain.sample_batch(5, plain.init_batch_state(), tf.constant([1, 2]))
    for k in mixed:
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())
    both = sg.InMemoryData((x, np.arange(50), rng.random(50) < 0.5), pack_rows=True)
    both.prepare(5)
    default = sg.InMemoryData((x, np.arange(50)))  # opt-in: the default makes no copy
    default.prepare(5)
    assert "rows" not in default._packed_cache
    rows = both._packed_cache["rows"]
    assert rows.layout == [(0, 4), (4, 2), None]  # float64 x: 2 x 2 words; int64: 2; bool apart
    # 6 data words, padded to 8 (32 bytes: no row straddles a cache line), as 64-bit words
    assert rows.packed.dtype == tf.uint64 and rows.packed.shape == [50, 4]
    np.testing.assert_array_equal(
        tf.bitcast(rows.packed, tf.uint32).numpy().reshape(50, 8)[:, 6:], 0)
    views = both.with_scheme("with_replacement")  # the copy is shared, not rebuilt
    assert views._packed_cache is both._packed_cache
    with pytest.raises(ValueError, match="pack_rows"):
        sg.InMemoryData(x, pack_rows=1)
    for bad in ("a", 1.5, True, 2**64):
        with pytest.raises(ValueError, match="`shuffle_seed`"):
            sg.InMemoryData(x, scheme="random_window", shuffle_seed=bad)


@pytest.mark.parametrize("num_items", [7, 1000, 1003])
def test_feistel_int32_indices_equal_int64(num_items):
    x = tf.range(num_items)
    a = feistel_permutation(x, num_items, tf.constant([5, 6]))
    b = feistel_permutation(x, num_items, tf.constant([5, 6]), index_dtype=tf.int32)
    assert a.dtype == tf.int64 and b.dtype == tf.int32
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match="index_dtype"):
        feistel_permutation(x, 2**31 + 1, tf.constant([5, 6]), index_dtype=tf.int32)
    with pytest.raises(ValueError, match="index_dtype"):
        feistel_permutation(x, num_items, tf.constant([5, 6]), index_dtype=tf.uint32)


def test_structure_is_preserved_and_full_batches_cover_the_data():
    x = np.arange(14.0).reshape(7, 2)
    data = sg.InMemoryData({"x": x, "y": np.arange(7.0)}, scheme="with_replacement")
    batch, _ = data.sample_batch(3, data.init_batch_state(), tf.constant([0, 1]))
    assert set(batch) == {"x", "y"} and batch["x"].shape == [3, 2]
    np.testing.assert_array_equal(batch["x"].numpy()[:, 0] / 2, batch["y"].numpy())
    chunks = list(data.full_batches(3))
    assert [int(c["y"].shape[0]) for c in chunks] == [3, 3, 1]
    np.testing.assert_array_equal(np.concatenate([c["y"].numpy() for c in chunks]), np.arange(7))
    assert data.with_scheme("epoch").scheme == "epoch" and data.scheme == "with_replacement"
    assert data.num_examples == 7 and data.float_dtype == tf.float64


def test_dataset_adapter():
    x = np.arange(12.0)
    ds = tf.data.Dataset.from_tensor_slices(x).batch(4, drop_remainder=True)
    data = sg.DatasetData(ds, num_examples=12, full_dataset=tf.data.Dataset.from_tensor_slices(x))
    est = sg.MinibatchEstimator(lambda t, b: -0.5 * tf.square(b - t[..., None]), data, 4)
    st = est.bootstrap(None)
    seen = []
    for _ in range(3):
        b, st = est.sample_batch(st, tf.constant([0, 0]))
        seen.extend(b.numpy().tolist())
    assert seen == list(range(12))
    full = est.full_log_prob_and_gradient(tf.constant(1.0, tf.float64))
    np.testing.assert_allclose(full.grads_target_log_prob[0].numpy(), np.sum(x - 1.0))
    with pytest.raises(ValueError, match="`batch_size`"):
        sg.MinibatchEstimator(lambda t, b: b, data, 3)
    nofull = sg.DatasetData(ds, num_examples=12)
    with pytest.raises(ValueError, match="full_dataset"):
        list(nofull.full_batches())


def test_dataset_misuse_is_named():
    """Unbatched elements, a scalar per-example likelihood and a streamed full pass inside
    an XLA program get errors that say what to do."""
    x = np.ones((10, 3), np.float32)
    for ds in (tf.data.Dataset.from_tensor_slices((x, np.arange(10))), tf.data.Dataset.range(10),
               tf.data.Dataset.from_tensor_slices(x).batch(2).map(lambda b: (b, 1.0))):
        with pytest.raises(ValueError, match="`dataset` must yield batches"):
            sg.DatasetData(ds, num_examples=10)
    est = sg.MinibatchEstimator(lambda t, b: tf.reduce_sum(-0.5 * (b - t) ** 2), x, 2)
    theta = tf.zeros(3)
    with pytest.raises(ValueError, match="got a scalar"):
        est(theta, est.bootstrap(theta), tf.constant([0, 0]))
    with pytest.raises(ValueError, match="got a scalar"):
        est.full_log_prob_and_gradient(theta)
    rows = tf.data.Dataset.from_tensor_slices(x)
    data = sg.DatasetData(rows.batch(2, drop_remainder=True), 10, full_dataset=rows,
                          full_cache_bytes=0)
    est = sg.MinibatchEstimator(lambda t, b: -0.5 * tf.reduce_sum((b - t) ** 2, -1), data, 2)
    with pytest.raises(ValueError, match="inside an XLA-compiled program"):
        tf.function(est.full_log_prob_and_gradient, jit_compile=True)(theta)
    # As a graph the streamed pass works.
    full = tf.function(est.full_log_prob_and_gradient)(theta)
    np.testing.assert_allclose(full.grads_target_log_prob[0].numpy(), np.full(3, 10.0))


@pytest.mark.parametrize("keep", [None, 0], ids=["kept", "streamed"])
@pytest.mark.parametrize("batched", [False, True], ids=["rows", "batched"])
def test_dataset_full_pass_with_rows_or_batches(batched, keep):
    x = np.arange(24.0).reshape(12, 2)
    ds = tf.data.Dataset.from_tensor_slices(x).batch(4, drop_remainder=True)
    full = tf.data.Dataset.from_tensor_slices(x)
    if batched:
        full = full.batch(5)
    data = sg.DatasetData(ds, num_examples=12, full_dataset=full, full_cache_bytes=keep)
    assert data.full_in_memory == (keep is None)
    for chunk in (None, 5):
        rows = np.concatenate([c.numpy() for c in data.full_batches(chunk)])
        np.testing.assert_array_equal(rows, x)


def test_dataset_full_data_kept_in_memory_is_read_once():
    x = np.arange(24.0).reshape(12, 2)
    ds = tf.data.Dataset.from_tensor_slices(x).batch(4, drop_remainder=True)
    passes = []

    def rows():
        passes.append(1)
        yield from x

    def full() -> tf.data.Dataset:
        spec = tf.TensorSpec([2], tf.float64)
        return tf.data.Dataset.from_generator(rows, output_signature=spec)

    # 12 rows of 16 bytes: kept at 192 bytes, streamed below.
    data = sg.DatasetData(ds, 12, full_dataset=full(), full_cache_bytes=192)
    assert data.full_in_memory
    assert not sg.DatasetData(ds, 12, full_dataset=full(), full_cache_bytes=191).full_in_memory
    est = sg.MinibatchEstimator(lambda t, b: -0.5 * tf.reduce_sum(tf.square(b - t), -1), data, 4)
    score = tf.function(
        lambda t: est.full_log_prob_and_gradient(t).grads_target_log_prob[0], jit_compile=True
    )
    for theta in ([1.0, 2.0], [0.0, -1.0]):
        t = tf.constant(theta, tf.float64)
        np.testing.assert_allclose(score(t).numpy(), np.sum(x - t.numpy(), axis=0))
    assert len(passes) == 1
    with pytest.raises(ValueError, match="`full_dataset` has 11 rows"):
        short = sg.DatasetData(ds, 12, full_dataset=tf.data.Dataset.from_tensor_slices(x[:11]))
        list(short.full_batches())
    with pytest.raises(ValueError, match="`full_cache_bytes`"):
        sg.DatasetData(ds, 12, full_dataset=full(), full_cache_bytes=-1)


@pytest.mark.parametrize("kernel", ["sghmc", "csgld"])
def test_chains_agree_with_and_without_the_packed_copy(kernel):
    """The packed copy changes how rows are fetched, not which: a compiled chain of a
    fixed seed sees the same batches (N = 2,003: the permutation cycle-walks), so it
    agrees to rounding. XLA may fuse the likelihood differently around the unpacking
    (here d = 3: last-bit differences), hence a tolerance rather than bit equality."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2003, 3)).astype(np.float32)
    y = (rng.random(2003) < 0.5).astype(np.float32)

    def log_lik(theta, batch):
        xb, yb = batch
        logits = tf.linalg.matvec(xb, theta)
        return -tf.nn.sigmoid_cross_entropy_with_logits(labels=yb, logits=logits)

    chains = []
    for pack in (False, True):
        est = sg.MinibatchEstimator(log_lik, sg.InMemoryData((x, y), pack_rows=pack), 50)
        k = (sg.SGHMC(est, 1e-4, num_leapfrog_steps=3) if kernel == "sghmc"
             else sg.CSGLD(est, 1e-4, min_energy=-1e4))
        run = tf.function(
            lambda k=k: tfp.mcmc.sample_chain(60, tf.zeros([3]), kernel=k, trace_fn=None,
                                              seed=tf.constant([3, 4])),
            jit_compile=True,
        )
        chains.append(run().numpy())
    np.testing.assert_allclose(chains[0], chains[1], rtol=1e-5, atol=1e-6)
    assert np.max(np.abs(chains[1])) > 1e-3  # the chains moved
