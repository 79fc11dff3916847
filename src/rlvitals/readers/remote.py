"""Runs in object storage: ``s3://``, ``gs://``, ``az://`` (any fsspec URL), read as local runs
are, fetching only what is asked for.

A URL names a run directory, a log file, or a folder of runs in a bucket. The reader keeps a
local mirror of the run under ``$RLVITALS_CACHE`` (default ``~/.cache/rlvitals/remote``) and
brings it up to date on each poll with byte ranges: a file that grew (a log re-uploaded with
lines appended, the way object stores "append") costs only its new bytes, one that was
replaced or shrank is fetched again whole, one that is unchanged costs nothing but its
listing. Transcripts (``transcripts/step-NNNNNN.json``, often most of a run's bytes) are not
mirrored up front: a step's file is fetched when something reads it (a check, ``transcripts``,
the report's viewer). Everything else the readers need (step records, attempts, a framework's
sample dump) is read as it would be from a disk, through the mirror.

fsspec and the filesystem for the URL's scheme are extras: ``pip install 'rlvitals[s3]'``
(s3fs), ``[gcs]`` (gcsfs), ``[azure]`` (adlfs). The standard ``AWS_ENDPOINT_URL`` points s3fs at
an S3-compatible server (MinIO, moto, a local gateway).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import MissingExtraError, ReadError, UnknownFormatError
from ..model import RunData
from ..transcripts.store import TranscriptAttempt, TranscriptStore

__all__ = ["Mirror", "RemoteReader", "is_url", "open_remote", "remote_runs"]

_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_LOCAL_SCHEMES = {"file", "sqlite"}
_EXTRA = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure"}
_LAZY_DIRS = ("transcripts", "checkpoints")
_CHUNK = 8 << 20


def is_url(path: Any) -> bool:
    """Whether ``path`` is a remote URL (``s3://...``), not a local path or ``sqlite:///``."""
    m = _URL.match(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else None
    return m is not None and m.group(1).lower() not in _LOCAL_SCHEMES


def _filesystem(url: str) -> tuple[Any, str]:
    scheme = _URL.match(url).group(1).lower()  # type: ignore[union-attr]
    extra = _EXTRA.get(scheme, "s3")
    try:
        import fsspec
    except ModuleNotFoundError as exc:
        raise MissingExtraError(extra, f"reading {scheme}:// URLs") from exc
    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise MissingExtraError(extra, f"reading {scheme}:// URLs ({exc})") from exc
    return fs, root.rstrip("/")


def _cache_root() -> Path:
    base = os.environ.get("RLVITALS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "rlvitals"
    )
    return Path(base) / "remote"


class Mirror:
    """A local copy of one remote run (a folder or a file), kept up to date by byte ranges."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.fs, self.root = _filesystem(self.url)
        key = hashlib.sha1(self.url.encode()).hexdigest()[:16]
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", self.url.split("://", 1)[1])[-60:]
        self.base = _cache_root() / f"{name}-{key}"
        self._seen: dict[str, tuple[int, Any]] = {}  # remote path -> (size, etag or mtime)
        self.is_file = False
        self.requests = 0  # ranges fetched (what a test of laziness counts)
        self.lazy: dict[str, int] = {}  # lazy remote files not fetched yet -> size
        self.refused: list[str] = []  # object keys that would land outside the mirror

    @property
    def local(self) -> Path:
        """The path readers open: the mirrored folder, or the mirrored file."""
        return self.base / Path(self.root).name if self.is_file else self.base

    def _listing(self) -> dict[str, dict[str, Any]]:
        try:
            info = self.fs.info(self.root)
        except FileNotFoundError:
            info = None
        except OSError as exc:
            raise ReadError(f"cannot list ({exc})", path=self.url) from None
        if info is not None and info.get("type") == "file":
            self.is_file = True
            return {self.root: info}
        try:
            found = self.fs.find(self.root, detail=True)
        except OSError as exc:
            raise ReadError(f"cannot list ({exc})", path=self.url) from None
        if not found:
            raise UnknownFormatError("no such file or folder in the bucket", path=self.url)
        return {p: i for p, i in found.items() if i.get("type", "file") == "file"}

    def _local_of(self, remote: str) -> Path:
        """The mirror's path for an object key; ReadError for a key that would land outside
        the mirror (``..``, ``.``, empty or absolute segments, a backslash, a NUL)."""
        if self.is_file:
            rel = remote.rsplit("/", 1)[-1]
        elif remote.startswith(self.root + "/"):
            rel = remote[len(self.root) + 1 :]
        else:
            rel = ""
        parts = rel.split("/")
        if not rel or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
            raise ReadError("object key outside the run's folder; not mirrored", path=remote)
        local = self.base.joinpath(*parts)
        base = os.path.abspath(self.base)
        if os.path.commonpath([base, os.path.abspath(local)]) != base:
            raise ReadError("object key outside the run's folder; not mirrored", path=remote)
        return local

    def _is_lazy(self, remote: str) -> bool:
        rel = remote[len(self.root) :].lstrip("/")
        return not self.is_file and rel.split("/", 1)[0] in _LAZY_DIRS

    def sync(self) -> bool:
        """Bring the mirror up to date; True if anything changed. Lazy files are listed,
        not fetched."""
        changed = False
        listing = self._listing()
        for remote, info in sorted(listing.items()):
            try:
                self._local_of(remote)
            except ReadError:
                if remote not in self.refused:
                    self.refused.append(remote)
                continue
            size = int(info.get("size") or 0)
            tag = (
                info.get("ETag")
                or info.get("etag")
                or info.get("mtime")
                or info.get("LastModified")
            )
            old = self._seen.get(remote)
            if old is not None and old == (size, tag):
                continue
            if self._is_lazy(remote):
                self.lazy[remote] = size
                local = self._local_of(remote)
                if local.exists():
                    local.unlink()  # a newer remote copy: fetch again when asked
                self._seen[remote] = (size, tag)
                changed = True
                continue
            self._fetch(remote, size, grown=old is not None and size > old[0])
            self._seen[remote] = (size, tag)
            changed = True
        return changed

    def _fetch(self, remote: str, size: int, *, grown: bool) -> None:
        local = self._local_of(remote)
        local.parent.mkdir(parents=True, exist_ok=True)
        have = local.stat().st_size if grown and local.exists() else 0
        if have > size:
            have = 0
        mode = "ab" if have else "wb"
        try:
            with open(local, mode) as out:
                pos = have
                while pos < size:
                    end = min(size, pos + _CHUNK)
                    out.write(self.fs.cat_file(remote, start=pos, end=end))
                    self.requests += 1
                    pos = end
        except OSError as exc:
            raise ReadError(f"cannot fetch ({exc})", path=f"{self.url}: {remote}") from None

    def fetch_lazy(self, local: Path) -> bool:
        """Fetch a lazy file (a transcript) now if it has not been; False if there is none."""
        rel = local.relative_to(self.base).as_posix()
        remote = f"{self.root}/{rel}"
        size = self.lazy.pop(remote, None)
        if size is None:
            return local.exists()
        self._fetch(remote, size, grown=False)
        return True

    def lazy_under(self, rel_dir: str) -> list[str]:
        """The names of the lazy files in a folder of the run, fetched or not."""
        prefix = f"{self.root}/{rel_dir.strip('/')}/"
        names = {p[len(prefix) :] for p in self._seen if p.startswith(prefix)}
        return sorted(n for n in names if "/" not in n)


class RemoteTranscripts(TranscriptStore):
    """The run's transcripts in the bucket: each step's file fetched when first read."""

    def __init__(self, mirror: Mirror, warn: Any = None) -> None:
        super().__init__(mirror.local, warn=warn)
        self.mirror = mirror

    @property
    def exists(self) -> bool:
        return bool(self.mirror.lazy_under("transcripts")) or self.dir.is_dir()

    def steps(self, refresh: bool = False) -> list[int]:
        if self._steps is None or refresh:
            out = []
            for name in self.mirror.lazy_under("transcripts"):
                m = re.match(r"^step-(\d+)\.json$", name)
                if m:
                    out.append(int(m.group(1)))
            self._steps = sorted(out)
        return self._steps

    def path(self, step: int) -> Path:
        p = super().path(step)
        if not p.exists():
            try:
                self.mirror.fetch_lazy(p)
            except ReadError as exc:
                self.warn(p, str(exc))
        return p

    def iter_step(self, step: int) -> Iterator[TranscriptAttempt]:
        self.path(step)
        yield from super().iter_step(step)


class RemoteReader:
    """A reader of a run in object storage: sync the mirror, then the local reader polls."""

    def __init__(self, mirror: Mirror, inner: Any) -> None:
        self.mirror = mirror
        self.inner = inner
        self.name = inner.name
        self.run: RunData = inner.run
        self.run.source = mirror.url
        if not mirror.is_file:
            self.run.transcripts = RemoteTranscripts(mirror, warn=None)
        self._refused_warned = 0

    def poll(self) -> bool:
        changed = self.mirror.sync()
        for key in self.mirror.refused[self._refused_warned :]:
            self.run.warnings.append(
                f"{self.mirror.url}: object {_shown(key)!r} names a path outside the run's"
                " folder (.., . or an empty segment); not read"
            )
        self._refused_warned = len(self.mirror.refused)
        return self.inner.poll() or changed

    def finish(self) -> None:
        finish = getattr(self.inner, "finish", None)
        if finish is not None:
            finish()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _shown(key: str) -> str:
    return key if len(key) <= 120 else key[:60] + "..." + key[-40:]


def open_remote(url: str, open_local: Any, **kwargs: Any) -> RemoteReader:
    """A RemoteReader for ``url``: the mirror synced once, the local reader opened on it with
    ``open_local(path, **kwargs)`` (``readers.open_reader``)."""
    mirror = Mirror(str(url))
    mirror.sync()
    inner = open_local(mirror.local, **kwargs)
    reader = RemoteReader(mirror, inner)
    inner.run.source = mirror.url
    return reader


_RUN_MARKERS = ("run.json", "steps.jsonl", "trainer_state.json")
_LOG = re.compile(r"\.(jsonl|json|csv|log|txt|out)$")


def remote_runs(url: str) -> list[str]:
    """The runs under a URL: the folders holding a run's marker file (``run.json``,
    ``steps.jsonl``, ``trainer_state.json``, TensorBoard events), else its log files; the URL
    itself when it is one run or one file."""
    fs, root = _filesystem(url)
    scheme = url.split("://", 1)[0]
    try:
        info = fs.info(root)
    except FileNotFoundError:
        raise UnknownFormatError("no such file or folder in the bucket", path=url) from None
    if info.get("type") == "file":
        return [url]
    files = [p for p, i in fs.find(root, detail=True).items() if i.get("type", "file") == "file"]
    dirs = set()
    for p in files:
        d, name = p.rsplit("/", 1)
        if name in _RUN_MARKERS or "tfevents" in name:
            dirs.add(d)
    runs = sorted(dirs)
    # a run folder holds its own sub-folders: keep the outermost
    runs = [d for d in runs if not any(d != o and d.startswith(o + "/") for o in runs)]
    if not runs:
        runs = sorted(p for p in files if _LOG.search(p))
    if not runs:
        raise UnknownFormatError("no run found under this URL", path=url)
    return [f"{scheme}://{p}" for p in runs]
