"""A container's first process: its mounts, hostname and directory, then the real exec.

Run by the kubelet as ``ip netns exec POD unshare --mount --uts --propagation private
python pod_init.py SPEC.json``, so that everything here happens in the pod's own mount
and UTS namespaces and nothing on the host changes. A mount target whose directory does
not exist on this machine (``/opt/dataflow/state``, ``/var/run/secrets/...``) gets it in
an overlay of its nearest existing ancestor, whose writes go to the pod's directory.
Standard library only: it runs before the container's environment exists.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


class Root:
    """Creates missing directories under overlays; remembers what is mounted where."""

    def __init__(self, upper: Path) -> None:
        self.upper = upper
        self.writable: list[Path] = []
        """Overlays and bind mounts: directories created below these change no host file."""

    def _inside_writable(self, path: Path) -> bool:
        return any(path == w or w in path.parents for w in self.writable)

    def ensure(self, target: Path, is_file: bool) -> None:
        """``target`` exists (a directory, or a file for a file mount)."""
        if target.exists():
            return
        existing = target.parent
        while not existing.exists():
            existing = existing.parent
        existing = existing.resolve()
        if not self._inside_writable(existing):
            layer = self.upper / f"layer{len(self.writable)}"
            (layer / "upper").mkdir(parents=True)
            (layer / "work").mkdir()
            options = f"lowerdir={existing},upperdir={layer / 'upper'},workdir={layer / 'work'}"
            mount("-t", "overlay", "overlay", "-o", options, str(existing))
            self.writable.append(existing)
        if is_file:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
        else:
            target.mkdir(parents=True, exist_ok=True)


def main(spec_file: str) -> None:
    spec = json.loads(Path(spec_file).read_text())
    if spec.get("hostname"):
        socket.sethostname(spec["hostname"])
    root = Root(Path(spec["upper"]))
    root.ensure(Path(spec["workdir"]), is_file=False)
    for item in sorted(spec["mounts"], key=lambda m: len(Path(m["target"]).parts)):
        target, source = Path(item["target"]), Path(item["source"])
        root.ensure(target, is_file=source.is_file())
        mount("--bind", str(source), str(target))
        if item.get("readOnly"):
            mount("-o", "remount,bind,ro", str(target))
        if source.is_dir():
            root.writable.append(target.resolve())
    os.chdir(spec["workdir"])
    argv = spec["argv"]
    try:
        os.execvpe(argv[0], argv, spec["env"])
    except OSError as error:  # what a container runtime reports as a failed start
        print(f"exec {argv[0]!r}: {error.strerror}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1])
