"""The roles file: the columns and kinds the packaged roles give, the source's time zone, and a one-line refusal of
roles that cannot describe a source."""

import collections
from importlib import resources

import pyarrow as pa
import pytest

from dsh_assets.core.release.schema import load_schema

PACKAGED_ROLES = resources.files("dsh_assets").joinpath("columns.toml").read_text()


def test_the_packaged_roles_give_22_columns_each_of_its_kind():
    schema = load_schema()
    assert schema.categorical_qis == ("time_start", "province", "application_category", "radio_access_type")
    assert schema.string_columns == ("msisdn", "imsi", "imei", "province", "application_category",
                                     "radio_access_type")
    # 3 identifiers, the station, the 4 cell columns, then the 14 measurements
    assert schema.columns[:8] == ("msisdn", "imsi", "imei", "enb_id", *schema.categorical_qis)
    assert schema.columns[8:] == schema.measurements and len(schema.measurements) == 14
    assert collections.Counter(schema.expected_types().values()) == {"string": 6, "integer": 1, "timestamp": 1,
                                                                     "float": 14}
    arrow = schema.arrow_schema()
    assert arrow.names == list(schema.columns)
    assert (arrow.field("msisdn").type, arrow.field("enb_id").type, arrow.field("time_start").type,
            arrow.field("cqi").type) == (pa.string(), pa.int64(), pa.timestamp("us", tz="UTC"), pa.float64())


def test_the_roles_file_declares_the_time_zone(tmp_path):
    (tmp_path / "helsinki.toml").write_text(PACKAGED_ROLES + '\n[source]\ntime_zone = "Europe/Helsinki"\n')
    assert load_schema(tmp_path / "helsinki.toml").time_zone == "Europe/Helsinki"
    assert load_schema().time_zone is None
    (tmp_path / "nowhere.toml").write_text(PACKAGED_ROLES + '\n[source]\ntime_zone = "Mars/Olympus_Mons"\n')
    with pytest.raises(ValueError, match="not a known IANA time zone"):
        load_schema(tmp_path / "nowhere.toml")


@pytest.mark.parametrize("packaged, changed, named", [
    ('subscriber = "msisdn"', 'subscriber = "customer"', "subscriber column 'customer' must be one of the identifiers"),
    ('download = "dl_throughput_kbps"', 'download = "dl_speed"', "download column 'dl_speed' is not a measurement"),
    ('latency = "radio_latency_ms"', 'latency = "rtt_ms"', "latency column 'rtt_ms' is not a measurement"),
    ('province = "province"', 'province = "application_category"',
     "columns with two roles: ['application_category']"),
    ('province = "province"', 'province = \'region "fi"\'', """a column name holds a double quote: ['region "fi"']"""),
], ids=["subscriber_not_an_identifier", "download_not_a_measurement", "latency_not_a_measurement", "two_roles",
        "a_quote_in_a_name"])
def test_roles_that_cannot_describe_a_source_are_refused_in_one_line(tmp_path, packaged, changed, named):
    assert PACKAGED_ROLES.count(packaged) == 1
    (tmp_path / "columns.toml").write_text(PACKAGED_ROLES.replace(packaged, changed))
    with pytest.raises(ValueError) as refused:
        load_schema(tmp_path / "columns.toml")
    assert str(refused.value) == f"roles file: {named}"
