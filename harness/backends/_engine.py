"""The Docker engine as killpoint uses it: connect, label and clean up containers, build the local image.

Every container killpoint creates is labelled with its owner (pid and start
time of the harness process that made it) and its run directory. A harness
killed by SIGKILL cannot remove its containers, so the next docker backend to
start, and ``killpoint clean``, remove every one whose owner is gone; those of
a harness still running (another session, another pytest worker) are left alone.

The default image is built here, never pulled: an empty root filesystem (mount
points, the usual symlinks into /usr, a passwd naming nobody) imported as an
image labelled ``killpoint.host-runtime``. For such an image the backend
bind-mounts, read-only and each at its own path, the host's /usr (libc,
/bin/sh), this Python installation, its venv, the project and the scenario's
directory, so a workload command ``{python} -m ...`` runs unchanged.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import tarfile
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

import killpoint.harness
from killpoint.errors import ConfigError
from killpoint.harness.execute._process_tree import identity_running, own_identity

DEFAULT_IMAGE = "killpoint-host:1"
LABEL_OWNER = "killpoint.owner"
LABEL_RUN_DIR = "killpoint.run-dir"
LABEL_INCARNATION = "killpoint.incarnation"
LABEL_HOST_RUNTIME = "killpoint.host-runtime"
NOBODY = "65534:65534"

_ROOTFS_DIRS = ("dev", "etc", "proc", "sys", "tmp", "usr")
_ROOTFS_LINKS = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"}
_ROOTFS_FILES = {
    "etc/passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
}


def connect() -> docker.DockerClient:
    """A client of the local engine, or a ConfigError saying why none answers and what to do."""
    try:
        client = docker.from_env()
        client.ping()
    except (docker.errors.DockerException, requests.RequestException) as error:
        raise ConfigError(f"no Docker engine answers ({error}). Start one "
                          f"(docs/docker.md: apt-get install docker.io; dockerd &) or use --backend subprocess") from None
    return client


def owner_label() -> str:
    """``PID:TICKS`` of this process (``own_identity``): who owns the containers it creates.

    Worked out per process id: a forked worker's containers labelled with its
    parent's pid would outlive it as a live harness's, never swept.
    """
    return own_identity()


def owner_alive(owner: str) -> bool:
    return identity_running(owner)


def remove_leftovers(client: docker.DockerClient, *, everything: bool = False) -> list[str]:
    """Remove killpoint's containers whose harness is gone (every one with ``everything``); describe each."""
    removed = []
    for summary in client.api.containers(all=True, filters={"label": LABEL_OWNER}):
        labels = summary.get("Labels") or {}
        owner = labels.get(LABEL_OWNER, "")
        alive = owner_alive(owner)
        if alive and not everything:
            continue
        if not remove_container(client.api, summary["Id"]):
            continue
        removed.append(f"container {summary['Id'][:12]} ({summary.get('State', '?')}; "
                       f"run {labels.get(LABEL_RUN_DIR, '?')}, "
                       f"incarnation {labels.get(LABEL_INCARNATION, '?')}; harness pid {owner.partition(':')[0]} "
                       f"{'still running' if alive else 'gone'})")
    return removed


def remove_container(api: docker.APIClient, container_id: str) -> bool:
    """Force-remove a container (killing it); False if it is gone or another harness is already removing it.

    Two harnesses starting at once (pytest-xdist workers) both sweep the same
    leftover; the engine answers the second with 409 "removal already in progress".
    """
    try:
        api.remove_container(container_id, force=True, v=True)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as error:
        if error.status_code == 409 and "already in progress" in str(error):
            return False
        raise
    return True


def _empty_rootfs() -> bytes:
    """A tar of the image's whole root filesystem: mount points, links into /usr, passwd and group."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in _ROOTFS_DIRS:
            entry = tarfile.TarInfo(name)
            entry.type, entry.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(entry)
        for name, target in _ROOTFS_LINKS.items():
            entry = tarfile.TarInfo(name)
            entry.type, entry.linkname = tarfile.SYMTYPE, target
            tar.addfile(entry)
        for name, text in _ROOTFS_FILES.items():
            data = text.encode()
            entry = tarfile.TarInfo(name)
            entry.size, entry.mode = len(data), 0o644
            tar.addfile(entry, io.BytesIO(data))
    return buffer.getvalue()


def build_host_image(client: docker.DockerClient, tag: str = DEFAULT_IMAGE) -> str:
    """Import the empty root filesystem as ``tag`` (no registry involved); return the image id."""
    repository, _, version = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
    client.api.import_image_from_data(
        _empty_rootfs(), repository=repository, tag=version,
        changes=[f"USER {NOBODY}", f"LABEL {LABEL_HOST_RUNTIME}=1", "ENV PATH=/usr/local/bin:/usr/bin:/bin"])
    return client.api.inspect_image(tag)["Id"]


def image_config(client: docker.DockerClient, image: str) -> dict[str, Any]:
    """The image's config; the default image is built when missing, any other must already be local."""
    try:
        return client.api.inspect_image(image)["Config"] or {}
    except docker.errors.ImageNotFound:
        if image != DEFAULT_IMAGE:
            raise ConfigError(f"--image {image}: no such image in the local engine, and killpoint never pulls. "
                              f"Build or load it first (docker build / docker load / docker import), or leave "
                              f"--image out to use {DEFAULT_IMAGE}, which killpoint builds itself") from None
    build_host_image(client, image)
    return client.api.inspect_image(image)["Config"] or {}


def host_runtime_paths(cwd: Path) -> list[str]:
    """What a host-runtime image needs from the host, read-only: /usr, Python, venv, project, scenario dir."""
    project = Path(killpoint.harness.__file__).resolve().parent.parent
    wanted = [Path("/usr"), Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), project, cwd.resolve()]
    kept: list[Path] = []
    for path in sorted(set(wanted), key=lambda path: len(path.parts)):
        if path != Path("/") and not any(path.is_relative_to(outer) for outer in kept):
            kept.append(path)
    return [str(path) for path in kept]


def numeric_user(user: str) -> tuple[int, int] | None:
    """``UID[:GID]`` as numbers, or None for a user given by name."""
    uid, _, gid = user.partition(":")
    if uid.isdigit() and (not gid or gid.isdigit()):
        return int(uid), int(gid or uid)
    return None


def grant_writes(paths: list[Path], user: str) -> None:
    """Let the container's user write ``paths`` (recursively): chown to a numeric user, else make them world-writable."""
    ids = numeric_user(user)
    if ids is not None and ids[0] == 0:
        return
    for path in paths:
        members = [path, *(Path(root) / name for root, dirs, files in os.walk(path) for name in dirs + files)]
        for member in members:
            status = member.lstat()
            if stat.S_ISLNK(status.st_mode) or (stat.S_ISREG(status.st_mode) and status.st_nlink > 1):
                continue  # a link (soft or hard) planted in the world may be a host file: never hand it over
            try:
                if ids is None:
                    raise PermissionError
                os.chown(member, *ids, follow_symlinks=False)
            except PermissionError:
                os.chmod(member, status.st_mode | 0o666 | (0o111 if stat.S_ISDIR(status.st_mode) else 0),
                         follow_symlinks=False)
