"""A release under attack and its truth: the source row of each released row, the release position of each source
row, and the source columns an attacker's knowledge is drawn from."""

import dataclasses

import numpy as np
import pyarrow.parquet as pq

from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import ROW_ID, load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets_tests.tables import RELEASE_PERIOD, row, s, under_test

SCHEMA = load_schema()
PLAIN = dataclasses.replace(load_configs(schema=SCHEMA)["c15_window_k5_noise5"], id="plain", noise_scale=0.0)
SECRETS = Secrets(b"inputs-seed", b"inputs-key", "test")


def gaming_and_im(tmp_path) -> ReleaseUnderTest:
    """s1..s5 in one Gaming cell (k = 5: released), s6 and s7 in an IM cell (withheld); subscriber n downloads
    10 + n, so a released value names its source row (no noise)."""
    rows = [row(s(n), app="Gaming" if n <= 5 else "IM", dl_throughput_kbps=10.0 + n) for n in range(1, 8)]
    return under_test(tmp_path, rows, PLAIN, secrets=SECRETS)


def test_the_truth_maps_released_rows_to_source_rows_and_back(tmp_path):
    attacked = gaming_and_im(tmp_path)
    source = attacked.source_table([SCHEMA.subscriber, SCHEMA.download]).to_pydict()
    withheld = sorted(i for i, who in zip(source[ROW_ID], source[SCHEMA.subscriber]) if who in (s(6), s(7)))
    assert attacked.keep.tolist() == [i not in withheld for i in range(7)]
    released = attacked.released_row_ids()
    download = dict(zip(source[ROW_ID], source[SCHEMA.download]))
    assert pq.read_table(attacked.released_path).column(SCHEMA.download).to_pylist() == [download[i] for i in released]
    assert attacked.positions_of(released).tolist() == [0, 1, 2, 3, 4]
    assert attacked.positions_of(withheld).tolist() == [-1, -1]
    # no operation moves values between rows: a position holds its own row's values
    assert attacked.value_origins(np.array([4, 0]), SCHEMA.download).tolist() == [released[4], released[0]]


def test_the_source_table_holds_the_asked_columns_then_the_row_id_once(tmp_path):
    attacked = gaming_and_im(tmp_path)
    assert attacked.source_table([SCHEMA.app, SCHEMA.subscriber]).column_names == [SCHEMA.app, SCHEMA.subscriber,
                                                                                    ROW_ID]
    asked_with_row_id = attacked.source_table([ROW_ID, SCHEMA.app])
    assert asked_with_row_id.column_names == [ROW_ID, SCHEMA.app] and asked_with_row_id.num_rows == 7


def test_a_stored_source_is_planned_as_its_release_was(tmp_path):
    attacked = gaming_and_im(tmp_path)
    book = DigestBook()
    stored = ReleaseUnderTest.of_stored(attacked.source_path, attacked.released_path, PLAIN, SCHEMA, SECRETS,
                                        RELEASE_PERIOD, book)
    assert stored.book is book  # where the attacks keep what they count of it
    assert (stored.source_path, stored.released_path, stored.config) == (attacked.source_path,
                                                                         attacked.released_path, PLAIN)
    assert np.array_equal(stored.keep, attacked.keep)
    assert np.array_equal(stored.released_row_ids(), attacked.released_row_ids())
