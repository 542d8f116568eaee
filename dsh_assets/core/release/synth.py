"""Deterministic synthetic source table, one per release period.

The platform must run and be tested without real subscriber rows, so it ships a generator with
the shape of the original sample (rows and subscribers, six ten-minute windows, 19 provinces,
25 apps, a skewed radio mix, a few thousand stations) that plants the effects Elina's questions
look for, so tests can check the pipeline finds them in the base data:
- on 5G, Gaming's median radio latency worse than Streaming's (about 114 vs 72 ms);
- VPN and IM with the largest shares of slow 5G downloads, four more apps clearly behind them;
- five overloaded stations (``overloaded_stations``): about 9x the median load, slower radio;
- SPARSE_5G_APPS so rare on 5G that every (window, province, app, 5G) cell is under k=5;
- a station layout under which about a third of subscribers have a row alone in its
  (window, province, app, radio, station) cell once identifiers are removed.

Randomness is keyed, never drawn in one sequence over the table. A subscriber's stable traits
(identifiers, home province and station, device radio, favourite app, activity) come from
(seed, block of subscribers); a period's activity from (seed, period, block). Blocks hold a fixed
number of subscribers, so the content does not depend on how many subscribers are written per
chunk, and every period shares one population: linkage across periods means something.
"""

from __future__ import annotations

import datetime as dt
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.files import atomic_path
from dsh_assets.core.release.schema import Schema, load_schema

DEFAULT_ROWS = 1_099_340
DEFAULT_SUBSCRIBERS = 199_195
DEFAULT_SEED = 20261101
"""Not a secret: it seeds fabricated data, not noise."""

# name, popularity, download factor, radio latency factor, session median (s), share of the
# session spent downloading, video stalls per row, share of throttled ("slow") 5G downloads
# (none for SPARSE_5G_APPS, so that their few 5G rows cannot leap into the top six by chance).
_APP_TABLE = (
    ("Streaming",          14.0, 1.3, 1.00, 420, 0.25,  0.35, 0.015),
    ("Gaming",              5.0, 0.8, 1.58, 480, 0.02,  0.03, 0.015),
    ("Live streaming",      3.0, 1.2, 1.05, 400, 0.30,  0.50, 0.015),
    ("Short video",         8.0, 1.2, 1.00, 240, 0.30,  0.25, 0.015),
    ("Music",               5.0, 0.9, 0.95, 450, 0.03,  0.01, 0.015),
    ("IM",                  7.0, 0.7, 1.00,  60, 0.005, 0.01, 0.33),
    ("Chat",                2.5, 0.7, 1.00,  90, 0.005, 0.01, 0.000),
    ("Email",               3.0, 0.8, 0.95,  30, 0.01,  0.01, 0.015),
    ("Social media",       12.0, 1.0, 1.00, 200, 0.08,  0.08, 0.015),
    ("VoIP",                2.5, 0.6, 1.10, 180, 0.01,  0.01, 0.000),
    ("Video conferencing",  3.0, 1.0, 1.10, 500, 0.05,  0.20, 0.11),
    ("Web browsing",       11.0, 1.0, 1.00,  90, 0.05,  0.01, 0.015),
    ("News",                3.0, 0.9, 0.95, 120, 0.05,  0.02, 0.015),
    ("E-commerce",          3.0, 0.9, 1.00, 150, 0.04,  0.01, 0.015),
    ("Banking",             2.0, 0.8, 1.00,  90, 0.01,  0.01, 0.015),
    ("Maps",                3.0, 0.8, 1.00, 200, 0.02,  0.01, 0.015),
    ("Online education",    1.5, 1.0, 1.05, 500, 0.10,  0.15, 0.07),
    ("File transfer",       1.5, 1.4, 0.95, 120, 0.50,  0.01, 0.000),
    ("Cloud storage",       2.0, 1.3, 0.95, 150, 0.40,  0.01, 0.22),
    ("Software update",     2.0, 1.4, 0.95, 180, 0.60,  0.01, 0.015),
    ("P2P",                 1.0, 1.2, 1.05, 540, 0.50,  0.01, 0.16),
    ("VPN",                 1.5, 0.9, 1.20, 500, 0.20,  0.02, 0.40),
    ("IoT",                 1.2, 0.4, 1.60,  20, 0.001, 0.01, 0.015),
    ("Smart home",          0.8, 0.5, 1.30,  15, 0.002, 0.01, 0.015),
    ("Other",               1.5, 0.9, 1.05,  60, 0.05,  0.01, 0.015),
)
APPS: tuple[str, ...] = tuple(row[0] for row in _APP_TABLE)
_APP_FIELDS = ("popularity", "download", "latency", "session", "duty", "stalls", "slow_5g")
_APP = {field: np.array([row[i + 1] for row in _APP_TABLE], float) for i, field in enumerate(_APP_FIELDS)}

SPARSE_5G_APPS = ("Chat", "VoIP", "File transfer")
"""App x 5G combinations planted too sparse to survive k=5 suppression."""
_SPARSE_5G_KEEP = 0.004
"""Share of these apps' 5G rows kept on 5G (the rest fall back to 4G) at the default size or
below; above it the share shrinks so the absolute count, one or two dozen rows per app, stays
spread over cells under k."""

# Finnish regions (maakunnat) with their population in thousands: rows follow population.
_PROVINCE_TABLE = (
    ("Uusimaa", 1720), ("Varsinais-Suomi", 485), ("Satakunta", 214), ("Kanta-Häme", 170),
    ("Pirkanmaa", 530), ("Päijät-Häme", 205), ("Kymenlaakso", 161), ("Etelä-Karjala", 126),
    ("Etelä-Savo", 131), ("Pohjois-Savo", 248), ("Pohjois-Karjala", 163), ("Keski-Suomi", 276),
    ("Etelä-Pohjanmaa", 191), ("Pohjanmaa", 177), ("Keski-Pohjanmaa", 68),
    ("Pohjois-Pohjanmaa", 416), ("Kainuu", 71), ("Lappi", 177), ("Ahvenanmaa", 30),
)
PROVINCES: tuple[str, ...] = tuple(name for name, _ in _PROVINCE_TABLE)
_PROVINCE_SHARE = np.array([pop for _, pop in _PROVINCE_TABLE], float)
_PROVINCE_SHARE /= _PROVINCE_SHARE.sum()

RADIOS = ("2G", "3G", "4G", "5G")
_5G = 3
# A subscriber's device supports up to one generation; rows use it or fall back to older ones.
_CAPABILITY_SHARE = np.array([0.03, 0.08, 0.51, 0.38])
_RADIO_GIVEN_CAPABILITY = np.array([
    [1.00, 0.00, 0.00, 0.00],
    [0.15, 0.85, 0.00, 0.00],
    [0.02, 0.05, 0.93, 0.00],
    [0.00, 0.03, 0.35, 0.62],
])
_RADIO_SHARE = _CAPABILITY_SHARE @ _RADIO_GIVEN_CAPABILITY
_RADIO = {  # per radio: download median (kbps), radio latency median (ms), loss and stall factors, CQI mean
    "download": np.array([90.0, 1_800.0, 22_000.0, 160_000.0]),
    "latency": np.array([380.0, 150.0, 88.0, 72.0]),
    "loss": np.array([3.0, 1.8, 1.0, 0.8]),
    "stalls": np.array([4.0, 2.0, 1.0, 0.7]),
    "cqi": np.array([5.0, 7.5, 9.5, 11.0]),
}

_WINDOW_SHARE = np.array([0.15, 0.16, 0.17, 0.17, 0.17, 0.18])  # the morning commute builds up
WINDOWS = len(_WINDOW_SHARE)
_WINDOW = dt.timedelta(minutes=10)
_FIRST_WINDOW = dt.time(8, 0)

_STATIONS = 2_000
_COVERAGE = np.array([0.08, 0.15, 1.0, 0.30])  # share of stations serving each radio
_STATION_SPREAD = 0.55      # lognormal sigma of station popularity, clipped so no station is a giant
_OVERLOADED = 5
_OVERLOAD_RATIO = 9.0       # expected load of an overloaded station over the median station's
_P_HOME_PROVINCE = 0.75     # the rest of a subscriber's rows fall anywhere (randomised locations)
_P_HOME_STATION = 0.40      # of the rows at home, the share on the subscriber's own station
_P_FAVOURITE_APP = 0.40
_ACTIVITY_SPREAD = 1.1      # lognormal sigma of a subscriber's stable activity
_PERIOD_SPREAD = 0.4        # and of its change from one period to the next

_BLOCK = 2_048
"""Subscribers per random stream; fixed, so chunking never changes the content."""
_ROW_GROUP = 256 * 1024
"""Rows per Parquet row group: several per default file, so readers can scan in parallel."""
_CHUNK_SUBSCRIBERS = 200_000
"""Subscribers generated and held in memory at a time (about 1.1M rows, under 0.5 GB)."""

# Identifier spaces, each split in two groups of digits for the permutation below.
_MSISDN_BASE, _MSISDN_RADIX = 358_400_000_000, (20_000, 10_000)        # 3584xxxxxxxx, 3585xxxxxxxx
_IMSI_BASE, _IMSI_RADIX = 244_050_000_000_000, (100_000, 100_000)     # MCC 244 (Finland), MNC 05
_TACS = np.array([35332011, 35445610, 35917509, 86012304, 86745203, 35290611, 35686800,
                  35102507, 35847211, 86498105, 35209915, 35375012, 86153406, 35670824,
                  35988713, 86290017, 35411309, 35734022, 86871101, 35156628], dtype=np.int64)
_IMEI_SERIALS = 1_000_000
_IMEI_RADIX = (5_000, 4_000)  # len(_TACS) * _IMEI_SERIALS devices
_MAX_SUBSCRIBERS = len(_TACS) * _IMEI_SERIALS

# Measurements in the order of the default roles file; the download and latency roles are
# matched by role, the others by position among the remaining measurement columns.
_MEASUREMENTS = ("download", "upload", "latency", "core_latency", "jitter", "packet_loss",
                 "retransmission", "dl_volume", "ul_volume", "session", "tcp_handshake",
                 "dns_latency", "video_stalls", "cqi")
_NULL_SHARE = np.array([0.012, 0.012, 0.008, 0.010, 0.015, 0.018, 0.018, 0.006, 0.006, 0.005,
                        0.010, 0.020, 0.015, 0.008])
_SLOW_FACTOR = 0.002        # a throttled download runs at this fraction of its normal rate

_WINDOW_CDF = np.cumsum(_WINDOW_SHARE)
_PROVINCE_CDF = np.cumsum(_PROVINCE_SHARE)
_APP_CDF = np.cumsum(_APP["popularity"]) / _APP["popularity"].sum()
_CAPABILITY_CDF = np.cumsum(_CAPABILITY_SHARE)
_RADIO_CDF = np.cumsum(_RADIO_GIVEN_CAPABILITY, axis=1)
_SPARSE_5G = np.array([APPS.index(app) for app in SPARSE_5G_APPS])
_VPN = APPS.index("VPN")


def _rng(seed: int, purpose: str, *keys: int) -> np.random.Generator:
    """An independent stream per (seed, purpose, keys); crc32 is stable where hash() is not."""
    return np.random.Generator(np.random.PCG64(
        np.random.SeedSequence([seed, zlib.crc32(purpose.encode()), *keys])))


def _pick(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-cdf draw of a category index from uniforms."""
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)


@dataclass(frozen=True)
class _Stations:
    """Stations grouped by province, with cumulative popularity per radio layer for drawing."""
    ids: np.ndarray
    supports: np.ndarray    # (radio, station): the station serves that radio
    cum: np.ndarray         # (radio, station): cumulative popularity of the stations serving it
    start: np.ndarray       # (radio, province): cumulative popularity before the province
    total: np.ndarray       # (radio, province): popularity of the province's stations on that radio
    first: np.ndarray       # (province,): its first station
    last: np.ndarray        # (radio, province): its last station serving that radio
    overloaded: np.ndarray  # bool per station

    def draw(self, province: np.ndarray, radio: np.ndarray, u: np.ndarray) -> np.ndarray:
        """A station serving each row's radio in its province, by popularity."""
        idx = np.empty_like(province)
        for r in range(len(RADIOS)):
            rows = radio == r
            p = province[rows]
            found = np.searchsorted(self.cum[r], self.start[r, p] + u[rows] * self.total[r, p], side="right")
            idx[rows] = np.clip(found, self.first[p], self.last[r, p])  # clip: float rounding at the edge
        return idx


def _expected_load(weight: np.ndarray, supports: np.ndarray, province: np.ndarray) -> np.ndarray:
    """Expected share of all rows per station: rows follow population, radio mix and popularity."""
    served = weight * supports
    total = np.stack([np.bincount(province, row) for row in served])
    return _PROVINCE_SHARE[province] * (_RADIO_SHARE @ (served / total[:, province]))


@lru_cache(maxsize=4)
def _stations(seed: int) -> _Stations:
    """The station layout: infrastructure, so it depends on the seed only, never on the period.

    4G is everywhere, 5G mostly on busy sites, the legacy 2G and 3G layers mostly on quiet
    ones. Serving each radio from its own layer concentrates the rare radios in fewer cells,
    which keeps singling out near the original's third.
    """
    rng = _rng(seed, "stations")
    counts = np.maximum(8, np.round(_STATIONS * _PROVINCE_SHARE)).astype(np.int64)
    province = np.repeat(np.arange(len(PROVINCES)), counts)
    first = np.cumsum(counts) - counts
    ids = rng.choice(900_000, size=province.size, replace=False).astype(np.int64) + 100_000
    weight = np.exp(np.clip(rng.normal(0.0, _STATION_SPREAD, province.size), -2.0, 1.0))
    busy_site_preference = np.array([[-1.0], [-1.0], [0.0], [1.0]])
    score = busy_site_preference * np.log(weight) + rng.normal(0.0, 1.0, (len(RADIOS), province.size))
    supports = score >= np.array([np.quantile(row, 1 - c) for row, c in zip(score, _COVERAGE)])[:, None]
    for p in range(len(PROVINCES)):  # every province is served on every radio
        span = slice(first[p], first[p] + counts[p])
        supports[np.arange(len(RADIOS)), first[p] + score[:, span].argmax(axis=1)] = True
    # Overload one middling station in each of a few populous provinces: it serves every radio
    # and its popularity rises until its expected load is _OVERLOAD_RATIO times the median's.
    target = _OVERLOAD_RATIO * np.median(_expected_load(weight, supports, province))
    overloaded = np.zeros(province.size, bool)
    for p in rng.choice(len(PROVINCES), size=_OVERLOADED, replace=False, p=_PROVINCE_SHARE):
        overloaded[first[p] + np.argsort(weight[first[p]:first[p] + counts[p]])[counts[p] // 2]] = True
    supports[:, overloaded] = True
    for _ in range(50):  # the load rises monotonically with the popularity: a fixed point
        weight[overloaded] *= target / _expected_load(weight, supports, province)[overloaded]
    served = weight * supports
    total = np.stack([np.bincount(province, row) for row in served])
    last = np.stack([np.maximum.reduceat(np.where(row, np.arange(province.size), -1), first)
                     for row in supports])
    return _Stations(ids=ids, supports=supports, cum=np.cumsum(served, axis=1),
                     start=np.cumsum(total, axis=1) - total, total=total,
                     first=first, last=last, overloaded=overloaded)


def overloaded_stations(seed: int = DEFAULT_SEED) -> tuple[int, ...]:
    """The planted overloaded enb_ids: high load, degraded latency and throughput."""
    stations = _stations(seed)
    return tuple(sorted(int(i) for i in stations.ids[stations.overloaded]))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a fast, well-spread 64-bit mixing function."""
    x = (x ^ (x >> 30)) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> 27)) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> 31)


def _permute(index: np.ndarray, radix: tuple[int, int], keys: np.ndarray) -> np.ndarray:
    """A keyed bijection of [0, a*b): unique identifiers that do not follow subscriber order.

    A Feistel network over the digit groups (Z_a, Z_b) with modular addition (as in
    format-preserving encryption); an even number of rounds brings the groups back in place.
    """
    a, b = radix
    left, right = index // b, index % b
    for key in keys:
        round_value = (_mix(right.astype(np.uint64) ^ key) % np.uint64(a)).astype(np.int64)
        left, right = right, (left + round_value) % a
        a, b = b, a
    return left * b + right


def _luhn(body: np.ndarray, digits: int) -> np.ndarray:
    """The check digit of each ``digits``-digit body (as IMEIs carry)."""
    total = np.zeros_like(body)
    for position in range(digits):
        digit = (body // 10**position) % 10
        if position % 2 == 0:  # from the right, every other digit is doubled
            digit = 2 * digit - 9 * (digit >= 5)
        total += digit
    return (10 - total % 10) % 10


@dataclass(frozen=True)
class _Population:
    """Stable traits of one block of subscribers, independent of the period."""
    identifiers: tuple[np.ndarray, np.ndarray, np.ndarray]  # msisdn, imsi, imei as integers
    home: np.ndarray
    home_station: np.ndarray
    capability: np.ndarray
    favourite_app: np.ndarray


def _population(seed: int, block: int, size: int) -> _Population:
    """The first ``size`` subscribers of a block. Draws cover the whole block, so a subscriber's
    traits do not depend on how many subscribers the table has."""
    index = np.arange(block * _BLOCK, block * _BLOCK + size)
    keys = _rng(seed, "identifiers").integers(0, 2**64, size=(3, 4), dtype=np.uint64)
    device = _permute(index, _IMEI_RADIX, keys[2])
    imei_body = _TACS[device // _IMEI_SERIALS] * _IMEI_SERIALS + device % _IMEI_SERIALS
    u = _rng(seed, "subscribers", block).random((4, _BLOCK))[:, :size]
    home = _pick(_PROVINCE_CDF, u[0])
    return _Population(
        identifiers=(_MSISDN_BASE + _permute(index, _MSISDN_RADIX, keys[0]),
                     _IMSI_BASE + _permute(index, _IMSI_RADIX, keys[1]),
                     imei_body * 10 + _luhn(imei_body, 14)),
        home=home,
        home_station=_stations(seed).draw(home, np.full(size, _5G - 1), u[1]),
        capability=_pick(_CAPABILITY_CDF, u[2]),
        favourite_app=_pick(_APP_CDF, u[3]),
    )


def _row_counts(rows: int, subscribers: int, seed: int, period: dt.date) -> np.ndarray:
    """Rows per subscriber: at least one each, the rest spread by a skewed activity.

    Activity is a stable trait (heavy users stay heavy) times a per-period change.
    """
    blocks = -(-subscribers // _BLOCK)
    activity = np.concatenate([_rng(seed, "activity", b).lognormal(0.0, _ACTIVITY_SPREAD, _BLOCK)
                               for b in range(blocks)])[:subscribers]
    rng = _rng(seed, "counts", period.toordinal())
    weight = activity * rng.lognormal(0.0, _PERIOD_SPREAD, subscribers)
    return 1 + rng.multinomial(rows - subscribers, weight / weight.sum())


def _block_rows(seed: int, period: dt.date, block: int, people: _Population, counts: np.ndarray,
                sparse_keep: float) -> dict[str, np.ndarray]:
    """The period's rows of one block of subscribers, as numpy columns keyed by kind."""
    stations = _stations(seed)
    rng = _rng(seed, "rows", period.toordinal(), block)
    sub = rng.permutation(np.repeat(np.arange(counts.size), counts))  # a subscriber's rows are not adjacent
    n = sub.size
    u = rng.random((10, n))
    z = rng.standard_normal((13, n))

    window = _pick(_WINDOW_CDF, u[0])
    away = u[1] >= _P_HOME_PROVINCE
    province = np.where(away, _pick(_PROVINCE_CDF, u[2]), people.home[sub])
    app = np.where(u[3] < _P_FAVOURITE_APP, people.favourite_app[sub], _pick(_APP_CDF, u[4]))
    radio = np.minimum((u[5][:, None] >= _RADIO_CDF[people.capability[sub]]).sum(axis=1), _5G)
    radio[np.isin(app, _SPARSE_5G) & (radio == _5G) & (u[6] >= sparse_keep)] = _5G - 1
    home_station = people.home_station[sub]
    own_station = ~away & (u[7] < _P_HOME_STATION) & stations.supports[radio, home_station]
    station = np.where(own_station, home_station, stations.draw(province, radio, u[8]))
    overloaded = stations.overloaded[station]

    def lognormal(median: np.ndarray, sigma: float, normal: np.ndarray) -> np.ndarray:
        return median * np.exp(sigma * normal)

    download = lognormal(_RADIO["download"][radio] * _APP["download"][app] * np.where(overloaded, 0.5, 1.0),
                         0.9, z[0])
    download *= np.where((radio == _5G) & (u[9] < _APP["slow_5g"][app]), _SLOW_FACTOR, 1.0)
    upload = lognormal(0.12 * download, 0.5, z[1])
    latency = lognormal(_RADIO["latency"][radio] * _APP["latency"][app] * np.where(overloaded, 1.8, 1.0),
                        0.45, z[2])
    core_latency = lognormal(np.where(app == _VPN, 30.0, 18.0), 0.35, z[3])  # VPN adds a tunnel hop
    loss_factor = _RADIO["loss"][radio] * np.where(overloaded, 2.5, 1.0)
    session = np.clip(lognormal(_APP["session"][app], 0.8, z[4]), 1.0, 600.0)  # within the window
    duty = _APP["duty"][app]
    stall_rate = _APP["stalls"][app] * _RADIO["stalls"][radio] * np.where(overloaded, 2.0, 1.0)
    values = {
        "download": download,
        "upload": upload,
        "latency": latency,
        "core_latency": core_latency,
        "jitter": lognormal(0.15 * latency, 0.5, z[5]),
        "packet_loss": np.minimum(lognormal(0.25 * loss_factor, 1.0, z[6]), 100.0),
        "retransmission": np.minimum(lognormal(loss_factor, 0.8, z[7]), 100.0),
        "dl_volume": download * session * np.minimum(1.0, lognormal(duty, 0.6, z[8])) / 8,
        "ul_volume": upload * session * np.minimum(1.0, lognormal(duty, 0.6, z[9])) / 8,
        "session": session,
        "tcp_handshake": lognormal(latency + core_latency, 0.2, z[10]),
        "dns_latency": lognormal(12.0 + 0.5 * latency, 0.5, z[11]),
        "video_stalls": rng.poisson(stall_rate).astype(np.float64),
        "cqi": np.clip(_RADIO["cqi"][radio] - np.where(overloaded, 2.0, 0.0) + 2.0 * z[12], 0.0, 15.0),
    }
    nulls = rng.random((len(_MEASUREMENTS), n)) < _NULL_SHARE[:, None]
    return {"sub": sub, "station": stations.ids[station], "window": window, "province": province,
            "app": app, "radio": radio, **values,
            **{f"{kind}_null": nulls[i] for i, kind in enumerate(_MEASUREMENTS)}}


def _measurement_names(schema: Schema) -> dict[str, str]:
    """Measurement kind -> column name, by role for download and latency, else by position."""
    if len(schema.measurements) != len(_MEASUREMENTS) or len(schema.identifiers) != 3:
        raise ValueError(f"synthetic source needs 3 identifiers and {len(_MEASUREMENTS)} measurements; "
                         f"the roles file has {len(schema.identifiers)} and {len(schema.measurements)}")
    others = [name for name in schema.measurements if name not in (schema.download, schema.latency)]
    kinds = [kind for kind in _MEASUREMENTS if kind not in ("download", "latency")]
    return {"download": schema.download, "latency": schema.latency, **dict(zip(kinds, others))}


def _float_column(values: np.ndarray, null: np.ndarray) -> pa.Array:
    """float64 with nulls, from buffers: pa.array(mask=...) is a hundred times slower."""
    validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    return pa.Array.from_buffers(pa.float64(), len(values), [validity, pa.py_buffer(values)],
                                 null_count=int(null.sum()))


def _to_table(identifiers: list[np.ndarray], rows: dict[str, np.ndarray], period: dt.date,
              schema: Schema) -> pa.Table:
    start = dt.datetime.combine(period, _FIRST_WINDOW, tzinfo=dt.timezone.utc)
    start_us, window_us = int(start.timestamp()) * 1_000_000, _WINDOW // dt.timedelta(microseconds=1)
    sub = pa.array(rows["sub"])
    data = {
        **{name: pa.array(values).cast(pa.string()).take(sub)  # format once per subscriber
           for name, values in zip(schema.identifiers, identifiers)},
        schema.station: pa.array(rows["station"]),
        schema.time: pa.array(start_us + rows["window"] * window_us, type=pa.timestamp("us", tz="UTC")),
        schema.province: pa.array(PROVINCES).take(rows["province"]),
        schema.app: pa.array(APPS).take(rows["app"]),
        schema.radio: pa.array(RADIOS).take(rows["radio"]),
        **{name: _float_column(rows[kind], rows[f"{kind}_null"])
           for kind, name in _measurement_names(schema).items()},
    }
    arrow_schema = schema.arrow_schema()
    return pa.Table.from_arrays([data[name] for name in arrow_schema.names], schema=arrow_schema)


def _validate(rows: int, subscribers: int, seed: int, period: dt.date, chunk_subscribers: int) -> None:
    for name, value in (("rows", rows), ("subscribers", subscribers), ("seed", seed),
                        ("chunk_subscribers", chunk_subscribers)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if not 1 <= subscribers <= rows:
        raise ValueError(f"need rows >= subscribers >= 1 (every subscriber has a row); "
                         f"got rows={rows}, subscribers={subscribers}")
    if subscribers > _MAX_SUBSCRIBERS:
        raise ValueError(f"subscribers={subscribers} exceeds the identifier space ({_MAX_SUBSCRIBERS})")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if chunk_subscribers < 1:
        raise ValueError(f"chunk_subscribers must be >= 1, got {chunk_subscribers}")
    if not isinstance(period, dt.date):
        raise ValueError(f"period must be a datetime.date, got {period!r}")


def _chunks(rows: int, subscribers: int, seed: int, period: dt.date, schema: Schema,
            chunk_subscribers: int) -> Iterator[pa.Table]:
    """The table in chunks of whole blocks (chunk_subscribers is rounded up to a block).

    Arguments are checked now, before any file is touched; rows are made as chunks are drawn.
    """
    _validate(rows, subscribers, seed, period, chunk_subscribers)
    _measurement_names(schema)
    counts = _row_counts(rows, subscribers, seed, period)
    sparse_keep = _SPARSE_5G_KEEP * min(1.0, DEFAULT_ROWS / rows)
    blocks = -(-subscribers // _BLOCK)
    per_chunk = -(-chunk_subscribers // _BLOCK)

    def chunk(first: int) -> pa.Table:
        block_range = range(first, min(first + per_chunk, blocks))
        size = int(counts[first * _BLOCK:block_range.stop * _BLOCK].sum())
        columns: dict[str, np.ndarray] = {}  # filled block by block: a chunk is held once
        identifiers, offset = [], 0
        for b in block_range:
            block_counts = counts[b * _BLOCK:(b + 1) * _BLOCK]
            people = _population(seed, b, block_counts.size)
            identifiers.append(people.identifiers)
            part = _block_rows(seed, period, b, people, block_counts, sparse_keep)
            part["sub"] += (b - first) * _BLOCK
            for key, values in part.items():
                columns.setdefault(key, np.empty(size, values.dtype))[offset:offset + values.size] = values
            offset += part["sub"].size
        return _to_table([np.concatenate(ids) for ids in zip(*identifiers)], columns, period, schema)

    return (chunk(first) for first in range(0, blocks, per_chunk))


def _write_row_groups(writer: pq.ParquetWriter, tables: Iterator[pa.Table]) -> None:
    """Write the chunks as contiguous row groups of _ROW_GROUP rows, so that the file's bytes, not
    only its rows, are the same whatever the chunking."""
    carried = None  # the rows past the last full row group, copied so their chunk can be freed
    for table in tables:
        if carried is not None:
            table = pa.concat_tables([carried, table])
        full = table.num_rows - table.num_rows % _ROW_GROUP
        for offset in range(0, full, _ROW_GROUP):
            writer.write_table(table.slice(offset, _ROW_GROUP).combine_chunks(), row_group_size=_ROW_GROUP)
        carried = table.slice(full).take(np.arange(table.num_rows - full))
        del table
    if carried is not None and carried.num_rows:
        writer.write_table(carried, row_group_size=_ROW_GROUP)


def synth_table(*, rows: int, subscribers: int, seed: int = DEFAULT_SEED, period: dt.date,
                schema: Schema | None = None) -> pa.Table:
    """The synthetic table in memory (for small sizes); the same rows as ``synthesize`` writes."""
    return pa.concat_tables(_chunks(rows, subscribers, seed, period, schema or load_schema(),
                                    _CHUNK_SUBSCRIBERS))


def synthesize(path: str | os.PathLike, *, rows: int = DEFAULT_ROWS, subscribers: int = DEFAULT_SUBSCRIBERS,
               seed: int = DEFAULT_SEED, period: dt.date, schema: Schema | None = None,
               chunk_subscribers: int = _CHUNK_SUBSCRIBERS) -> None:
    """Write the period's synthetic table to ``path`` as Parquet, atomically.

    Chunks of subscribers bound memory; the file is the same bytes for the same arguments,
    whatever ``chunk_subscribers``.
    """
    schema = schema or load_schema()
    chunks = _chunks(rows, subscribers, seed, period, schema, chunk_subscribers)
    with atomic_path(path) as temporary:
        with pq.ParquetWriter(temporary, schema.arrow_schema(), compression="zstd",
                              use_dictionary=list(schema.string_columns)) as writer:
            _write_row_groups(writer, chunks)
