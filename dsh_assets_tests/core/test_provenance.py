import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.files import DigestBook
from dsh_assets.core.provenance import checksum_problems
from dsh_assets.core.release.digest import content_sha256
from dsh_assets_tests.tables import sha256_file

TABLE = pa.table({"app": ["Gaming", "IM", "VPN"], "latency": [1.0, None, 2.5]})


def _recorded(path) -> list[dict]:
    return [{"sha256": sha256_file(path), "content_sha256": content_sha256(path, book=DigestBook())}]


def test_content_digest_is_checked_beside_the_file_checksum(tmp_path):
    path = tmp_path / "released.parquet"
    pq.write_table(TABLE, path)
    history, book = _recorded(path), DigestBook()
    assert checksum_problems([(path, "sha256")], history, (), book)[1] == []

    pq.write_table(TABLE, path, row_group_size=1, compression="zstd")  # another layout, the same rows
    compared, problems = checksum_problems([(path, "sha256")], history, (), book)
    assert problems == [f"{path} on disk differs from the recorded SHA-256"]
    assert compared["on_disk_content_sha256"] == compared["recorded_content_sha256"]

    pq.write_table(TABLE.set_column(1, "latency", pa.array([1.0, None, 2.6])), path)
    problems = checksum_problems([(path, "sha256")], history, (), book)[1]
    assert f"{path}: its rows differ from the recorded content digest" in problems


def test_an_unreadable_release_is_a_problem_not_a_crash(tmp_path):
    path = tmp_path / "released.parquet"
    pq.write_table(TABLE, path)
    history = _recorded(path)
    path.write_bytes(b"not parquet")
    problems = checksum_problems([(path, "sha256")], history, (), DigestBook())[1]
    assert any("not a readable Parquet file" in problem for problem in problems)
