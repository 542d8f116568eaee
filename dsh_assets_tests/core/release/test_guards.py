import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.release.guards import find_identifiers, min_cell_size
from dsh_assets.core.release.schema import load_schema

SCHEMA = load_schema()


def write(tmp_path, **columns):
    pq.write_table(pa.table(columns), tmp_path / "r.parquet")
    return tmp_path / "r.parquet"


@pytest.mark.parametrize("value", ["358401234567", "+358 40 123 4567", "244051234567890", "35-209900-176148-1"])
def test_identifier_shaped_values_are_found(tmp_path, value):
    finding = find_identifiers(write(tmp_path, province=["Uusimaa", value, "Lappi"]), SCHEMA)
    assert not finding.clean and finding.shaped_values == {"province": 1}


def test_identifier_shaped_values_count_their_rows_in_each_column(tmp_path):
    path = write(tmp_path, province=["358401234567", "358401234567", None, "Lappi"],
                 application_category=["IM", "+358 40 123 4567", "IM", None])
    assert find_identifiers(path, SCHEMA).shaped_values == {"province": 2, "application_category": 1}


def test_clean_release_with_aliases_passes(tmp_path):
    path = write(tmp_path, subscriber_alias=["s_0123456789abcdef0123", "s_9999999999999999999999"],
                 province=["Uusimaa", "Lappi"], radio_access_type=["5G", "4G"], cqi=[123456789012.0, 1.0])
    assert find_identifiers(path, SCHEMA).clean


def test_identifier_columns_are_found_by_name(tmp_path):
    finding = find_identifiers(write(tmp_path, imei=["x"], row_id=[1]), SCHEMA)
    assert finding.identifier_columns == ("imei", "row_id") and not finding.clean


def test_min_cell_size(tmp_path):
    path = write(tmp_path, a=["x", "x", "x", "y", "y"], b=[1, 1, 1, 1, 2])
    assert min_cell_size(path, ["a"]) == (2, 2)
    assert min_cell_size(path, ["a", "b"]) == (1, 3)
