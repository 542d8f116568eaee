"""Noise seeds and alias keys: read from the environment or a protected file, never published.

Only a seed id (a keyed hash of the seed) reaches metadata. Without a configured seed the
pipeline runs on a fixed demo seed and says so, so a demo release is never mistaken for a real one.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

NOISE_SEED_ENV = "DSH_NOISE_SEED"
ALIAS_KEY_ENV = "DSH_ALIAS_KEY"
SECRETS_FILE_ENV = "DSH_SECRETS_FILE"
SECRETS_FILE_NAME = "secrets.toml"
DEMO_NOISE_SEED = b"dsh-demo-noise-seed-not-secret"
DEMO_ALIAS_KEY = b"dsh-demo-alias-key-not-secret"


class SecretsError(ValueError):
    """Secrets are missing, half-configured or stored in a file others can read."""


@dataclass(frozen=True)
class Secrets:
    noise_seed: bytes = field(repr=False)
    alias_key: bytes = field(repr=False)
    source: str
    """Where they came from: "environment", a file path, or "demo"."""

    @property
    def is_demo(self) -> bool:
        return self.source == "demo"

    @property
    def seed_id(self) -> str:
        return _fingerprint(b"seed", self.noise_seed)

    @property
    def alias_key_id(self) -> str:
        return _fingerprint(b"alias-key", self.alias_key)

    def derived(self, label: str) -> "Secrets":
        """An independent pair for an evaluation-only second release (never published)."""
        return Secrets(
            noise_seed=hashlib.sha256(b"derived-seed\x00" + label.encode() + self.noise_seed).digest(),
            alias_key=hashlib.sha256(b"derived-key\x00" + label.encode() + self.alias_key).digest(),
            source=f"{self.source}+derived:{label}",
        )


def _fingerprint(purpose: bytes, secret: bytes) -> str:
    return hashlib.sha256(b"dsh-id\x00" + purpose + b"\x00" + secret).hexdigest()[:16]


def load_secrets(home: str | os.PathLike, environ: dict[str, str] | None = None) -> Secrets:
    """Environment first, then $DSH_SECRETS_FILE or HOME/secrets.toml (mode 0600), else the demo pair."""
    environ = os.environ if environ is None else environ
    seed, key = environ.get(NOISE_SEED_ENV), environ.get(ALIAS_KEY_ENV)
    if seed or key:
        if not (seed and key):
            raise SecretsError(f"set both {NOISE_SEED_ENV} and {ALIAS_KEY_ENV}, or neither")
        return Secrets(seed.encode(), key.encode(), "environment")
    path = Path(environ.get(SECRETS_FILE_ENV) or Path(home) / SECRETS_FILE_NAME)
    if path.exists():
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SecretsError(f"{path} is readable by others (mode {stat.filemode(mode)}); chmod 600 it")
        values = tomllib.loads(path.read_text())
        missing = {"noise_seed", "alias_key"} - set(values)
        if missing:
            raise SecretsError(f"{path} lacks {sorted(missing)}")
        return Secrets(str(values["noise_seed"]).encode(), str(values["alias_key"]).encode(), str(path))
    if environ.get(SECRETS_FILE_ENV):
        raise SecretsError(f"{SECRETS_FILE_ENV} names {path}, which does not exist")
    return Secrets(DEMO_NOISE_SEED, DEMO_ALIAS_KEY, "demo")
