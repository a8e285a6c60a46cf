"""A FUSE file system that forgets what was not synced: the power-loss tests' disk.

SIGKILL keeps the kernel's page cache, so a write that was never fsynced survives it; a
power cut does not. Like LazyFS (the FUSE layer that found data-loss bugs in PostgreSQL,
etcd and Redis), this layer keeps written data in its own cache and drops what was not
made durable when the test cuts the power:

- a file's contents (writes, truncations) are durable once the file is fsynced
  (fsync or fdatasync: both write the whole file's contents);
- a directory's entries (creates, mkdirs, renames in or out, links, unlinks) are durable
  once the directory itself is fsynced: a file fsynced but never named in a synced
  directory is lost, and a rename whose directory was not fsynced is undone;
- `cut(keep)` drops everything else; with `keep`, the last unsynced write is torn: its
  first `keep` bytes reach the disk, the rest does not.

The file system runs in a process of its own (`python -m tests.support.lazyfs BACKING
MOUNTPOINT`), driven over its stdin; the whole tree lives in that process's memory, and the
backing folder is the disk: read at mount, written at unmount (everything: a clean shutdown
syncs) or at a cut (only what was durable). After a cut every operation fails with EIO until
the unmount; a new mount over the same backing folder then sees what survived. What it does
not model: metadata other than names and contents (modes and times are never lost), a
reordering of writes within one fsync, a disk that lies about fsync (docs/durability.md).
Pages of an mmap'd file reach it only when the kernel writes them back (SQLite's `-shm`,
which SQLite rebuilds at open).
"""

from __future__ import annotations

import ctypes.util
import errno
import functools
import os
import selectors
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent


@functools.cache
def _libfuse() -> str | None:
    return ctypes.util.find_library("fuse3")


def _process_env() -> dict[str, str]:
    """The file system process's environment: this one's, with libfuse 3's path, found once
    per worker. mfusepy otherwise searches at each import, for libfuse 2 first (`ldconfig
    -p`, then a gcc link and an ld link of `-lfuse`) and then for libfuse 3 (`ldconfig -p`
    again): 15 to 55 ms of CPU in each of the suite's 38 mounts where libfuse 2 is not
    installed. libfuse 3 is what the tests unmount with (fusermount3) and what `make test`
    installs, so it is the one named even where libfuse 2 is there too; a library the
    user names (FUSE_LIBRARY_PATH or FUSE_LIBRARY_NAME) is left to mfusepy."""
    env = dict(os.environ)
    if not env.get("FUSE_LIBRARY_PATH") and not env.get("FUSE_LIBRARY_NAME"):
        found = _libfuse()
        if found:
            env["FUSE_LIBRARY_PATH"] = found
    return env


class Node:
    """A file or a directory: what the process sees now and what the disk holds."""

    __slots__ = ("data", "durable", "durable_entries", "entries", "is_dir", "mode", "mtime")

    def __init__(self, is_dir: bool, mode: int, data: bytes = b"") -> None:
        self.is_dir = is_dir
        self.mode = mode
        self.mtime = time.time()
        self.data = bytearray(data)
        self.durable = bytes(data)
        self.entries: dict[str, Node] = {}
        self.durable_entries: dict[str, Node] = {}


def _fail(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class Tree:
    """The file system's state and its operations, under one lock (FUSE calls them from
    several threads). Paths are those FUSE passes: absolute within the mount."""

    def __init__(self, root: Node) -> None:
        self.root = root
        self.lock = threading.Lock()
        self.handles: dict[int, Node] = {}
        self.next_handle = 1
        self.last_write: tuple[Node, int, bytes] | None = None
        self.cut_off = False

    def node(self, path: str) -> Node:
        if self.cut_off:
            raise _fail(errno.EIO)
        current = self.root
        for name in filter(None, path.split("/")):
            if not current.is_dir:
                raise _fail(errno.ENOTDIR)
            found = current.entries.get(name)
            if found is None:
                raise _fail(errno.ENOENT)
            current = found
        return current

    def parent(self, path: str) -> tuple[Node, str]:
        head, _, name = path.rstrip("/").rpartition("/")
        directory = self.node(head or "/")
        if not directory.is_dir:
            raise _fail(errno.ENOTDIR)
        return directory, name

    def handle(self, node: Node) -> int:
        number = self.next_handle
        self.next_handle += 1
        self.handles[number] = node
        return number

    def opened(self, fh: int) -> Node:
        if self.cut_off:
            raise _fail(errno.EIO)
        return self.handles[fh]

    def write(self, node: Node, data: bytes, offset: int) -> None:
        if offset > len(node.data):
            node.data.extend(bytes(offset - len(node.data)))
        node.data[offset : offset + len(data)] = data
        node.mtime = time.time()
        self.last_write = (node, offset, bytes(data))

    def sync(self, node: Node) -> None:
        if node.is_dir:
            node.durable_entries = dict(node.entries)
        else:
            node.durable = bytes(node.data)
            if self.last_write is not None and self.last_write[0] is node:
                self.last_write = None

    def cut(self, keep: int | None) -> None:
        """Lose what is not durable; tear the last unsynced write to its first `keep` bytes."""
        if keep is not None and self.last_write is not None:
            node, offset, data = self.last_write
            torn = bytearray(node.durable)
            if offset > len(torn):
                torn.extend(bytes(offset - len(torn)))
            torn[offset : offset + keep] = data[:keep]
            node.durable = bytes(torn)
        self.cut_off = True


def load(backing: Path) -> Node:
    """The tree on the backing folder, all of it durable (hard links stay one node)."""
    by_inode: dict[tuple[int, int], Node] = {}

    def walk(path: Path) -> Node:
        info = path.lstat()
        if stat.S_ISDIR(info.st_mode):
            node = Node(True, stat.S_IMODE(info.st_mode))
            for child in sorted(path.iterdir()):
                node.entries[child.name] = walk(child)
            node.durable_entries = dict(node.entries)
            return node
        key = (info.st_dev, info.st_ino)
        if key not in by_inode:
            by_inode[key] = Node(False, stat.S_IMODE(info.st_mode), path.read_bytes())
        return by_inode[key]

    return walk(backing)


def save(root: Node, backing: Path, durable: bool) -> None:
    """Write the tree to the backing folder: what is durable, or (a clean unmount) all."""
    for child in backing.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    written: dict[int, Path] = {}

    def write(node: Node, path: Path) -> None:
        entries = node.durable_entries if durable else node.entries
        for name, child in entries.items():
            target = path / name
            if child.is_dir:
                target.mkdir(mode=0o755)
                write(child, target)
            elif id(child) in written:
                os.link(written[id(child)], target)
            else:
                target.write_bytes(child.durable if durable else bytes(child.data))
                target.chmod(child.mode)
                written[id(child)] = target

    write(root, backing)


def operations(tree: Tree) -> Any:
    """The FUSE callbacks (mfusepy's high-level API) over `tree`."""
    import mfusepy

    class Operations(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True

        def __getattribute__(self, name: str) -> Any:
            value = super().__getattribute__(name)
            if name.startswith(("_", "init")) or getattr(value, "libfuse_ignore", False):
                return value

            def locked(*args: Any) -> Any:
                with tree.lock:
                    return value(*args)

            return locked

        def init_with_config(self, conn: Any, config: Any) -> None:
            print("mounted", flush=True)

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            node = tree.opened(fh) if fh else tree.node(path)
            kind = stat.S_IFDIR if node.is_dir else stat.S_IFREG
            ns = int(node.mtime * 1e9)
            return {
                "st_mode": kind | node.mode,
                "st_nlink": 2 if node.is_dir else 1,
                "st_size": 0 if node.is_dir else len(node.data),
                "st_uid": os.getuid(),
                "st_gid": os.getgid(),
                "st_atime": ns,
                "st_mtime": ns,
                "st_ctime": ns,
            }

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *tree.node(path).entries]

        def mkdir(self, path: str, mode: int) -> int:
            directory, name = tree.parent(path)
            if name in directory.entries:
                raise _fail(errno.EEXIST)
            directory.entries[name] = Node(True, mode & 0o7777)
            return 0

        def rmdir(self, path: str) -> int:
            directory, name = tree.parent(path)
            if tree.node(path).entries:
                raise _fail(errno.ENOTEMPTY)
            del directory.entries[name]
            return 0

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            directory, name = tree.parent(path)
            node = directory.entries.get(name)
            if node is None:
                node = directory.entries[name] = Node(False, mode & 0o7777)
            return tree.handle(node)

        def open(self, path: str, flags: int) -> int:
            node = tree.node(path)
            if flags & os.O_TRUNC:
                del node.data[:]
            return tree.handle(node)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return bytes(tree.opened(fh).data[offset : offset + size])

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            tree.write(tree.opened(fh), data, offset)
            return len(data)

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            node = tree.opened(fh) if fh else tree.node(path)
            if length < len(node.data):
                del node.data[length:]
            else:
                node.data.extend(bytes(length - len(node.data)))
            return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            tree.sync(tree.opened(fh))
            return 0

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            tree.sync(tree.node(path))
            return 0

        def release(self, path: str, fh: int) -> int:
            tree.handles.pop(fh, None)
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def unlink(self, path: str) -> int:
            directory, name = tree.parent(path)
            if tree.node(path).is_dir:
                raise _fail(errno.EISDIR)
            del directory.entries[name]
            return 0

        def rename(self, old: str, new: str) -> int:
            node = tree.node(old)
            source, old_name = tree.parent(old)
            target, new_name = tree.parent(new)
            replaced = target.entries.get(new_name)
            if replaced is not None and replaced.is_dir and replaced.entries:
                raise _fail(errno.ENOTEMPTY)
            del source.entries[old_name]
            target.entries[new_name] = node
            return 0

        def link(self, target: str, source: str) -> int:
            node = tree.node(source)
            directory, name = tree.parent(target)
            if name in directory.entries:
                raise _fail(errno.EEXIST)
            directory.entries[name] = node
            return 0

        def chmod(self, path: str, mode: int) -> int:
            tree.node(path).mode = mode & 0o7777
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            tree.node(path).mtime = times[1] / 1e9 if times else time.time()
            return 0

        def statfs(self, path: str) -> dict[str, int]:
            blocks = 1 << 24
            return {
                "f_bsize": 4096,
                "f_frsize": 4096,
                "f_blocks": blocks,
                "f_bfree": blocks,
                "f_bavail": blocks,
                "f_files": blocks,
                "f_ffree": blocks,
                "f_namemax": 255,
            }

    return Operations()


def _control(tree: Tree, backing: Path, mountpoint: Path) -> None:
    """Commands on stdin, one a line: `cut` or `cut KEEP`; each answered on stdout. At the
    end of stdin (the test process is gone) the file system unmounts itself."""
    for line in sys.stdin:
        words = line.split()
        if words and words[0] == "cut":
            with tree.lock:
                tree.cut(int(words[1]) if len(words) > 1 else None)
                save(tree.root, backing, durable=True)
            print("cut", flush=True)
    subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)


def main(backing: Path, mountpoint: Path) -> None:
    import mfusepy

    tree = Tree(load(backing))
    ops = operations(tree)
    threading.Thread(target=_control, args=(tree, backing, mountpoint), daemon=True).start()
    try:
        mfusepy.FUSE(ops, str(mountpoint), foreground=True, nothreads=False)
    except RuntimeError:
        # The lazy unmount (`fusermount3 -u -z`) can abort the connection while the loop
        # reads the device ("reading device: Software caused connection abort"): libfuse
        # then ends the loop with an error, though the file system was only unmounted.
        if os.path.ismount(mountpoint):
            raise
    if not tree.cut_off:
        save(tree.root, backing, durable=False)
    print("unmounted", flush=True)


class LazyFS:
    """The file system mounted at `mountpoint` over `backing`, in a process of its own."""

    def __init__(self, backing: Path, mountpoint: Path) -> None:
        self.backing = backing
        self.mountpoint = mountpoint
        self.log_path = backing.parent / f"{backing.name}.lazyfs.log"
        self.process: subprocess.Popen[str] | None = None
        self._pending = b""  # what the process wrote past the line last read

    def __enter__(self) -> LazyFS:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()

    def mount(self) -> LazyFS:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self._pending = b""
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.lazyfs",
                    str(self.backing),
                    str(self.mountpoint),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=ROOT,
                env=_process_env(),
                text=True,
            )
        self._expect("mounted")
        return self

    def cut(self, keep: int | None = None) -> None:
        """The power cut: everything not durable is gone; the mount fails every call (EIO)
        until `unmount`. `keep`: tear the last unsynced write to its first `keep` bytes."""
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write("cut\n" if keep is None else f"cut {keep}\n")
        self.process.stdin.flush()
        self._expect("cut")

    def unmount(self) -> None:
        """Unmount (lazily: a process killed a moment ago may still hold a file) and wait
        for the file system's process to write the backing folder and exit."""
        if self.process is None:
            return
        subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=False)
        try:
            self._expect("unmounted")
            self.process.wait(20)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    pipe.close()
            self.process = None
        assert not os.path.ismount(self.mountpoint)

    def remount(self) -> LazyFS:
        self.unmount()
        return self.mount()

    def _expect(self, word: str, timeout: float = 20.0) -> None:
        """The next answer line, read from the pipe's descriptor: the text stream could buffer
        the line after it, where no wait on the descriptor would see it."""
        assert self.process is not None and self.process.stdout is not None
        fd = self.process.stdout.fileno()
        pending = self._pending
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as waiting:  # epoll: select() takes no fd past 1023
            waiting.register(fd, selectors.EVENT_READ)
            while b"\n" not in pending:
                left = deadline - time.monotonic()
                if left <= 0 or not waiting.select(left):
                    break
                chunk = os.read(fd, 4096)
                if not chunk:  # the process ended
                    break
                pending += chunk
        raw, _, self._pending = pending.partition(b"\n")
        line = raw.decode().strip()
        if line != word:
            raise RuntimeError(
                f"lazyfs: expected {word!r}, got {line!r}: {self.log_path.read_text()[-2000:]}"
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
