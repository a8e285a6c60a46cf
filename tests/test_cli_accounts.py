"""`bucketd orgs ...` and `bucketd keys ...` through a running server's API, from any folder
(issue 34 point 5), and the one rule that picks the API or the data dir. One test runs the
real `bucketd` processes; the others run the command's own `main` in this process (the
same code, without a third of a second per process start)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.cli.accounts import over_api
from gateway.cli.errors import UsageError
from tests.support import web
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name


def _environ(live: LiveServer, key: str | None = None) -> dict[str, str]:
    """This process's environment without any BUCKETD_ variable, pointed at `live`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BUCKETD_")}
    return environ | {"BUCKETD_URL": live.url, "BUCKETD_KEY": key or live.admin_key}


def _bucketd(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=60,
    )


class InProcess:
    """`bucketd ARGS` run by its `main` here, with the environment given and nothing else of
    bucketd's, from `folder`: (exit status, stdout, stderr)."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], folder: Path
    ) -> None:
        self._monkeypatch = monkeypatch
        self._capsys = capsys
        for name in [name for name in os.environ if name.startswith("BUCKETD_")]:
            monkeypatch.delenv(name)
        monkeypatch.chdir(folder)

    def __call__(self, env: dict[str, str], *args: str) -> tuple[int, str, str]:
        for name, value in env.items():
            self._monkeypatch.setenv(name, value)
        try:
            main(list(args))
            status = 0
        except SystemExit as exc:
            status = int(exc.code or 0)
        finally:
            for name in env:
                self._monkeypatch.delenv(name)
        found = self._capsys.readouterr()
        return status, found.out, found.err


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A folder that is no data dir and holds none."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


@pytest.fixture
def run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], elsewhere: Path
) -> InProcess:
    return InProcess(monkeypatch, capsys, elsewhere)


@pytest.mark.slow  # bucketd processes
def test_the_commands_work_over_the_api_from_another_folder(
    local_server: LiveServer, elsewhere: Path
) -> None:
    env = _environ(local_server)
    name = unique_name("acme")
    made = _bucketd(elsewhere, env, "orgs", "create", name, "--plan", "free")
    assert made.returncode == 0, made.stderr
    org_id = made.stdout.splitlines()[-1]
    assert made.stdout.splitlines() == [f"created organization {name!r} on the free plan", org_id]
    created = _bucketd(
        elsewhere, env, "keys", "create", "--org", name, "--scopes", "buckets:read", "--s3"
    )
    assert created.returncode == 0, created.stderr
    access, secret = created.stdout.splitlines()[-1].split(" ")
    answer = web.get(local_server.url + "/v1/organization", auth=(access, secret))
    assert answer.json()["data"]["id"] == org_id  # works at once, in that organization
    revoked = _bucketd(elsewhere, env, "keys", "revoke", access)  # found in another organization
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.startswith("revoked key ") and org_id in revoked.stdout
    refused = web.get(local_server.url + "/v1/organization", auth=(access, secret))
    assert refused.status_code == 401
    twice = _bucketd(elsewhere, env, "orgs", "create", name, "--plan", "pro")
    assert twice.returncode == 1 and twice.stdout == ""
    assert twice.stderr.count("\n") == 1 and "(409 organization_exists)" in twice.stderr
    assert list(elsewhere.iterdir()) == []  # no data dir made, nothing written here


def test_orgs_and_keys_over_the_api_print_what_the_data_dir_prints(
    local_server: LiveServer, run: InProcess, elsewhere: Path
) -> None:
    env = _environ(local_server)
    name = unique_name("shape")
    status, out, _ = run(env, "orgs", "create", name, "--plan", "free")
    org_id = out.splitlines()[-1]
    listed = run(env, "orgs", "list")[1].splitlines()
    assert listed[0].split() == ["ID", "PLAN", "NAME"]
    assert [org_id, "free", name] in [line.split() for line in listed]
    assert run(env, "orgs", "set-plan", name, "pro")[1] == (
        f"organization {name!r} ({org_id}) is on the pro plan\n"
    )
    scopes = "buckets:read,buckets:write"
    status, out, err = run(env, "keys", "create", "--org", org_id, "--scopes", scopes)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("created key ") and lines[0].endswith(
        "(buckets:read, buckets:write); the secret is shown once:"
    )
    with local_server.client(lines[-1]) as tenant:  # the secret, alone on the last line
        assert tenant.get("/organization").json()["data"]["plan"] == "pro"
        bucket = new_bucket(tenant, unique_name())
    status, out, err = run(
        env, "keys", "create", "--org", name, "--scopes", "files:read", "--bucket", bucket["id"]
    )
    assert status == 0, err
    by_name = run(env, "keys", "create", "--org", name, "--scopes", "files:read", "--bucket", "x1y")
    assert by_name[0] == 2 and "give the bucket's id" in by_name[2]
    keys = run(env, "keys", "list", "--org", name)[1].splitlines()
    assert len(keys) == 3 and all(" active " in line for line in keys[1:])
    key_id = keys[1].split()[0]
    status, out, _ = run(env, "keys", "revoke", key_id, "--org", name)
    assert out == f"revoked key {key_id} (cli) of organization {org_id}\n"
    assert "revoked 20" in run(env, "keys", "list", "--org", name)[1]
    # The admin key's own organization goes through /v1/keys, by name as by id.
    own = web.get(
        local_server.url + "/v1/organization",
        headers={"Authorization": f"Bearer {local_server.admin_key}"},
    ).json()["data"]
    status, out, _ = run(env, "keys", "create", "--org", own["name"], "--scopes", "files:read")
    made = out.splitlines()[-1]
    with local_server.client(made) as mine:
        assert mine.get("/organization").json()["data"]["id"] == own["id"]
    assert list(elsewhere.iterdir()) == []


def test_a_key_without_the_operator_scope_keeps_to_its_organization(
    local_server: LiveServer, run: InProcess
) -> None:
    env = _environ(local_server)
    own = run(env, "orgs", "create", unique_name("own"), "--plan", "free")[1].split()[-1]
    other = run(env, "orgs", "create", unique_name("other"), "--plan", "free")[1].split()[-1]
    scopes = "buckets:read,buckets:write,files:read,files:write,keys:manage"
    admin = run(env, "keys", "create", "--org", own, "--scopes", scopes)[1].split()[-1]
    victim = run(env, "keys", "create", "--org", other, "--scopes", "files:read")[1].split()[-1]
    tenant = _environ(local_server, admin)
    status, out, err = run(tenant, "keys", "create", "--org", own, "--scopes", "files:read")
    assert status == 0, err  # its own organization's keys: keys:manage is enough
    assert run(tenant, "keys", "list", "--org", own)[0] == 0
    victim_id = run(env, "keys", "list", "--org", other)[1].splitlines()[1].split()[0]
    for args in [
        ("orgs", "list"),
        ("orgs", "create", unique_name("nope"), "--plan", "pro"),
        ("orgs", "set-plan", own, "pro"),
        ("keys", "list", "--org", other),
        ("keys", "create", "--org", other, "--scopes", "files:read"),
        ("keys", "create", "--org", own, "--scopes", "orgs:manage"),
        ("keys", "revoke", victim_id),
        ("keys", "revoke", victim_id, "--org", other),
    ]:
        status, out, err = run(tenant, *args)
        assert status in (1, 2) and out == "", args
        assert err.count("\n") == 1 and err.startswith("bucketd: "), (args, err)
        assert "orgs:manage" in err, (args, err)
    with local_server.client(victim) as untouched:
        assert untouched.get("/organization").status_code == 200
    assert " free " in run(env, "orgs", "list")[1].split(own)[1].splitlines()[0]


def test_the_rule_between_the_api_and_the_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    def args(**given: str | None) -> argparse.Namespace:
        return argparse.Namespace(
            **({"url": None, "data_dir": None, "config": None, "key": None} | given)
        )

    monkeypatch.delenv("BUCKETD_URL", raising=False)
    assert not over_api(args())  # ./data, as the contract's commands always did
    assert over_api(args(url="http://127.0.0.1:1"))
    assert not over_api(args(data_dir="d"))
    monkeypatch.setenv("BUCKETD_URL", "http://127.0.0.1:1")
    assert over_api(args()) and over_api(args(key="k"))
    assert not over_api(args(data_dir="d")) and not over_api(args(config="c.toml"))
    for confused in (args(url="u", config="c.toml"), args(key="k", data_dir="d")):
        with pytest.raises(UsageError):
            over_api(confused)
    monkeypatch.delenv("BUCKETD_URL")
    with pytest.raises(UsageError, match="--key is for a server"):
        over_api(args(key="k"))


def test_without_a_server_nothing_is_made_where_the_command_runs(
    run: InProcess, elsewhere: Path
) -> None:
    for command in (
        ("orgs", "list"),
        ("orgs", "create", "acme", "--plan", "free"),
        ("keys", "list", "--org", "acme"),
        ("keys", "revoke", "svc_00000000000000000000000000"),
    ):
        status, out, err = run({}, *command)
        assert status == 2 and "no data dir at" in err and err.count("\n") == 1, command
        assert list(elsewhere.iterdir()) == []
    (elsewhere / "data").mkdir()  # someone else's ./data: no index is started in it
    status, _, err = run({}, "orgs", "create", "acme", "--plan", "free")
    assert status == 2 and "holds no bucketd index" in err
    assert list((elsewhere / "data").iterdir()) == []
    status, out, err = run({}, "orgs", "create", "acme", "--plan", "free", "--data-dir", "data")
    assert status == 0 and out.splitlines()[-1].startswith("svc_"), err  # named: it may
    status, _, err = run({}, "orgs", "list", "--url", "http://127.0.0.1:9", "--data-dir", "data")
    assert status == 2 and "not allowed with argument --url" in err
    status, _, err = run({"BUCKETD_URL": "http://127.0.0.1:9"}, "orgs", "list")
    assert status == 2 and "no API key" in err and err.count("\n") == 1
