"""Loaders of the MovieLens and MNIST files: round trips and one clear error per failure."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from tfp_sgmcmc.models.data_files import (
    MNIST_IDX_FILES,
    DataFileError,
    load_mnist,
    load_movielens,
    read_idx,
    write_idx,
)

# --------------------------------------------------------------------------- #
# MovieLens
# --------------------------------------------------------------------------- #
UDATA = "196\t242\t3\t881250949\n186\t302\t3\t891717742\n22\t377\t1\t878887116\n196\t377\t5\t1\n"
CSV = (
    "userId,movieId,rating,timestamp\n1,31,2.5,1260759144\n1,1029,3.0,1260759179\n"
    "7,31,4.5,1260759182\n"
)


def _write(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_udata_round_trip(tmp_path):
    d = load_movielens(_write(tmp_path, "u.data", UDATA))
    assert d.num_ratings == 4 and d.num_users == 3 and d.num_items == 3
    # ids re-indexed to 0..K-1 in increasing order of the original ids
    np.testing.assert_array_equal(d.user_ids, [22, 186, 196])
    np.testing.assert_array_equal(d.item_ids, [242, 302, 377])
    np.testing.assert_array_equal(d.user_ids[d.users], [196, 186, 22, 196])
    np.testing.assert_array_equal(d.item_ids[d.items], [242, 302, 377, 377])
    np.testing.assert_array_equal(d.ratings, [3, 3, 1, 5])
    assert (d.min_rating, d.max_rating) == (1.0, 5.0)
    assert d.users.dtype == np.int32 and d.ratings.dtype == np.float32


def test_ratings_csv_round_trip_keeps_half_stars(tmp_path):
    d = load_movielens(_write(tmp_path, "ratings.csv", CSV))
    assert d.num_ratings == 3 and d.num_users == 2 and d.num_items == 2
    np.testing.assert_array_equal(d.ratings, [2.5, 3.0, 4.5])
    np.testing.assert_array_equal(d.item_ids[d.items], [31, 1029, 31])
    assert (d.min_rating, d.max_rating) == (0.5, 5.0)


@pytest.mark.parametrize(
    "name, text, needle",
    [
        ("u.data", "", "is empty"),
        ("u.data", "196 242 3 881250949\n", "unrecognised first line"),
        ("u.data", UDATA + "186\t302\n", "line 5: expected 4 fields"),  # truncated row
        ("u.data", UDATA[:-1], "does not end with a newline"),  # cut in the last line
        ("u.data", UDATA[:-3], "line 4: expected 4 fields"),  # cut inside the last row
        ("u.data", UDATA + "186\t302\t6\t1\n", "out of range (expected integer stars 1-5)"),
        ("u.data", UDATA + "186\t302\t2.5\t1\n", "out of range"),
        ("u.data", UDATA + "186\tabc\t2\t1\n", "expected integer ids"),
        ("ratings.csv", CSV + "1,2,5.5,3\n", "out of range (expected half stars"),
        ("ratings.csv", CSV + "1,2,3.3,3\n", "out of range"),
        ("ratings.csv", "userId,movieId,rating,timestamp\n", "contains no ratings"),
        # Non-finite and huge ids equal their rounding and became -2**63 as int64.
        ("ratings.csv", CSV + "1,inf,3.5,10\n", "line 5: expected integer ids"),
        ("ratings.csv", CSV + "1e30,2,3.5,10\n", "line 5: expected integer ids"),
        ("u.data", UDATA + "186\t1e20\t3\t1\n", "line 5: expected integer ids"),
        ("u.data", UDATA + "186\t9007199254740992\t3\t1\n", "line 5: ids must be non-negative"),
        ("u.data", UDATA + "-1\t302\t3\t1\n", "line 5: ids must be non-negative"),
    ],
)
def test_movielens_errors_name_file_and_expectation(tmp_path, name, text, needle):
    path = _write(tmp_path, name, text)
    with pytest.raises(DataFileError) as e:
        load_movielens(path)
    msg = str(e.value)
    assert msg.startswith(path) and needle in msg and "\n" not in msg
    assert isinstance(e.value, ValueError)


def test_movielens_missing_and_binary(tmp_path):
    with pytest.raises(DataFileError, match="no such file"):
        load_movielens(str(tmp_path / "nope.data"))
    p = tmp_path / "u.data"
    p.write_bytes(b"\xff\xfe\x00\x01" * 10)
    with pytest.raises(DataFileError, match="not a text file"):
        load_movielens(str(p))


# --------------------------------------------------------------------------- #
# MNIST
# --------------------------------------------------------------------------- #
def _mnist_arrays(n_train=12, n_test=5, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        rng.integers(0, 10, n_train).astype(np.uint8),
        rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        rng.integers(0, 10, n_test).astype(np.uint8),
    )


def _write_idx_dir(directory, arrays, gz: bool) -> None:
    keys = [("train", "images"), ("train", "labels"), ("test", "images"), ("test", "labels")]
    for key, a in zip(keys, arrays):
        write_idx(os.path.join(directory, MNIST_IDX_FILES[key] + (".gz" if gz else "")), a)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_idx_round_trip(tmp_path, gz):
    arrays = _mnist_arrays()
    _write_idx_dir(tmp_path, arrays, gz)
    out = load_mnist(str(tmp_path))
    np.testing.assert_allclose(out["x_train"], arrays[0].reshape(12, 784) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(out["y_train"], arrays[1])
    np.testing.assert_array_equal(out["y_test"], arrays[3])
    assert out["x_test"].shape == (5, 784) and out["x_train"].dtype == np.float32


def test_mnist_npz_round_trip(tmp_path):
    xtr, ytr, xte, yte = _mnist_arrays()
    np.savez(tmp_path / "mnist.npz", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
    for path in (tmp_path, tmp_path / "mnist.npz"):
        out = load_mnist(str(path))
        np.testing.assert_array_equal(out["y_test"], yte)
        np.testing.assert_allclose(out["x_test"] * 255.0, xte.reshape(5, 784), atol=1e-4)


def test_idx_errors(tmp_path):
    good = tmp_path / "a-idx3-ubyte"
    write_idx(str(good), np.zeros((3, 28, 28), np.uint8))
    raw = good.read_bytes()
    cases = {
        "truncated": (raw[:-10], "truncated"),
        "trailing": (raw + b"\x00", "trailing data"),
        "magic": (b"\x01\x02" + raw[2:], "bad magic number"),
        "dtype": (raw[:2] + b"\x0d" + raw[3:], "expected 0x08"),
        "header": (raw[:6], "truncated IDX header"),
    }
    for name, (data, needle) in cases.items():
        p = tmp_path / f"{name}-idx3-ubyte"
        p.write_bytes(data)
        with pytest.raises(DataFileError, match=needle) as e:
            read_idx(str(p), 3)
        assert str(e.value).startswith(str(p))
    with pytest.raises(DataFileError, match="expected 1"):
        read_idx(str(good), 1)
    bad_gz = tmp_path / "b-idx3-ubyte.gz"
    bad_gz.write_bytes(gzip.compress(raw)[:-20])
    with pytest.raises(DataFileError, match="gzip"):
        read_idx(str(bad_gz), 3)


def test_mnist_dataset_errors(tmp_path):
    with pytest.raises(DataFileError, match="no such file or directory"):
        load_mnist(str(tmp_path / "missing"))
    with pytest.raises(DataFileError, match="missing train-images-idx3-ubyte"):
        load_mnist(str(tmp_path))
    xtr, ytr, xte, yte = _mnist_arrays()
    # labels out of range
    d1 = tmp_path / "labels"
    d1.mkdir()
    _write_idx_dir(d1, (xtr, np.full(12, 11, np.uint8), xte, yte), gz=False)
    with pytest.raises(DataFileError, match=r"labels range 11..11 \(expected 0-9\)"):
        load_mnist(str(d1))
    # count mismatch
    d2 = tmp_path / "count"
    d2.mkdir()
    _write_idx_dir(d2, (xtr, ytr[:7], xte, yte), gz=True)
    with pytest.raises(DataFileError, match="one label per image"):
        load_mnist(str(d2))
    # not 28x28
    d3 = tmp_path / "shape"
    d3.mkdir()
    _write_idx_dir(d3, (np.zeros((12, 8, 8), np.uint8), ytr, xte, yte), gz=False)
    with pytest.raises(DataFileError, match=r"expected \[n, 28, 28\]"):
        load_mnist(str(d3))
    # npz: missing key, not an archive, float pixels
    np.savez(tmp_path / "partial.npz", x_train=xtr, y_train=ytr)
    with pytest.raises(DataFileError, match="missing arrays"):
        load_mnist(str(tmp_path / "partial.npz"))
    (tmp_path / "fake.npz").write_bytes(b"not an archive")
    with pytest.raises(DataFileError, match="not a .npz archive"):
        load_mnist(str(tmp_path / "fake.npz"))
    np.savez(tmp_path / "floats.npz", x_train=xtr / 255.0, y_train=ytr, x_test=xte, y_test=yte)
    with pytest.raises(DataFileError, match="expected uint8"):
        load_mnist(str(tmp_path / "floats.npz"))
    trunc = tmp_path / "trunc.npz"
    np.savez(trunc, x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
    trunc.write_bytes(trunc.read_bytes()[:200])
    with pytest.raises(DataFileError, match="cannot be read"):
        load_mnist(str(trunc))
