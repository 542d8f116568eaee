import os

import pytest

from dsh_assets.core.secrets import DEMO_NOISE_SEED, SecretsError, load_secrets


def test_demo_secrets_are_labelled(tmp_path):
    secrets = load_secrets(tmp_path, environ={})
    assert secrets.is_demo and secrets.noise_seed == DEMO_NOISE_SEED
    assert DEMO_NOISE_SEED.decode() not in repr(secrets)


def test_environment_wins_and_seed_id_is_not_the_seed(tmp_path):
    secrets = load_secrets(tmp_path, environ={"DSH_NOISE_SEED": "s3cr3t", "DSH_ALIAS_KEY": "k3y"})
    assert not secrets.is_demo and secrets.noise_seed == b"s3cr3t"
    assert "s3cr3t" not in secrets.seed_id and len(secrets.seed_id) == 16
    assert secrets.seed_id != load_secrets(tmp_path, environ={"DSH_NOISE_SEED": "other", "DSH_ALIAS_KEY": "k3y"}).seed_id


def test_half_configured_environment_is_refused(tmp_path):
    with pytest.raises(SecretsError, match="set both"):
        load_secrets(tmp_path, environ={"DSH_NOISE_SEED": "s"})


def test_protected_file_is_read_and_a_readable_one_refused(tmp_path):
    path = tmp_path / "secrets.toml"
    path.write_text('noise_seed = "file-seed"\nalias_key = "file-key"\n')
    os.chmod(path, 0o644)
    with pytest.raises(SecretsError, match="readable by others"):
        load_secrets(tmp_path, environ={})
    os.chmod(path, 0o600)
    secrets = load_secrets(tmp_path, environ={})
    assert (secrets.noise_seed, secrets.alias_key, secrets.source) == (b"file-seed", b"file-key", str(path))


def test_named_secrets_file_must_exist(tmp_path):
    with pytest.raises(SecretsError, match="does not exist"):
        load_secrets(tmp_path, environ={"DSH_SECRETS_FILE": str(tmp_path / "nope.toml")})


def test_derived_secrets_are_independent(tmp_path):
    secrets = load_secrets(tmp_path, environ={})
    other = secrets.derived("second-release")
    assert other.noise_seed != secrets.noise_seed and other.alias_key != secrets.alias_key
    assert other.seed_id != secrets.seed_id
