"""Settings layers: defaults < TOML file < BUCKETD_* environment < flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.runtime.reload import keeping_fixed
from gateway.settings import Settings, SettingsError, iter_settings, load_settings

ROOT = Path(__file__).resolve().parent.parent


def test_defaults_are_the_specifications() -> None:
    settings = load_settings()
    assert settings.plans.free.requests_per_minute == 100
    assert settings.plans.pro.requests_per_minute == 1000
    assert settings.port == 8080 and settings.host == "127.0.0.1"
    assert settings.id_prefix == "svc_"
    assert settings.uploads.allowed_content_types == ["*/*"]
    assert "us-east-1" in settings.regions and len(settings.regions) == 10


def test_layers_in_order(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        'port = 1000\nid_prefix = "abc_"\n[uploads]\ndeadline_seconds = 5\n'
        "[plans.free]\nmax_buckets = 3\n"
    )
    settings = load_settings(
        config,
        {
            "BUCKETD_PORT": "2000",
            "BUCKETD_UPLOADS__DEADLINE_SECONDS": "7.5",
            "BUCKETD_REGIONS": '["us-east-1"]',
            "BUCKETD_URL": "ignored",
        },
        {"port": 3000, "data_dir": None},
    )
    assert settings.port == 3000
    assert settings.id_prefix == "abc_"
    assert settings.uploads.deadline_seconds == 7.5
    assert settings.uploads.default_max_bytes == 5 * 1024**3
    assert settings.regions == ["us-east-1"]
    assert settings.plans.free.max_buckets == 3
    assert settings.plans.free.requests_per_minute == 100
    assert settings.data_dir == Path("./data")


@pytest.mark.parametrize(
    "text",
    [
        "unknown = 1\n",
        "[uploads]\nnope = 1\n",
        "[plans.enterprise]\nmax_buckets = 1\n",
        'port = "eighty"\n',
        'regions = ["nowhere"]\n',
        '[storage]\nbackend = "tape"\n',
        "port = [\n",
    ],
)
def test_bad_files_are_errors(tmp_path: Path, text: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text)
    with pytest.raises(SettingsError):
        load_settings(config)


def test_the_inline_limit_is_bounded_and_the_local_backends_alone() -> None:
    assert load_settings().storage.inline_max_bytes == 16384
    assert (
        load_settings(None, {"BUCKETD_STORAGE__INLINE_MAX_BYTES": "0"}).storage.inline_max_bytes
        == 0
    )
    for wrong in ("-1", "1048577"):
        with pytest.raises(SettingsError, match="inline_max_bytes must be between 0 and 1048576"):
            load_settings(None, {"BUCKETD_STORAGE__INLINE_MAX_BYTES": wrong})
    cluster = {
        "BUCKETD_STORAGE__BACKEND": "s3",
        "BUCKETD_STORAGE__S3__ACCESS_KEY_ID": "cluster",
        "BUCKETD_STORAGE__S3__SECRET_ACCESS_KEY": "cluster-secret",
    }
    assert load_settings(None, cluster).storage.backend == "s3"  # the default applies to local
    with pytest.raises(SettingsError, match="inline_max_bytes is for the local backend"):
        load_settings(None, {**cluster, "BUCKETD_STORAGE__INLINE_MAX_BYTES": "4096"})
    s3 = load_settings(None, cluster).storage.s3
    assert (s3.attempts, s3.connect_timeout_seconds, s3.read_timeout_seconds) == (3, 3.0, 30.0)
    short = {
        "BUCKETD_STORAGE__S3__ATTEMPTS": "1",
        "BUCKETD_STORAGE__S3__CONNECT_TIMEOUT_SECONDS": "0.5",
    }
    assert load_settings(None, {**cluster, **short}).storage.s3.attempts == 1
    for name, wrong in (("ATTEMPTS", "0"), ("READ_TIMEOUT_SECONDS", "0")):
        with pytest.raises(SettingsError, match="attempts is at least 1"):
            load_settings(None, {**cluster, f"BUCKETD_STORAGE__S3__{name}": wrong})


def test_bad_environment_is_an_error() -> None:
    with pytest.raises(SettingsError):
        load_settings(None, {"BUCKETD_REGIONS": '["us-east-1"'})
    with pytest.raises(SettingsError, match="go together"):
        load_settings(None, {"BUCKETD_ACCESS_KEY_ID": "ci"})
    with pytest.raises(SettingsError, match="8 to 128"):
        load_settings(None, {"BUCKETD_ACCESS_KEY_ID": "ci", "BUCKETD_SECRET_ACCESS_KEY": "short"})
    with pytest.raises(SettingsError, match="BUCKETD_PLAN"):
        load_settings(None, {"BUCKETD_PLAN": "gold"})
    with pytest.raises(SettingsError, match="tls_key"):
        load_settings(None, {"BUCKETD_TLS_CERT": "cert.pem"})
    with pytest.raises(SettingsError):
        load_settings(None, {"BUCKETD_STORAGE__FSYNC": "maybe"})


def test_the_proxies_from_file_and_environment(tmp_path: Path) -> None:
    defaults = load_settings()
    assert defaults.trusted_proxies == [] and defaults.client_address_header == "X-Forwarded-For"
    config = tmp_path / "c.toml"
    config.write_text('trusted_proxies = ["10.0.0.5"]\n')
    assert load_settings(config).proxies().header == "x-forwarded-for"
    settings = load_settings(
        config,
        {
            "BUCKETD_TRUSTED_PROXIES": "10.0.0.5,10.1.0.0/16,::1",
            "BUCKETD_CLIENT_ADDRESS_HEADER": "forwarded",
        },
    )
    assert settings.trusted_proxies == ["10.0.0.5", "10.1.0.0/16", "::1"]
    assert settings.proxies().header == "forwarded"
    with pytest.raises(SettingsError, match="client_address_header"):
        load_settings(None, {"BUCKETD_CLIENT_ADDRESS_HEADER": "X-Real-IP"})
    with pytest.raises(SettingsError, match="trusted_proxies"):
        load_settings(None, {"BUCKETD_TRUSTED_PROXIES": "proxy.internal"})


def test_the_anonymous_rate_from_file_and_environment(tmp_path: Path) -> None:
    assert load_settings().ratelimit.anonymous_rpm == 1000
    config = tmp_path / "c.toml"
    config.write_text("[ratelimit]\nanonymous_rpm = 50\n")
    assert load_settings(config).ratelimit.anonymous_rpm == 50
    from_env = load_settings(config, {"BUCKETD_RATELIMIT__ANONYMOUS_RPM": "0"})
    assert from_env.ratelimit.anonymous_rpm == 0
    with pytest.raises(SettingsError, match="anonymous_rpm"):
        load_settings(None, {"BUCKETD_RATELIMIT__ANONYMOUS_RPM": "-1"})


def test_sighup_takes_the_anonymous_rate_but_not_the_rest_of_ratelimit() -> None:
    """With workers, each new one starts with `keeping_fixed` of the settings read again."""
    kept = load_settings()
    fresh = load_settings(
        None,
        {
            "BUCKETD_RATELIMIT__WINDOW_SECONDS": "3600",
            "BUCKETD_RATELIMIT__ANONYMOUS_RPM": "7",
            "BUCKETD_PORT": "9",
        },
    )
    merged = keeping_fixed(fresh, kept)
    assert merged.ratelimit.anonymous_rpm == 7
    assert merged.ratelimit.window_seconds == 60 and merged.port == 8080


def test_sighup_neither_turns_test_mode_on_nor_off() -> None:
    """Off in new workers, the clock's shared offset would stay where a test put it with
    no route left to put it back; on, the surface would open without the start's warning."""
    off, on = load_settings(), load_settings(None, {"BUCKETD_TEST_MODE": "true"})
    assert not keeping_fixed(on, off).test_mode
    assert keeping_fixed(off, on).test_mode


def test_dev_config_loads_and_raises_the_pro_plan() -> None:
    settings = load_settings(ROOT / "gateway" / "dev.toml")
    assert settings.plans.pro.requests_per_minute > 1000
    assert settings.plans.free == Settings().plans.free
    assert settings.ratelimit.anonymous_rpm == 0  # public downloads in a loop: not counted


def test_every_setting_is_documented_with_its_default() -> None:
    docs = (ROOT / "docs" / "configuration.md").read_text()
    rows = {}
    for line in docs.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            assert cells[0].strip("`") not in rows, f"{cells[0]} is documented twice"
            rows[cells[0].strip("`")] = cells[1].strip("`")
    for name, default, help_text in iter_settings():
        assert help_text, name
        assert name in rows, f"{name} is missing from docs/configuration.md"
        shown = rows[name]
        if isinstance(default, Path):
            assert shown == str(default), name
        elif shown.endswith("…"):
            assert json.dumps(default).startswith(shown[:-1]), name
        else:
            assert json.loads(shown) == default, f"{name}: the docs say {shown}, not {default!r}"


def test_bootstrap_from_the_short_environment_names_and_lists_by_commas() -> None:
    settings = load_settings(
        None,
        {
            "BUCKETD_ACCESS_KEY_ID": "ci",
            "BUCKETD_SECRET_ACCESS_KEY": "cisecret123",
            "BUCKETD_BUCKETS": "photos, logs,",
            "BUCKETD_PLAN": "free",
            "BUCKETD_REGIONS": "us-east-1,eu-west-1",
        },
    )
    boot = settings.bootstrap
    assert (boot.access_key_id, boot.secret_access_key) == ("ci", "cisecret123")
    assert boot.buckets == ["photos", "logs"] and boot.plan == "free"
    assert settings.regions == ["us-east-1", "eu-west-1"]
    file_too = load_settings(None, {"BUCKETD_BOOTSTRAP__BUCKETS": '["a1b", "c2d"]'})
    assert file_too.bootstrap.buckets == ["a1b", "c2d"]
