"""Readers for the MovieLens and MNIST files a user already has on disk.

Nothing is downloaded: every reader takes a path and either returns arrays or
raises `DataFileError` (a ``ValueError``) whose one-line message names
the file and what was expected.

MovieLens (`load_movielens`)
    * ``u.data`` of MovieLens 100K: tab-separated ``user item rating timestamp``,
      integer stars 1-5, no header.
    * ``ratings.csv`` of the newer releases (ml-latest, ml-20m, ml-25m, ...):
      header ``userId,movieId,rating,timestamp``, stars 0.5-5.0 in half-star
      steps. Half stars are **kept as given** (the PMF likelihood is Gaussian,
      so a rating of 3.5 needs no rounding); the rating scale travels with the
      data (``min_rating``, ``max_rating``) and predictions are clipped to it.
      Any value off the half-star grid or outside [0.5, 5] is an error.

    User and item ids are re-indexed to contiguous ``0 .. K-1`` in increasing
    order of the original id (``user_ids[k]`` / ``item_ids[k]`` give the
    original id of index ``k``), so the sparse ids of the newer releases
    (movie ids up to ~200,000 for ~60,000 movies) cost no empty rows.

MNIST (`load_mnist`)
    * a directory with the four IDX files ``train-images-idx3-ubyte``,
      ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
      ``t10k-labels-idx1-ubyte`` (each optionally ``.gz``-compressed; the
      ``train-images.idx3-ubyte`` spelling is accepted too);
    * Keras's ``mnist.npz`` (keys ``x_train, y_train, x_test, y_test``), given
      as the file or as a directory that holds it.

    Images are returned flattened to ``[n, 784]`` and scaled to ``[0, 1]``
    (pixel / 255, as the MAMBA paper's code), labels as ``int32`` in 0-9.

The IDX format (LeCun et al.): a big-endian header ``0x00 0x00 <type> <ndim>``
(type ``0x08`` = unsigned byte), ``ndim`` big-endian ``int32`` sizes, then the
data in C order.
"""

from __future__ import annotations

import gzip
import io
import os
import warnings
import zipfile
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DataFileError",
    "RatingsData",
    "load_movielens",
    "load_mnist",
    "read_idx",
    "write_idx",
    "MNIST_IDX_FILES",
]

#: The four IDX files of MNIST: (split, part) -> base name.
MNIST_IDX_FILES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
_CSV_HEADER = ["userId", "movieId", "rating", "timestamp"]
#: Ids must stay below 2**53, the range in which float64 (the parsed table) is exact.
_MAX_ID = 2**53


class DataFileError(ValueError):
    """A data file is missing, of the wrong format, truncated or out of range."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = str(path)
        self.problem = " ".join(str(problem).split())
        super().__init__(f"{self.path}: {self.problem}")


# --------------------------------------------------------------------------- #
# MovieLens
# --------------------------------------------------------------------------- #
@dataclass
class RatingsData:
    """Ratings as three aligned arrays, with contiguous 0-based ids.

    Attributes:
      users: ``int32 [N]`` user index in ``[0, num_users)``.
      items: ``int32 [N]`` item index in ``[0, num_items)``.
      ratings: ``float32 [N]`` the stars.
      num_users, num_items: the sizes of the id ranges.
      user_ids, item_ids: original ids, ``user_ids[k]`` is the id of index ``k``.
      min_rating, max_rating: the rating scale (1-5, or 0.5-5 for half stars).
      source: the file read (or ``"synthetic"``).
    """

    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray
    num_users: int
    num_items: int
    user_ids: np.ndarray
    item_ids: np.ndarray
    min_rating: float = 1.0
    max_rating: float = 5.0
    source: str = ""

    @property
    def num_ratings(self) -> int:
        return int(self.ratings.shape[0])


def _check_exists(path: str, what: str) -> None:
    if not os.path.exists(path):
        raise DataFileError(path, f"no such file (expected {what}).")
    if os.path.isdir(path) and "directory" not in what:
        raise DataFileError(path, f"is a directory (expected {what}).")


def _parse_table(
    path: str, lines: list[str], sep: str | None, first_line: int, what: str
) -> np.ndarray:
    # Fast path: NumPy's C parser; on any failure re-parse line by line for a
    # message that names the offending line.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": handled below
            table = np.loadtxt(lines, delimiter=sep, dtype=np.float64, ndmin=2)
        if table.shape[1] == 4 and table.shape[0] > 0:
            ids = table[:, :2]
            # inf and huge values equal their rounding too; above 2**53 a float64 no
            # longer holds every integer, and the int64 cast would wrap them.
            in_range = np.isfinite(ids) & (ids >= 0) & (ids < _MAX_ID)
            if np.all(in_range) and np.all(ids == np.round(ids)):
                return table[:, :3]
    except ValueError:
        pass
    rows = []
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        fields = line.split(sep) if sep else line.split()
        if len(fields) != 4:
            raise DataFileError(
                path,
                f"line {first_line + k}: expected 4 fields ({what}), got "
                f"{len(fields)}: {line.strip()[:60]!r} (truncated or wrong format?).",
            )
        try:
            row = (int(fields[0]), int(fields[1]), float(fields[2]))
        except ValueError:
            raise DataFileError(
                path,
                f"line {first_line + k}: expected integer ids and a numeric rating "
                f"({what}), got {line.strip()[:60]!r}.",
            ) from None
        if not (0 <= row[0] < _MAX_ID and 0 <= row[1] < _MAX_ID):
            raise DataFileError(
                path,
                f"line {first_line + k}: ids must be non-negative integers below 2**53 "
                f"({what}), got {line.strip()[:60]!r}.",
            )
        rows.append(row)
    if not rows:
        raise DataFileError(path, f"contains no ratings (expected {what}).")
    return np.asarray(rows, dtype=np.float64)


def load_movielens(path: str) -> RatingsData:
    """Reads a MovieLens ``u.data`` or ``ratings.csv`` (format detected from the first line).

    Args:
      path: the file.

    Returns:
      A `RatingsData` with contiguous 0-based ids.

    Raises:
      DataFileError: missing file, unknown format, a short or non-numeric line
        (a truncated file), a rating off the scale, or an id that is negative,
        not an integer or not below ``2**53`` (the message names the line).
    """
    path = os.fspath(path)
    expected = (
        "a MovieLens u.data (tab-separated user, item, rating, timestamp) or "
        "ratings.csv (header userId,movieId,rating,timestamp)"
    )
    _check_exists(path, expected)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise DataFileError(path, f"is not a text file (expected {expected}).") from None
    lines = text.splitlines()
    if not lines:
        raise DataFileError(path, f"is empty (expected {expected}).")
    first = lines[0].strip()
    if first.replace(" ", "").split(",")[:4] == _CSV_HEADER:
        what = "ratings.csv: userId,movieId,rating,timestamp"
        table = _parse_table(path, lines[1:], ",", 2, what)
        half = True
    elif "\t" in first:
        what = "u.data: user<TAB>item<TAB>rating<TAB>timestamp"
        table = _parse_table(path, lines, "\t", 1, what)
        half = False
    else:
        raise DataFileError(path, f"unrecognised first line {first[:60]!r} (expected {expected}).")
    if not text.endswith("\n"):
        # Both formats end every line with a newline; a missing one means the
        # last line may have been cut (its fields can still parse).
        raise DataFileError(path, "does not end with a newline: the file looks truncated.")
    users, items, ratings = table[:, 0], table[:, 1], table[:, 2]
    if users.min() < 0 or items.min() < 0:
        raise DataFileError(path, "ids must be non-negative integers.")
    if half:
        lo, hi = 0.5, 5.0
        ok = (ratings >= lo) & (ratings <= hi) & (np.round(2 * ratings) == 2 * ratings)
        scale = "half stars 0.5, 1.0, ..., 5.0"
    else:
        lo, hi = 1.0, 5.0
        ok = (ratings >= lo) & (ratings <= hi) & (np.round(ratings) == ratings)
        scale = "integer stars 1-5"
    if not np.all(ok):
        k = int(np.argmin(ok))
        raise DataFileError(
            path, f"rating {ratings[k]:g} on data row {k + 1} is out of range (expected {scale})."
        )
    user_ids, u_idx = np.unique(users.astype(np.int64), return_inverse=True)
    item_ids, i_idx = np.unique(items.astype(np.int64), return_inverse=True)
    return RatingsData(
        users=u_idx.astype(np.int32),
        items=i_idx.astype(np.int32),
        ratings=ratings.astype(np.float32),
        num_users=int(user_ids.shape[0]),
        num_items=int(item_ids.shape[0]),
        user_ids=user_ids,
        item_ids=item_ids,
        min_rating=lo,
        max_rating=hi,
        source=path,
    )


# --------------------------------------------------------------------------- #
# MNIST
# --------------------------------------------------------------------------- #
def _read_bytes(path: str) -> bytes:
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        with open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as e:  # gzip: bad magic / truncated stream
        raise DataFileError(
            path,
            f"cannot be read as {'gzip' if path.endswith('.gz') else 'a'}"
            f" file ({type(e).__name__}: {e}).",
        ) from None


def read_idx(path: str, expected_ndim: int | None = None) -> np.ndarray:
    """Reads one IDX file (optionally gzip-compressed) of unsigned bytes.

    Args:
      path: the file (``.gz`` is decompressed).
      expected_ndim: the number of dimensions required (3 for images, 1 for
        labels). Default value: ``None`` (any).

    Returns:
      ``uint8`` array of the shape in the header.

    Raises:
      DataFileError: missing file, bad magic number, wrong type or rank, or a
        body shorter or longer than the header says.
    """
    path = os.fspath(path)
    _check_exists(path, "an IDX file")
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DataFileError(
            path, "bad magic number (expected an IDX file: 0x00 0x00 <type> <ndim>)."
        )
    dtype_code, ndim = raw[2], raw[3]
    if dtype_code != 0x08:
        raise DataFileError(
            path, f"IDX data type 0x{dtype_code:02x} (expected 0x08, unsigned bytes)."
        )
    if expected_ndim is not None and ndim != expected_ndim:
        raise DataFileError(path, f"IDX file with {ndim} dimensions (expected {expected_ndim}).")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataFileError(path, "truncated IDX header.")
    shape = tuple(int(x) for x in np.frombuffer(raw[4:header], dtype=">i4"))
    size = int(np.prod(shape, dtype=np.int64))
    body = len(raw) - header
    if body != size:
        raise DataFileError(
            path,
            f"IDX body has {body} bytes but the header {shape} needs "
            f"{size} ({'truncated' if body < size else 'trailing data'}).",
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _find_idx(directory: str, base: str) -> str | None:
    alt = base.replace("-idx", ".idx")  # train-images.idx3-ubyte
    for name in (base, base + ".gz", alt, alt + ".gz"):
        p = os.path.join(directory, name)
        if os.path.isfile(p):
            return p
    return None


def _check_split(path: str, x: np.ndarray, y: np.ndarray, split: str) -> None:
    if x.ndim != 3 or x.shape[1:] != (28, 28):
        raise DataFileError(path, f"{split} images have shape {x.shape} (expected [n, 28, 28]).")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise DataFileError(
            path,
            f"{split} labels have shape {y.shape} for {x.shape[0]} images "
            "(expected one label per image).",
        )
    if y.size and (y.min() < 0 or y.max() > 9):
        raise DataFileError(
            path, f"{split} labels range {int(y.min())}..{int(y.max())} (expected 0-9)."
        )


def _load_npz(path: str) -> dict[str, np.ndarray]:
    keys = ("x_train", "y_train", "x_test", "y_test")
    try:
        with np.load(path, allow_pickle=False) as f:
            missing = [k for k in keys if k not in f.files]
            if missing:
                raise DataFileError(
                    path,
                    f"missing arrays {missing} (expected Keras's mnist.npz "
                    f"with {', '.join(keys)}).",
                )
            out = {k: np.asarray(f[k]) for k in keys}
    except DataFileError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DataFileError(
            path, f"cannot be read as a .npz archive ({type(e).__name__}: {e})."
        ) from None
    for k in ("x_train", "x_test"):
        if out[k].dtype != np.uint8:
            raise DataFileError(path, f"{k} has dtype {out[k].dtype} (expected uint8 pixels).")
    for k in ("y_train", "y_test"):
        if not np.issubdtype(out[k].dtype, np.integer):
            raise DataFileError(path, f"{k} has dtype {out[k].dtype} (expected integer labels).")
    return out


def load_mnist(path: str) -> dict[str, np.ndarray]:
    """Reads MNIST from the four IDX files in a directory or from Keras's ``mnist.npz``.

    Args:
      path: a directory holding the IDX files (plain or ``.gz``) or
        ``mnist.npz``, or the ``.npz`` file itself.

    Returns:
      dict with ``x_train`` ``float32 [n, 784]`` in ``[0, 1]``, ``y_train``
      ``int32 [n]``, ``x_test``, ``y_test``, and ``source``.

    Raises:
      DataFileError: as `read_idx`, plus a directory with neither the
        IDX files nor ``mnist.npz``, images that are not 28×28, label counts
        that differ from image counts, labels outside 0-9.
    """
    path = os.fspath(path)
    expected = (
        "a directory with train-images-idx3-ubyte, train-labels-idx1-ubyte, "
        "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (optionally .gz) or mnist.npz"
    )
    if not os.path.exists(path):
        raise DataFileError(path, f"no such file or directory (expected {expected}).")
    if os.path.isdir(path):
        found = {k: _find_idx(path, v) for k, v in MNIST_IDX_FILES.items()}
        if all(found.values()):
            arrays = {}
            for (split, part), p in found.items():
                arrays[(split, part)] = read_idx(p, 3 if part == "images" else 1)
            raw = {
                "x_train": arrays[("train", "images")],
                "y_train": arrays[("train", "labels")],
                "x_test": arrays[("test", "images")],
                "y_test": arrays[("test", "labels")],
            }
            where = {"train": found[("train", "images")], "test": found[("test", "images")]}
        elif os.path.isfile(os.path.join(path, "mnist.npz")):
            npz = os.path.join(path, "mnist.npz")
            raw, where = _load_npz(npz), {"train": npz, "test": npz}
        else:
            missing = [MNIST_IDX_FILES[k] for k, v in found.items() if v is None]
            raise DataFileError(
                path, f"no MNIST files found: missing {', '.join(missing)} (expected {expected})."
            )
    else:
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic[:2] != b"PK":
            raise DataFileError(path, f"is not a .npz archive (expected {expected}).")
        raw, where = _load_npz(path), {"train": path, "test": path}
    for split in ("train", "test"):
        _check_split(where[split], raw[f"x_{split}"], raw[f"y_{split}"], split)
    out: dict[str, np.ndarray] = {}
    for split in ("train", "test"):
        x = raw[f"x_{split}"]
        out[f"x_{split}"] = x.reshape(x.shape[0], 784).astype(np.float32) / 255.0
        out[f"y_{split}"] = raw[f"y_{split}"].astype(np.int32)
    out["source"] = np.asarray(path)
    return out


def write_idx(path: str, array: np.ndarray) -> None:
    """Writes a ``uint8`` array as an IDX file (``.gz`` compresses); for tests and stand-ins."""
    a = np.ascontiguousarray(array, dtype=np.uint8)
    buf = io.BytesIO()
    buf.write(bytes([0, 0, 0x08, a.ndim]))
    buf.write(np.asarray(a.shape, dtype=">i4").tobytes())
    buf.write(a.tobytes())
    data = buf.getvalue()
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(data)
