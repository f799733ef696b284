"""Images through the Python client against the real daemon: build (progress streamed, cancel,
a second build refused), get, list, delete, the daemon's refusals as exceptions, and a session
from an image. Builds use tests/fakes/fake_mmdebstrap.sh (no network, a second each); the
session runs on the busybox image integration.images keeps in its cache, when it is there."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time

import pytest

import sandgate
from conftest import SOURCE_DIR, TOKEN, Daemon, running_daemon

USER_TOKEN = "py-images-user"  # may use "tiny" and "fake", may not build
FAKE_BUILDER = os.path.join(SOURCE_DIR, "tests", "fakes", "fake_mmdebstrap.sh")
# integration.images builds "tiny" (busybox) there once and keeps it (tests/integration).
IMAGE_CACHE = "/var/tmp/sandgate-test-image-cache"
# A fake build takes a second; a call that runs longer is a failure, never a hang.
BUILD_TIMEOUT = 60


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _link_cached_tiny(images_dir: str) -> bool:
    """Makes the cache's "tiny" one of the daemon's images (its record copied, its root
    linked, never written); False when the cache has none."""
    record = os.path.join(IMAGE_CACHE, "names", "tiny.json")
    if not os.path.exists(record):
        return False
    with open(record) as f:
        digest = json.load(f)["digest"]
    os.makedirs(os.path.join(images_dir, "names"))
    shutil.copy(record, os.path.join(images_dir, "names"))
    # Searchable by the sandbox's uid, as integration.images makes it.
    os.chmod(IMAGE_CACHE, 0o711)
    os.symlink(os.path.join(IMAGE_CACHE, digest), os.path.join(images_dir, digest))
    return True


@pytest.fixture(scope="module")
def daemon():
    def prepare(d: Daemon) -> None:
        images_dir = os.path.join(d.state_dir, "images")
        os.makedirs(images_dir)
        d.has_tiny = _link_cached_tiny(images_dir)

    with running_daemon(before_start=prepare, config={
            "tenants": [
                {"name": "py", "token_sha256": _sha(TOKEN), "policy": {"build_images": True}},
                {"name": "user", "token_sha256": _sha(USER_TOKEN),
                 "policy": {"images": ["tiny", "fake"]}}],
            "local": {"uid_base": 331000, "uid_count": 16, "mmdebstrap": FAKE_BUILDER}}) as d:
        yield d


@pytest.fixture
def client(daemon):
    with sandgate.Client(daemon.address, token=TOKEN) as c:
        yield c


def _wait_gone(client, name: str) -> None:
    """Waits for a cancelled build to end (mmdebstrap is stopped and cleaned up first)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            client.get_image(name)
        except sandgate.NotFound:
            return
        assert time.monotonic() < deadline, f"the cancelled build of {name} is still there"
        time.sleep(0.1)


def test_a_build_streams_its_progress_and_the_image_is_listed_got_and_deleted(client):
    build = client.build_image("fake", ["zlib1g", "busybox", "busybox"], timeout=BUILD_TIMEOUT)
    lines = list(build)
    assert "I: fake mmdebstrap: including busybox,zlib1g" in lines
    assert lines[-1].startswith("built sha256-")
    image = build.image
    assert image.state == sandgate.images_pb.Image.STATE_READY
    assert list(image.packages) == ["busybox", "zlib1g"]
    assert image.digest.startswith("sha256-") and image.built_by == "py"
    assert client.get_image("fake").digest == image.digest
    assert "fake" in [i.name for i in client.list_images()]
    assert client.delete_image("fake").name == "fake"
    with pytest.raises(sandgate.NotFound, match="fake"):
        client.get_image("fake")


def test_a_build_cancelled_by_its_caller_leaves_nothing_and_a_second_one_is_refused(client):
    build = client.build_image("slow", ["slow"], timeout=BUILD_TIMEOUT)
    assert "I: waiting to be cancelled" in iter(build)  # reads up to the line
    assert client.get_image("slow").state == sandgate.images_pb.Image.STATE_BUILDING
    with pytest.raises(sandgate.AlreadyExists, match="slow"):
        client.build_image("slow", ["slow"], timeout=BUILD_TIMEOUT).wait()
    build.cancel()
    _wait_gone(client, "slow")


def test_a_detached_build_goes_on_and_delete_cancels_it(client):
    build = client.build_image("detached", ["slow"], detach=True, timeout=BUILD_TIMEOUT)
    assert "I: waiting to be cancelled" in iter(build)
    build.cancel()
    assert client.get_image("detached").state == sandgate.images_pb.Image.STATE_BUILDING
    assert client.delete_image("detached").name == "detached"
    _wait_gone(client, "detached")


@pytest.mark.parametrize("name,packages,error,words", [
    ("../etc", ["busybox"], sandgate.InvalidArgument, "name"),
    ("host", ["busybox"], sandgate.InvalidArgument, "host"),
    ("b\xe9ad", ["busybox"], sandgate.InvalidArgument, "name"),
    ("x" * 64, ["busybox"], sandgate.InvalidArgument, "63"),
    ("nopkg", [], sandgate.InvalidArgument, "packages"),
    ("badpkg", ["Bad Package"], sandgate.InvalidArgument, "Bad Package"),
    ("absent", ["missing"], sandgate.InvalidArgument, "missing"),
])
def test_hostile_builds_are_refused_naming_the_problem(client, name, packages, error, words):
    with pytest.raises(error, match=words):
        client.build_image(name, packages, timeout=BUILD_TIMEOUT).wait()


def test_another_tenants_policy_is_kept(daemon, client):
    client.build_image("private", ["busybox"], timeout=BUILD_TIMEOUT).wait()
    with sandgate.Client(daemon.address, token=USER_TOKEN) as user:
        with pytest.raises(sandgate.PermissionDenied, match="build_images"):
            user.build_image("fake", ["busybox"], timeout=BUILD_TIMEOUT).wait()
        with pytest.raises(sandgate.PermissionDenied, match="private"):
            user.get_image("private")
        assert "private" not in [i.name for i in user.list_images()]
        with pytest.raises(sandgate.PermissionDenied, match="private"):
            user.session(image="private")
    client.delete_image("private")


def test_a_session_and_a_run_name_their_image(daemon, client):
    if not daemon.has_tiny:
        pytest.skip(f"no 'tiny' in {IMAGE_CACHE}: ctest -R integration.images builds it")
    with sandgate.Client(daemon.address, token=USER_TOKEN) as user, \
            user.session(image="tiny") as s:
        assert s.record.sandbox.image == "tiny"
        assert s.record.sandbox.image_digest.startswith("sha256-")
        code, out, _ = s.run("busybox echo from-tiny; test -e /usr/bin/python3 || echo no-python")
        assert (code, out) == (0, "from-tiny\nno-python\n")

def test_an_unknown_image_is_not_found_naming_it(client):
    with pytest.raises(sandgate.NotFound, match="nosuch"):
        client.session(image="nosuch")
    with pytest.raises(sandgate.NotFound, match="nosuch"):
        client.run_analysis({"a.csv": b"x"}, image="nosuch")
