"""The persistence model of the lazy file system: what a power loss keeps, as pure bookkeeping.

The volatile state is the backing directory itself (what the runtime sees through the mount);
this module keeps only what is needed to take it back to the durable state, the way ALICE's
abstract model (Pillai et al., OSDI '14) and LazyFS (Ramos et al., EuroSys '24) define it:

* a file's bytes become durable at fsync/fdatasync of that file; until then every write,
  truncate and O_APPEND write is volatile. The model keeps an undo log (the durable bytes a
  write or truncate destroyed, saved once) and a redo log (each unsynced write, for the torn
  variants); both live in one log file the daemon owns, the model holds only offsets into it;
* a directory's entries become durable at fsync of that directory, and only then; a rename is
  atomic in the volatile state and reverts until each side's directory is synced;
* what the mount held at start (or after the last drop) is durable. Directories are learnt
  lazily: before the first change in a directory the daemon hands the model its listing (and
  that of every ancestor), so a mount over a large tree costs nothing until it is changed.

File identity is the backing inode's number. No I/O happens here: the daemon passes listings
and sizes in, and executes the ``DropPlan`` a drop returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

FILE, DIR, SYMLINK, OTHER = "file", "dir", "symlink", "other"
HOLE = -1  # the log_at of saved durable bytes that were a hole: zeros, never copied to the log
VARIANTS = ("plain", "op", "seq")


@dataclass(frozen=True)
class Node:
    """One directory entry's target: its kind, inode number, and what recreating it needs."""

    kind: str
    id: int
    mode: int = 0o755
    uid: int = 0
    gid: int = 0
    target: str = ""  # a symlink's target


Listing = Callable[[str], dict[str, Node]]  # a directory's path (relative, "" = root) -> its entries now


@dataclass(frozen=True)
class Write:
    """One unsynced write: where it landed, and where its bytes sit in the daemon's log."""

    seq: int
    offset: int
    length: int
    log_at: int


@dataclass
class _Data:
    """A file's data since its last fsync: its sizes, the durable bytes overwritten, the writes."""

    size: int
    durable_size: int
    ever_synced: bool = False
    created: bool = False  # created through the mount since the last drop: no other name can hold it
    saved: list[tuple[int, int, int]] = field(default_factory=list)  # (start, end, log_at or HOLE), sorted, disjoint
    writes: list[Write] = field(default_factory=list)

    @property
    def dirty(self) -> bool:
        return bool(self.saved or self.writes) or self.size != self.durable_size


@dataclass(frozen=True)
class Restore:
    """Take one inode's bytes back to the durable state, then apply what a torn variant keeps."""

    id: int
    source: str | None  # a current path of the inode, None: it is in the graveyard
    pieces: tuple[tuple[int, int, int], ...]  # (start, end, log_at or HOLE): durable bytes to write back
    size: int  # the durable size (before the kept writes)
    kept: tuple[tuple[int, int, int], ...]  # (offset, length, log_at), in order


@dataclass(frozen=True)
class Place:
    """Put one durable entry at ``path`` in the rebuilt tree (parents always come first)."""

    path: str
    node: Node
    source: str | None  # a current path of the node (None: gone; a file then is in the graveyard)
    move: bool  # an untouched directory: move it whole; else make it (files: link from source)


@dataclass(frozen=True)
class DropReport:
    """What a power loss did, per file and per directory entry, for the evidence and the finding."""

    variant: str
    seed: int
    files: tuple[dict, ...]
    entries: tuple[dict, ...]
    unsynced_writes: int
    kept_writes: int
    problems: tuple[str, ...] = ()  # what the drop met and could not restore safely (it follows nothing)

    def to_json(self) -> dict:
        return {
            "variant": self.variant,
            "seed": self.seed,
            "files": [dict(f) for f in self.files],
            "entries": [dict(e) for e in self.entries],
            "unsynced_writes": self.unsynced_writes,
            "kept_writes": self.kept_writes,
            "problems": list(self.problems),
        }

    @classmethod
    def from_json(cls, data: dict) -> DropReport:
        return cls(
            variant=data["variant"],
            seed=data["seed"],
            files=tuple(data["files"]),
            entries=tuple(data["entries"]),
            unsynced_writes=data["unsynced_writes"],
            kept_writes=data["kept_writes"],
            problems=tuple(data.get("problems", ())),
        )

    def lines(self) -> list[str]:
        out: list[str] = []
        for f in self.files:
            why = "not fsynced since" if f["ever_fsynced"] else "never fsynced"
            out.extend(f"{f['path']}: bytes {start}..{end} dropped ({why})" for start, end in f["dropped"])
            out.extend(f"{f['path']}: bytes {start}..{end} kept by the torn {self.variant} drop" for start, end in f["kept"])
            if f["size_before"] != f["size_after"] and not f["dropped"]:
                out.append(f"{f['path']}: size {f['size_before']} back to {f['size_after']} bytes ({why})")
        out.extend(f"{e['path']}: {e['change']} undone ({e['undone']})" for e in self.entries)
        out.extend(self.problems)
        return [_printable(line) for line in out] or ["nothing was lost: every write and directory change was durable"]

    @property
    def lost_anything(self) -> bool:
        return bool(self.entries or self.problems) or any(f["dropped"] or f["size_before"] != f["size_after"] for f in self.files)


@dataclass(frozen=True)
class DropPlan:
    """What the daemon does to the backing directory: restore bytes first, then rebuild the tree."""

    restores: tuple[Restore, ...]
    places: tuple[Place, ...]
    report: DropReport


def _printable(text: str) -> str:
    """``text`` with every control character, backslash and lone surrogate escaped (\\n, \\xNN, \\uNNNN).

    The paths in a report are the workload's names: a newline in one would forge a report line, and
    a name that is not UTF-8 arrives as lone surrogates (surrogateescape), which no printer takes.
    """
    out = []
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")  # the byte the name held
        elif char == "\\" or not char.isprintable():  # a lone surrogate is not printable either
            out.append(char.encode("unicode_escape").decode("ascii"))
        else:
            out.append(char)
    return "".join(out)


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


def _merge(ranges: list[tuple[int, int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def _minus(start: int, end: int, taken: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """The parts of [start, end) not covered by ``taken`` (sorted, disjoint)."""
    out: list[tuple[int, int]] = []
    at = start
    for t_start, t_end, _ in taken:
        if t_end <= at or t_start >= end:
            continue
        if t_start > at:
            out.append((at, t_start))
        at = max(at, t_end)
    if at < end:
        out.append((at, end))
    return out


class PersistenceModel:
    """The durable state of one mount, kept as the difference from the volatile backing directory."""

    def __init__(self, root_id: int, listing: Listing) -> None:
        self._listing = listing
        self.root_id = root_id
        self._volatile: dict[int, dict[str, Node]] = {}  # per learnt directory: its entries now
        self._durable: dict[int, dict[str, Node]] = {}  # per learnt directory: its entries as last synced
        self._names: dict[int, tuple[int, str]] = {}  # directory -> (parent, name), last known
        self._synced_dirs: set[int] = set()
        self._data: dict[int, _Data] = {}
        self._origin: dict[tuple[int, str], str] = {}  # volatile entry -> how it got there
        self._gone: dict[tuple[int, str], str] = {}  # vanished entry -> what removed it
        self._graveyard: set[int] = set()
        self._seq = 0

    # ---- learning directories
    def _learn(self, dir_id: int, path: str) -> None:
        if dir_id not in self._volatile:
            entries = self._listing(path)
            self._volatile[dir_id] = dict(entries)
            self._durable[dir_id] = dict(entries)
            for name, node in entries.items():
                if node.kind == DIR:
                    self._names.setdefault(node.id, (dir_id, name))

    def learn(self, dir_path: str) -> int:
        """Learn the directory at ``dir_path`` and its ancestors (call before changing it); return its id."""
        return self._resolve(dir_path, learning=True)

    def _resolve(self, dir_path: str, learning: bool = False) -> int:
        dir_id, path = self.root_id, ""
        if learning:
            self._learn(dir_id, path)
        for name in filter(None, dir_path.split("/")):
            if dir_id not in self._volatile:
                raise RuntimeError(f"{path or '.'}/ changed before it was learnt")
            node = self._volatile[dir_id].get(name)
            if node is None or node.kind != DIR:
                raise FileNotFoundError(dir_path)
            dir_id, path = node.id, _join(path, name)
            if learning:
                self._learn(dir_id, path)
        if dir_id not in self._volatile:
            raise RuntimeError(f"{path or '.'}/ changed before it was learnt")
        return dir_id

    def _split(self, path: str) -> tuple[int, str]:
        """The parent directory of ``path`` (learnt before the change) and its last name."""
        parent, _, name = path.rpartition("/")
        return self._resolve(parent), name

    def _dir_path(self, dir_id: int) -> str:
        parts = []
        while dir_id != self.root_id and dir_id in self._names:
            dir_id, name = self._names[dir_id]
            parts.append(name)
        return "/".join(reversed(parts))

    def _walk(self, tree: dict[int, dict[str, Node]], problems: list[str] | None = None) -> Iterator[tuple[str, Node]]:
        """Every entry of ``tree`` (the volatile or the durable entries) reachable from the root, parents
        first; learnt directories are walked into, the others stand for themselves and all they hold.

        A directory is yielded once: the durable entries of directories synced between unsynced renames
        can name one directory twice, even inside itself (a/b -> b, a -> b/a, fsync b), and a walk that
        followed that would never end. Each later name is left out and said in ``problems``.
        """
        seen = {self.root_id: "."}
        todo = [(self.root_id, "")]
        while todo:
            dir_id, dir_path = todo.pop()
            for name, node in sorted(tree[dir_id].items()):
                path = _join(dir_path, name)
                if node.kind == DIR:
                    if node.id in seen:
                        if problems is not None:
                            problems.append(f"{path}: not restored (the directory is {seen[node.id]} already: the durable entries name it twice)")
                        continue
                    seen[node.id] = path
                yield path, node
                if node.kind == DIR and node.id in self._volatile:
                    todo.append((node.id, path))

    def _volatile_paths(self) -> dict[int, str]:
        """A current path of every inode the learnt directories name."""
        paths: dict[int, str] = {}
        for path, node in self._walk(self._volatile):
            paths.setdefault(node.id, path)
        return paths

    # ---- directory changes (call after the change succeeded on the backing directory)
    def created(self, path: str, node: Node, change: str = "create") -> None:
        dir_id, name = self._split(path)
        self._volatile[dir_id][name] = node
        self._origin[(dir_id, name)] = change
        if node.kind == DIR:
            self._forget_changes_in(node.id)  # a new directory may reuse a removed one's inode: nothing of it carries over
            self._names[node.id] = (dir_id, name)
            self._volatile[node.id], self._durable[node.id] = {}, {}
        elif node.kind == FILE and change != "link":
            self._data[node.id] = _Data(size=0, durable_size=0, created=True)

    def _forget_changes_in(self, dir_id: int) -> None:
        self._synced_dirs.discard(dir_id)
        for key in [k for k in (*self._origin, *self._gone) if k[0] == dir_id]:
            self._origin.pop(key, None)
            self._gone.pop(key, None)

    def keep_on_unlink(self, path: str) -> int | None:
        """The inode to preserve in the graveyard before ``path``'s unlink, or None to let it go."""
        dir_id, name = self._split(path)
        node = self._volatile[dir_id].get(name)
        if node is None or node.kind != FILE:
            return None
        others = sum(n.id == node.id for e in self._volatile.values() for n in e.values()) - 1
        data = self._data.get(node.id)
        needed = (data is not None and not data.created) or any(n.id == node.id for e in self._durable.values() for n in e.values())
        return node.id if needed and not others and node.id not in self._graveyard else None

    def buried(self, node_id: int) -> None:
        """The daemon linked the inode into the graveyard."""
        self._graveyard.add(node_id)

    def removed(self, path: str, change: str = "unlink") -> None:
        dir_id, name = self._split(path)
        node = self._volatile[dir_id].pop(name, None)
        self._origin.pop((dir_id, name), None)
        self._gone.setdefault((dir_id, name), change)
        if node is None or node.kind != FILE or node.id in self._graveyard:
            return
        if not any(n.id == node.id for e in self._volatile.values() for n in e.values()):
            self._data.pop(node.id, None)  # its last name is gone and nothing durable needs it

    def renamed(self, old: str, new: str) -> None:
        """``old`` was renamed to ``new`` (when ``new`` existed, report its removal first)."""
        src_dir, src_name = self._split(old)
        dst_dir, dst_name = self._split(new)
        node = self._volatile[src_dir].pop(src_name)
        self._origin.pop((src_dir, src_name), None)
        self._gone.setdefault((src_dir, src_name), f"rename to {new}")
        self._volatile[dst_dir][dst_name] = node
        self._origin[(dst_dir, dst_name)] = f"rename from {old}"
        if node.kind == DIR:
            self._names[node.id] = (dst_dir, dst_name)

    def fsyncdir(self, path: str) -> list[int]:
        """The directory's entries are durable now; return graveyard inodes no longer needed."""
        dir_id = self.learn(path)
        self._durable[dir_id] = dict(self._volatile[dir_id])
        self._forget_changes_in(dir_id)
        self._synced_dirs.add(dir_id)
        linked = {n.id for e in self._durable.values() for n in e.values()}
        freed = sorted(i for i in self._graveyard if i not in linked)
        for node_id in freed:
            self._graveyard.discard(node_id)
            self._data.pop(node_id, None)
        return freed

    # ---- file data
    def _file(self, node_id: int, size: int) -> _Data:
        return self._data.setdefault(node_id, _Data(size=size, durable_size=size))

    def knows(self, node_id: int) -> bool:
        return node_id in self._data

    def touch(self, path: str | None, node_id: int, size: int) -> None:
        """Before the first data change of a file: learn its directory (None: it is unlinked), and its size."""
        if path is not None:
            self.learn(path.rpartition("/")[0])
        self._file(node_id, size)

    def to_save(self, node_id: int, start: int, end: int) -> list[tuple[int, int]]:
        """The durable bytes in [start, end) a change is about to destroy and not yet saved."""
        data = self._data[node_id]
        return _minus(start, min(end, data.durable_size), data.saved) if start < data.durable_size else []

    def saved(self, node_id: int, start: int, end: int, log_at: int) -> None:
        data = self._data[node_id]
        data.saved.append((start, end, log_at))
        data.saved.sort()

    def wrote(self, node_id: int, offset: int, length: int, log_at: int) -> None:
        data = self._data[node_id]
        self._seq += 1
        data.writes.append(Write(self._seq, offset, length, log_at))
        data.size = max(data.size, offset + length)

    def truncated(self, node_id: int, size: int) -> None:
        self._data[node_id].size = size

    def size(self, node_id: int) -> int:
        return self._data[node_id].size

    def fsync(self, node_id: int) -> None:
        data = self._data.get(node_id)
        if data is not None:
            data.durable_size, data.saved, data.writes, data.ever_synced = data.size, [], [], True

    # ---- the power loss
    def drop(self, variant: str = "plain", seed: int = 0) -> DropPlan:
        """What the backing directory must become: the durable state, plus a torn variant's bytes."""
        if variant not in VARIANTS:
            raise ValueError(f"unknown drop variant {variant!r}: use one of {', '.join(VARIANTS)}")
        import random  # here, not at the top: the daemon's start-up imports as little as it can

        self.learn("")
        where = self._volatile_paths()
        problems: list[str] = []
        places, durable_paths = self._durable_tree(where, problems)
        dirty = {i: d for i, d in self._data.items() if d.dirty}
        kept = self._torn(variant, random.Random(seed), {i: d for i, d in dirty.items() if i in durable_paths})
        restores, files = [], []
        for node_id, data in sorted(dirty.items()):
            survives = node_id in durable_paths
            now = where.get(node_id)
            keep = kept.get(node_id, ())
            buried = node_id in self._graveyard
            # a file there before may also have names in directories never learnt: restore it whenever it is found
            if (survives or not data.created) and (buried or now is not None):
                restores.append(Restore(node_id, None if buried else now, tuple(data.saved), data.durable_size, keep))
            if not survives and now is None:
                continue  # unlinked by the runtime itself: nothing it could see is lost
            kept_ranges = [(offset, offset + length) for offset, length, _ in keep]
            files.append(
                {
                    "path": durable_paths.get(node_id) or now,
                    "size_before": data.size,
                    "size_after": max([data.durable_size, *(e for _, e in kept_ranges)]) if survives else 0,
                    "dropped": _drop_ranges(data, kept_ranges, survives),
                    "kept": _merge(kept_ranges),
                    "ever_fsynced": data.ever_synced,
                }
            )
        report = DropReport(
            variant=variant,
            seed=seed,
            files=tuple(sorted(files, key=lambda f: f["path"])),  # by path: inode numbers differ between a run and its repro
            entries=tuple(sorted(self._undone_entries({p.node.id for p in places} | set(where)), key=lambda e: e["path"])),
            unsynced_writes=sum(len(d.writes) for d in dirty.values()),
            kept_writes=sum(len(k) for k in kept.values()),
            problems=tuple(problems),
        )
        return DropPlan(tuple(restores), tuple(places), report)

    def _durable_tree(self, where: dict[int, str], problems: list[str]) -> tuple[list[Place], dict[int, str]]:
        places: list[Place] = []
        paths: dict[int, str] = {}
        for path, node in self._walk(self._durable, problems):
            source = where.get(node.id) if node.kind in (FILE, DIR) else None
            untouched = node.kind == DIR and node.id not in self._volatile
            places.append(Place(path, node, source, move=untouched and source is not None))
            if node.kind == FILE:
                paths.setdefault(node.id, path)
        return places, paths

    def _torn(self, variant: str, rng: random.Random, candidates: dict[int, _Data]) -> dict[int, tuple]:
        writes = [(w, i) for i, d in candidates.items() for w in d.writes if w.length]
        if variant == "plain" or not writes:
            return {}
        last, node_id = max(writes, key=lambda pair: pair[0].seq)
        if variant == "op":
            prefix = rng.randrange(last.length)  # 0 <= prefix < length: a torn write, never the whole
            chosen = [replace(last, length=prefix)] if prefix else []
        else:
            own = sorted((w for w in candidates[node_id].writes if w.length), key=lambda w: w.seq)
            chosen = own
            while len(own) >= 2 and len(chosen) in (0, len(own)):
                chosen = [w for w in own if rng.random() < 0.5]
        kept = _without_holes(chosen, candidates[node_id].durable_size)
        return {node_id: tuple((w.offset, w.length, w.log_at) for w in kept)} if kept else {}

    def _undone_entries(self, reachable: set[int]) -> list[dict]:
        """The entry changes a drop undoes, in the directories either tree still reaches (``reachable``:
        their ids; a directory removed with its parent, synced or not, has nothing left to report)."""
        out = []
        for dir_id in sorted(self._volatile):
            if dir_id != self.root_id and dir_id not in reachable:
                continue
            dir_path = self._dir_path(dir_id)
            why = f"{dir_path or '.'}/ " + ("not fsynced since" if dir_id in self._synced_dirs else "never fsynced")
            now, durable = self._volatile[dir_id], self._durable[dir_id]
            for name in sorted(set(now) | set(durable)):
                if now.get(name) == durable.get(name):
                    continue
                path = _join(dir_path, name)
                if name in now:
                    out.append({"path": path, "change": self._origin.get((dir_id, name), "change"), "undone": why})
                else:
                    out.append({"path": path, "change": self._gone.get((dir_id, name), "unlink"), "undone": why})
        return out


def _without_holes(chosen: list[Write], durable_size: int) -> list[Write]:
    """The chosen writes (in order) a real disk could show after the power loss.

    Below the durable size any subset may land (an overwrite in place), but past it only a run
    growing from the durable end: ext4 (data=ordered) never shows a hole of zeros past the old end
    of a file, and the journal rule reads a newline-terminated line as written whole. So a write
    that would leave such a hole is not kept, and neither is any later one past the durable end.
    """
    out, end, holed = [], durable_size, False
    for write in chosen:
        if write.offset + write.length > durable_size:
            if holed or write.offset > end:
                holed = True
                continue
            end = max(end, write.offset + write.length)
        out.append(write)
    return out


def _drop_ranges(data: _Data, kept: list[tuple[int, int]], survives: bool) -> list[list[int]]:
    written = [(w.offset, w.offset + w.length) for w in data.writes]
    if not survives:
        return _merge(written)
    lost = []
    for start, end in _merge(written):
        lost.extend(_minus(start, end, sorted((s, e, 0) for s, e in kept)))
    return [list(r) for r in lost]
