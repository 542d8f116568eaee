import pyarrow as pa
import pytest

from dsh_assets.core import tables


def _in_order(pieces, rows, beside, batch_rows=2):
    with tables.in_position_order(pieces, rows, beside, batch_rows) as batches:
        return list(batches)


@pytest.mark.parametrize("bucket_rows", [1, 2, 1 << 20])
def test_rows_come_out_in_position_order_whatever_the_buckets(tmp_path, monkeypatch, bucket_rows):
    monkeypatch.setattr(tables, "SCRATCH_BUCKET_ROWS", bucket_rows)
    pieces = [(pa.record_batch({"a": ["x", "y", "w"]}), pa.array([2, 0, 3]).to_numpy()),
              (pa.record_batch({"a": pa.array([], pa.string())}), pa.array([], pa.int64()).to_numpy()),
              (pa.record_batch({"a": ["z"]}), pa.array([1]).to_numpy())]
    batches = _in_order(pieces, 4, tmp_path / "out.parquet")
    assert pa.Table.from_batches(batches).column("a").to_pylist() == ["y", "z", "x", "w"]
    assert all(batch.num_rows <= 2 for batch in batches) and batches[0].schema.names == ["a"]
    assert list(tmp_path.iterdir()) == []  # every bucket removed once read


def test_no_piece_gives_no_row_and_no_bucket(tmp_path):
    assert _in_order([], 0, tmp_path / "out.parquet") == []
    assert list(tmp_path.iterdir()) == []
