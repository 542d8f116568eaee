import pytest

from dsh_assets.core.engines import EMBEDDED, ENGINES, SPARK, engine_for
from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy.singling_out import BUCKETS, bucketed


@pytest.mark.parametrize("name", ENGINES)
def test_each_engine_is_found_by_its_name_and_starts_no_session_until_a_pass_runs(name):
    started = []
    engine = engine_for(name, DigestBook(), lambda: started.append(name))
    assert engine.name == name
    engine.counting()
    assert started == []


def test_an_unknown_engine_or_spark_without_a_session_is_refused():
    with pytest.raises(ValueError, match="'polars' is not one of duckdb, spark"):
        engine_for("polars", DigestBook())
    with pytest.raises(ValueError, match="needs a Spark session"):
        engine_for(SPARK, DigestBook())
    assert engine_for(EMBEDDED, DigestBook()).name == EMBEDDED


def test_cells_are_bucketed_by_their_size_with_their_rows():
    # 3 cells of 1 row, 1 of 2, 2 of 3 and 1 of 4 (3-4), 2 of 7 (5+).
    cells, rows = bucketed([(1, 3), (2, 1), (3, 2), (4, 1), (7, 2)])
    assert BUCKETS == ("1", "2", "3-4", "5+")
    assert cells == (3, 1, 3, 2) and rows == (3, 2, 10, 14)
    assert bucketed([]) == ((0, 0, 0, 0), (0, 0, 0, 0))
