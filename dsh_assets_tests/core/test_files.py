"""A DigestBook keeps a settled (or just written) file's digest, and reads again whatever changed since."""

import hashlib
import os

from dsh_assets.core import files
from dsh_assets.core.files import DigestBook

RELEASED_SHA256 = hashlib.sha256(b"released rows").hexdigest()


def _settle(path) -> None:
    """Make the file look written long ago: its change time then moves only with the next write."""
    os.utime(path, ns=(1, 1))


def _reads(monkeypatch) -> list:
    opened = []
    real_open = open

    def counting_open(path, *args, **kwargs):
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(files, "open", counting_open, raising=False)
    return opened


def test_a_full_book_forgets_the_least_recently_used_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "SETTLED_NS", 0)
    paths = []
    for name in ("a", "b", "c"):
        paths.append(tmp_path / name)
        paths[-1].write_bytes(name.encode())
    a, b, c = paths
    book = DigestBook(capacity=2)
    book.sha256(a), book.sha256(b)
    book.sha256(a)  # a is now the most recently used: b goes when c comes
    book.sha256(c)
    reads = _reads(monkeypatch)
    book.sha256(a), book.sha256(c)
    assert reads == []
    assert book.sha256(b) == hashlib.sha256(b"b").hexdigest() and reads == [b]


def test_a_settled_file_is_read_once(tmp_path, monkeypatch):
    path = tmp_path / "table.parquet"
    path.write_bytes(b"released rows")
    monkeypatch.setattr(files, "SETTLED_NS", 0)
    reads, book = _reads(monkeypatch), DigestBook()
    assert book.sha256(path) == book.sha256(path) == RELEASED_SHA256
    assert len(reads) == 1


def test_a_rewrite_of_the_same_size_is_read_again(tmp_path, monkeypatch):
    path = tmp_path / "table.parquet"
    path.write_bytes(b"released rows")
    monkeypatch.setattr(files, "SETTLED_NS", 0)
    book = DigestBook()
    first = book.sha256(path)
    path.write_bytes(b"tampered rows")
    _settle(path)  # even with the modification time put back, the change time moved
    assert book.sha256(path) == hashlib.sha256(b"tampered rows").hexdigest() != first


def test_a_freshly_written_file_is_not_kept(tmp_path, monkeypatch):
    path = tmp_path / "table.parquet"
    path.write_bytes(b"released rows")
    reads, book = _reads(monkeypatch), DigestBook()
    book.sha256(path)
    book.sha256(path)
    assert len(reads) == 2, "written within SETTLED_NS of the hash: a same-tick rewrite could hide"


def test_a_file_the_caller_just_wrote_is_kept_until_it_changes(tmp_path, monkeypatch):
    path = tmp_path / "table.parquet"
    path.write_bytes(b"released rows")
    reads, book = _reads(monkeypatch), DigestBook()
    assert book.sha256(path, own_write=True) == book.sha256(path) == RELEASED_SHA256
    assert len(reads) == 1
    path.write_bytes(b"tampered rows")
    _settle(path)  # a rewrite in the very tick of the write is the one window left (see DigestBook)
    assert book.sha256(path) == hashlib.sha256(b"tampered rows").hexdigest()
    assert len(reads) == 2


def test_two_books_know_nothing_of_each_other(tmp_path, monkeypatch):
    path = tmp_path / "table.parquet"
    path.write_bytes(b"released rows")
    DigestBook().sha256(path, own_write=True)
    reads = _reads(monkeypatch)
    assert DigestBook().sha256(path) == RELEASED_SHA256
    assert len(reads) == 1


def test_figures_of_different_kinds_are_kept_apart(tmp_path):
    path = tmp_path / "table.parquet"
    path.write_bytes(b"released rows")
    book = DigestBook()
    assert book.figure(path, "length", lambda p: str(os.path.getsize(p)), own_write=True) == "13"
    assert book.sha256(path, own_write=True) == RELEASED_SHA256
    assert book.figure(path, "length", lambda p: "not called") == "13"


def test_figures_carry_over_to_a_hard_link_of_the_same_bytes(tmp_path, monkeypatch):
    path, link = tmp_path / "table.parquet", tmp_path / "published.parquet"
    path.write_bytes(b"released rows")
    before, book = os.stat(path), DigestBook()
    book.sha256(path, own_write=True)
    os.link(path, link)  # moves the inode's change time: without the carry both names would be read again
    book.carry(before, link)
    reads = _reads(monkeypatch)
    assert book.sha256(link) == book.sha256(path) == RELEASED_SHA256
    assert reads == []


def test_a_book_keeps_at_most_its_capacity(tmp_path):
    book = DigestBook(capacity=2)
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(name.encode())
        book.sha256(tmp_path / name, own_write=True)
    assert book.figure(tmp_path / "c", files.SHA256, lambda p: "not called") == hashlib.sha256(b"c").hexdigest()
    assert book.figure(tmp_path / "a", files.SHA256, lambda p: "read again") == "read again"


def test_a_parquet_file_is_hashed_as_it_is_written_and_not_read_to_record_it(tmp_path, monkeypatch):
    import pyarrow as pa

    schema = pa.schema([("a", pa.int64()), ("s", pa.string())])
    out = tmp_path / "out.parquet"
    book = DigestBook()
    with files.parquet_file(out, schema, ["s"], book=book) as writer:
        for start in range(0, 600_000, 100_000):  # three row groups and a short one
            writer.write(pa.RecordBatch.from_pydict({"a": list(range(start, start + 100_000)),
                                                     "s": [str(i % 7) for i in range(100_000)]}, schema=schema))
    reads = _reads(monkeypatch)
    assert book.sha256(out) == hashlib.sha256(out.read_bytes()).hexdigest()
    assert reads == []  # kept from the write
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]
