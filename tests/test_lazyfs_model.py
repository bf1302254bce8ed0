"""The lazy file system's persistence model, driven by an in-memory file system that plays the daemon.

``MemFS`` does to a dict tree what the daemon does to the backing directory (learn a directory
before changing it, save durable bytes before destroying them, bury an unlinked durable file),
executes the drop plan the same way, and keeps an independent oracle: a full copy of each file
at its fsync and of each directory at its fsync. After a drop the tree must equal the oracle.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from killpoint.harness.faults.lazyfs.model import DIR, FILE, HOLE, DropReport, Node, PersistenceModel

ROOT = 1


class MemFS:
    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self._ids = itertools.count(ROOT + 1)
        self.dirs: dict[int, dict[str, int]] = {ROOT: {}}
        self.data: dict[int, bytearray] = {}
        self.graveyard: set[int] = set()
        self.log = bytearray()
        for path, content in (files or {}).items():
            parent = self._mkdirs(path.rpartition("/")[0])
            self.dirs[parent][path.rpartition("/")[2]] = node_id = next(self._ids)
            self.data[node_id] = bytearray(content)
        self._reset()

    def _mkdirs(self, path: str) -> int:
        dir_id = ROOT
        for name in filter(None, path.split("/")):
            if name not in self.dirs[dir_id]:
                self.dirs[dir_id][name] = new = next(self._ids)
                self.dirs[new] = {}
            dir_id = self.dirs[dir_id][name]
        return dir_id

    def _reset(self) -> None:
        self.model = PersistenceModel(ROOT, self._listing)
        self.graveyard.clear()
        self.log.clear()
        self.oracle_dirs = {d: dict(e) for d, e in self.dirs.items()}
        self.oracle_data = {i: bytes(b) for i, b in self.data.items()}

    def _node(self, node_id: int) -> Node:
        return Node(DIR if node_id in self.dirs else FILE, node_id)

    def _listing(self, path: str) -> dict[str, Node]:
        return {name: self._node(i) for name, i in self.dirs[self.lookup(path)].items()}

    def lookup(self, path: str) -> int:
        node_id = ROOT
        for name in filter(None, path.split("/")):
            node_id = self.dirs[node_id][name]
        return node_id

    def _parent(self, path: str) -> tuple[int, str]:
        parent, _, name = path.rpartition("/")
        self.model.learn(parent)
        return self.lookup(parent), name

    def paths(self, kind: str) -> list[str]:
        out, todo = [], [(ROOT, "")]
        while todo:
            dir_id, prefix = todo.pop()
            for name, node_id in sorted(self.dirs[dir_id].items()):
                path = f"{prefix}/{name}" if prefix else name
                if node_id in self.dirs:
                    todo.append((node_id, path))
                if (node_id in self.dirs) == (kind == DIR):
                    out.append(path)
        return sorted(out)

    # ---- data
    def _save(self, node_id: int, start: int, end: int) -> None:
        for s, e in self.model.to_save(node_id, start, end):
            self.model.saved(node_id, s, e, len(self.log))
            self.log += self.data[node_id][s:e]

    def write(self, path: str, offset: int, payload: bytes, *, dsync: bool = False) -> None:
        node_id = self.lookup(path)
        self.model.touch(path, node_id, len(self.data[node_id]))
        self._save(node_id, offset, offset + len(payload))
        content = self.data[node_id]
        content.extend(bytes(max(0, offset - len(content))))
        content[offset : offset + len(payload)] = payload
        self.model.wrote(node_id, offset, len(payload), len(self.log))
        self.log += payload
        if dsync:
            self.fsync(path)

    def append(self, path: str, payload: bytes) -> None:
        self.write(path, len(self.data[self.lookup(path)]), payload)

    def truncate(self, path: str, size: int) -> None:
        node_id = self.lookup(path)
        self.model.touch(path, node_id, len(self.data[node_id]))
        self._save(node_id, size, len(self.data[node_id]))
        content = self.data[node_id]
        del content[size:]
        content.extend(bytes(size - len(content)))
        self.model.truncated(node_id, size)

    def fsync(self, path: str) -> None:
        node_id = self.lookup(path)
        self.model.fsync(node_id)
        self.oracle_data[node_id] = bytes(self.data[node_id])

    def fsyncdir(self, path: str) -> None:
        self.graveyard.difference_update(self.model.fsyncdir(path))
        dir_id = self.lookup(path)
        self.oracle_dirs[dir_id] = dict(self.dirs[dir_id])

    # ---- directory changes
    def create(self, path: str) -> None:
        dir_id, name = self._parent(path)
        self.dirs[dir_id][name] = node_id = next(self._ids)
        self.data[node_id] = bytearray()
        self.oracle_data[node_id] = b""
        self.model.created(path, Node(FILE, node_id))

    def mkdir(self, path: str) -> None:
        dir_id, name = self._parent(path)
        self.dirs[dir_id][name] = node_id = next(self._ids)
        self.dirs[node_id] = {}
        self.oracle_dirs[node_id] = {}
        self.model.created(path, Node(DIR, node_id), "mkdir")

    def link(self, old: str, new: str) -> None:
        self._parent(old)
        dir_id, name = self._parent(new)
        self.dirs[dir_id][name] = self.lookup(old)
        self.model.created(new, Node(FILE, self.lookup(old)), "link")

    def _unlink(self, path: str, change: str) -> None:
        dir_id, name = self._parent(path)
        buried = self.model.keep_on_unlink(path)
        if buried is not None:
            self.graveyard.add(buried)
            self.model.buried(buried)
        del self.dirs[dir_id][name]
        self.model.removed(path, change)

    def unlink(self, path: str) -> None:
        self._unlink(path, "unlink")

    def rename(self, old: str, new: str) -> None:
        src_dir, src_name = self._parent(old)
        dst_dir, dst_name = self._parent(new)
        if dst_name in self.dirs[dst_dir]:
            self._unlink(new, f"replaced by {old}")
        self.dirs[dst_dir][dst_name] = self.dirs[src_dir].pop(src_name)
        self.model.renamed(old, new)

    # ---- the power loss, executed as the daemon does
    def drop(self, variant: str = "plain", seed: int = 0) -> DropReport:
        plan = self.model.drop(variant, seed)
        for restore in plan.restores:
            content = self.data[restore.id]
            for start, end, at in restore.pieces:
                content.extend(bytes(max(0, end - len(content))))
                content[start:end] = bytes(end - start) if at == HOLE else self.log[at : at + end - start]
            del content[restore.size :]
            content.extend(bytes(restore.size - len(content)))
            for offset, length, at in restore.kept:
                content.extend(bytes(max(0, offset + length - len(content))))
                content[offset : offset + length] = self.log[at : at + length]
        new_root = next(self._ids)
        rebuilt: dict[int, dict[str, int]] = {new_root: {}}
        where = {"": new_root}
        for place in plan.places:
            parent, _, name = place.path.rpartition("/")
            if place.node.kind == DIR:
                node_id = place.node.id if place.move else next(self._ids)
                rebuilt.setdefault(node_id, {})
                if place.move:
                    rebuilt.update(self._subtree(node_id))
                where[place.path] = node_id
            else:
                node_id = place.node.id
            rebuilt[where[parent]][name] = node_id
        self.dirs = rebuilt
        self.dirs[ROOT] = self.dirs.pop(new_root)
        for path, node_id in list(where.items()):
            if node_id == new_root:
                where[path] = ROOT
        self._reset()
        return plan.report

    def _subtree(self, dir_id: int) -> dict[int, dict[str, int]]:
        out = {dir_id: dict(self.dirs[dir_id])}
        for child in self.dirs[dir_id].values():
            if child in self.dirs:
                out.update(self._subtree(child))
        return out

    def tree(self) -> dict[str, bytes | None]:
        """Every path: a file's bytes, or None for a directory."""
        return self._tree(self.dirs, self.data)

    def expected(self) -> dict[str, bytes | None]:
        return self._tree(self.oracle_dirs, self.oracle_data)

    @staticmethod
    def _tree(dirs: dict[int, dict[str, int]], data: dict) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        todo = [(ROOT, "")]
        while todo:
            dir_id, prefix = todo.pop()
            for name, node_id in dirs[dir_id].items():
                path = f"{prefix}/{name}" if prefix else name
                if node_id in dirs:
                    out[path] = None
                    todo.append((node_id, path))
                else:
                    out[path] = bytes(data[node_id])
        return out


def test_fsynced_bytes_are_kept_and_an_append_without_fsync_is_lost() -> None:
    fs = MemFS({"journal.jsonl": b"started\n"})
    fs.append("journal.jsonl", b"finished\n")
    fs.fsync("journal.jsonl")
    fs.append("journal.jsonl", b"next\n")
    report = fs.drop()
    assert fs.tree() == {"journal.jsonl": b"started\nfinished\n"}
    assert report.files[0]["dropped"] == [[17, 22]]
    assert report.lines() == ["journal.jsonl: bytes 17..22 dropped (not fsynced since)"]
    assert report.unsynced_writes == 1 and report.lost_anything


def test_an_overwrite_of_durable_bytes_is_undone() -> None:
    fs = MemFS({"f": b"aaaaaaaa"})
    fs.write("f", 2, b"XX")
    fs.write("f", 1, b"YYYY")
    fs.drop()
    assert fs.tree() == {"f": b"aaaaaaaa"}


def test_a_truncate_without_fsync_is_undone() -> None:
    fs = MemFS({"f": b"0123456789"})
    fs.truncate("f", 3)
    fs.write("f", 6, b"zz")
    report = fs.drop()
    assert fs.tree() == {"f": b"0123456789"}
    assert report.files[0]["size_before"] == 8 and report.files[0]["size_after"] == 10


def test_a_new_file_without_a_directory_fsync_is_gone_even_when_its_data_was_fsynced() -> None:
    fs = MemFS()
    fs.create("journal.jsonl")
    fs.append("journal.jsonl", b"started\n")
    fs.fsync("journal.jsonl")
    report = fs.drop()
    assert fs.tree() == {}
    assert report.entries == ({"path": "journal.jsonl", "change": "create", "undone": "./ never fsynced"},)


def test_a_new_file_with_a_directory_fsync_keeps_only_its_fsynced_data() -> None:
    fs = MemFS()
    fs.create("journal.jsonl")
    fs.fsyncdir("")
    fs.append("journal.jsonl", b"started\n")
    fs.fsync("journal.jsonl")
    fs.append("journal.jsonl", b"finished\n")
    report = fs.drop()
    assert fs.tree() == {"journal.jsonl": b"started\n"}
    assert not report.entries


def _replace_by_rename() -> MemFS:
    """The task store's checkpoint: write a temp file, fsync it, rename it over the old one."""
    fs = MemFS({"tasks/t1.json": b"old"})
    fs.create("tasks/.t1.tmp")
    fs.append("tasks/.t1.tmp", b"new")
    fs.fsync("tasks/.t1.tmp")
    fs.rename("tasks/.t1.tmp", "tasks/t1.json")
    return fs


def test_a_rename_without_a_directory_fsync_is_reverted() -> None:
    fs = _replace_by_rename()
    report = fs.drop()
    assert fs.tree() == {"tasks": None, "tasks/t1.json": b"old"}
    assert "tasks/t1.json: rename from tasks/.t1.tmp undone (tasks/ never fsynced)" in report.lines()


def test_a_rename_with_a_directory_fsync_is_durable() -> None:
    fs = _replace_by_rename()
    fs.fsyncdir("tasks")
    assert not fs.drop().lost_anything
    assert fs.tree() == {"tasks": None, "tasks/t1.json": b"new"}


def test_an_unlink_without_a_directory_fsync_is_restored_with_its_durable_bytes() -> None:
    fs = MemFS({"a": b"durable"})
    fs.append("a", b" volatile")
    fs.unlink("a")
    fs.drop()
    assert fs.tree() == {"a": b"durable"}


def test_an_o_dsync_write_is_kept() -> None:
    fs = MemFS({"log": b""})
    fs.write("log", 0, b"synced", dsync=True)
    assert not fs.drop().lost_anything
    assert fs.tree() == {"log": b"synced"}


def test_a_new_directory_exists_only_once_its_parent_is_synced() -> None:
    fs = MemFS()
    fs.mkdir("d")
    fs.create("d/f")
    fs.fsyncdir("d")
    fs.drop()
    assert fs.tree() == {}
    fs.mkdir("d")
    fs.create("d/f")
    fs.fsyncdir("d")
    fs.fsyncdir("")
    fs.drop()
    assert fs.tree() == {"d": None, "d/f": b""}


def test_an_untouched_directory_moved_away_comes_back_whole() -> None:
    fs = MemFS({"keep/a": b"1", "keep/sub/b": b"2"})
    fs.rename("keep", "moved")
    fs.drop()
    assert fs.tree() == {"keep": None, "keep/a": b"1", "keep/sub": None, "keep/sub/b": b"2"}


def test_a_hard_link_survives_the_unlink_of_its_other_name() -> None:
    fs = MemFS({"a": b"x"})
    fs.link("a", "b")
    fs.fsyncdir("")
    fs.unlink("a")
    fs.append("b", b"y")
    fs.drop()
    assert fs.tree() == {"a": b"x", "b": b"x"}


def _torn_setup() -> MemFS:
    fs = MemFS({"j": b"base\n"})
    for record in (b"one\n", b"two\n", b"three\n", b"four\n"):
        fs.append("j", record)
    return fs


def test_torn_op_keeps_a_seeded_proper_prefix_of_the_last_write() -> None:
    prefixes = set()
    for seed in range(20):
        fs = MemFS({"j": b"base\n"})
        fs.append("j", b"one\n")
        fs.fsync("j")
        fs.append("j", b"four\n")
        report = fs.drop("op", seed)
        kept = report.files[0]["kept"]
        length = kept[0][1] - kept[0][0] if kept else 0
        assert fs.tree()["j"] == b"base\none\n" + b"four\n"[:length]
        assert report.kept_writes == (1 if length else 0) and report.unsynced_writes == 1
        prefixes.add(length)
    assert prefixes <= set(range(5)) and len(prefixes) > 1, "the seed chooses the prefix"


def test_torn_seq_keeps_a_seeded_proper_subset_of_the_files_writes() -> None:
    kept_counts = set()
    for seed in range(20):
        fs = _torn_setup()
        report = fs.drop("seq", seed)
        assert 0 <= report.kept_writes <= 3 and report.unsynced_writes == 4
        content = fs.tree()["j"]
        assert content is not None and (b"base\none\ntwo\nthree\nfour\n").startswith(content), "only a run from the end"
        kept_counts.add(report.kept_writes)
    assert len(kept_counts) > 1, "the seed chooses the writes"


def test_torn_seq_keeps_any_subset_of_overwrites_in_place() -> None:
    contents = set()
    for seed in range(20):
        fs = MemFS({"f": b"........"})
        for at in range(4):
            fs.write("f", at * 2, b"AB")
        fs.drop("seq", seed)
        contents.add(fs.tree()["f"])
    assert any(c.startswith(b"..") and b"AB" in c for c in contents), "a later overwrite kept without an earlier one"


@pytest.mark.parametrize("variant", ["op", "seq"])
@pytest.mark.parametrize("seed", [7, 499, 500, 501])
def test_a_torn_drop_never_leaves_zeros_past_the_durable_end(variant: str, seed: int) -> None:
    """A skipped append must not become a hole before a kept one: a real disk shows no such zeros."""
    fs = MemFS({"j": b'{"base":1}\n'})
    for n in range(6):
        fs.append("j", b'{"rec":%d,"pad":"%s"}\n' % (n, b"x" * (20 + n * 7)))
    report = fs.drop(variant, seed)
    content = fs.tree()["j"]
    assert content is not None and content.startswith(b'{"base":1}\n') and b"\0" not in content
    kept = report.files[0]["kept"]
    assert kept == ([[11, len(content)]] if len(content) > 11 else []), "the report names what was kept"


@pytest.mark.parametrize("variant", ["plain", "op", "seq"])
def test_the_same_seed_gives_the_same_drop(variant: str) -> None:
    first, second = _torn_setup(), _torn_setup()
    assert first.drop(variant, 3) == second.drop(variant, 3)
    assert first.tree() == second.tree()


def test_a_torn_variant_ignores_writes_to_files_that_do_not_survive() -> None:
    fs = MemFS({"j": b""})
    fs.append("j", b"kept-candidate")
    fs.create("new")
    fs.append("new", b"gone")
    report = fs.drop("op", 1)
    assert fs.tree()["j"] == b"kept-candidate"[: report.files[0]["kept"][0][1]] if report.files[0]["kept"] else b""
    assert "new" not in fs.tree()


def test_an_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown drop variant 'torn'"):
        MemFS().drop("torn")


def test_the_report_round_trips_through_json() -> None:
    fs = _torn_setup()
    report = fs.drop("seq", 1)
    assert DropReport.from_json(report.to_json()) == report


NAMES = st.sampled_from(["a", "b", "c", "d/e", "d/f"])
OPS = st.one_of(
    st.tuples(st.just("write"), NAMES, st.integers(0, 12), st.binary(min_size=1, max_size=6)),
    st.tuples(st.just("append"), NAMES, st.binary(min_size=1, max_size=6)),
    st.tuples(st.just("truncate"), NAMES, st.integers(0, 10)),
    st.tuples(st.just("fsync"), NAMES),
    st.tuples(st.just("fsyncdir"), st.sampled_from(["", "d", "g"])),
    st.tuples(st.just("create"), NAMES),
    st.tuples(st.just("mkdir"), st.sampled_from(["d", "g"])),
    st.tuples(st.just("unlink"), NAMES),
    st.tuples(st.just("rename"), NAMES, NAMES),
    st.tuples(st.just("rename_dir"), st.sampled_from(["d", "g"]), st.sampled_from(["d", "g"])),
    st.tuples(st.just("link"), NAMES, NAMES),
    st.tuples(st.just("drop"),),
)


def _apply(fs: MemFS, op: tuple) -> None:
    """Run ``op`` when it is valid in the current tree (a real file system would refuse the rest)."""
    files, dirs = set(fs.paths(FILE)), set(fs.paths(DIR)) | {""}
    kind, *args = op

    def free(path: str) -> bool:
        return path not in files | dirs and path.rpartition("/")[0] in dirs

    valid = {
        "fsyncdir": lambda: args[0] in dirs,
        "create": lambda: free(args[0]),
        "mkdir": lambda: free(args[0]),
        "rename": lambda: args[0] in files and args[1] not in dirs and args[0] != args[1] and args[1].rpartition("/")[0] in dirs,
        "rename_dir": lambda: args[0] in dirs and free(args[1]),
        "link": lambda: args[0] in files and free(args[1]),
        "drop": lambda: True,
    }.get(kind, lambda: args[0] in files)
    if not valid():
        return
    if kind == "drop":
        fs.drop()
        assert fs.tree() == fs.expected()
    else:
        getattr(fs, "rename" if kind == "rename_dir" else kind)(*args)


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=30))
@example([("link", "d/e", "b"), ("append", "b", b"\0")])  # data written through a new name of a file in an unlearnt dir
def test_after_a_drop_the_tree_is_the_replay_of_the_synced_operations_only(trace: list[tuple]) -> None:
    fs = MemFS({"a": b"init-a", "d/e": b"init-e"})
    for op in trace:
        _apply(fs, op)
    expected = fs.expected()
    fs.drop()
    assert fs.tree() == expected
    fs.drop()
    assert fs.tree() == expected, "a second drop changed the durable state"


def test_a_new_directory_on_a_removed_ones_inode_starts_empty() -> None:
    """The backing file system reuses inode numbers: a new directory must not inherit the old one's entries."""
    model = PersistenceModel(ROOT, lambda path: {})
    model.learn("")
    model.created("E", Node(DIR, 5), "mkdir")
    model.fsyncdir("")
    model.created("E/marker", Node(FILE, 6))
    model.fsync(6)
    model.fsyncdir("E")
    model.removed("E/marker")
    model.removed("E", "rmdir")
    model.fsyncdir("")
    model.created("D0", Node(DIR, 5), "mkdir")
    model.fsyncdir("")
    plan = model.drop()
    assert [place.path for place in plan.places] == ["D0"]
    assert not plan.report.lost_anything, plan.report.lines()


def test_renames_that_make_the_durable_tree_a_cycle_place_each_directory_once() -> None:
    fs = MemFS({"a/b/f": b"x"})
    fs.rename("a/b", "b")
    fs.rename("a", "b/a")
    fs.fsyncdir("b")  # durable: ./ names a, a names b, b names a
    report = fs.drop()
    assert fs.tree() == {"a": None, "a/b": None, "a/b/f": b"x"}
    assert report.problems == ("a/b/a: not restored (the directory is a already: the durable entries name it twice)",)


def test_report_lines_escape_what_a_name_could_forge_and_list_by_path() -> None:
    fs = MemFS({"z": b"", "a": b""})
    fs.append("z", b"1")
    fs.append("a", b"2")
    fs.create(b"\xff\nfake: bytes 0..9 dropped".decode("utf-8", "surrogateescape"))
    fs.create("\udcff\\x")
    report = fs.drop()
    assert [f["path"] for f in report.files] == ["a", "z"], "by path, not by inode number"
    assert report.lines() == [
        "a: bytes 0..1 dropped (never fsynced)",
        "z: bytes 0..1 dropped (never fsynced)",
        "\\xff\\nfake: bytes 0..9 dropped: create undone (./ never fsynced)",
        "\\xff\\\\x: create undone (./ never fsynced)",
    ]
    assert all(line.isprintable() for line in report.lines())


def test_a_removed_directory_tree_reports_only_the_entry_that_named_it() -> None:
    fs = MemFS()
    fs.mkdir("g")
    fs.fsyncdir("")
    fs.mkdir("g/d")
    fs.create("g/d/f")
    fs.fsyncdir("g/d")
    fs.rename("g", "d")  # g's subtree now lives at d; then d/d/f goes and d/d with it
    fs._unlink("d/d/f", "unlink")
    fs.dirs[fs.lookup("d")].pop("d")
    fs.model.removed("d/d", "rmdir")
    report = fs.drop()
    assert [e["path"] for e in report.entries] == ["d", "g"], report.lines()
