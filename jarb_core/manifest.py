"""What a module can do, read from its code (imports and calls), compared with the effects its spec declares.

A generated tool that imports `requests` but declares no `network`, or deletes files without `fs_write`,
is refused at registration. Code that loads native code (ctypes, cffi) or builds code at run time (eval,
exec, __import__, importlib) is refused whatever it declares: it would hide what it does from this check.
The manifest is a reading of the code, not a boundary: the sandbox is what contains the code at run time.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

# capability -> the side effect that must be declared for it (None: never allowed)
REQUIRED_EFFECT: dict[str, str | None] = {
    "network": "network",
    "fs_write": "fs_write",
    "subprocess": "subprocess",
    "process_control": "subprocess",  # ending a process, sending or catching signals: a process's business
    "native_code": None,
    "dynamic_code": None,
}

_MODULE_CAPS: dict[str, str] = {
    **{m: "network" for m in ("socket", "ssl", "http", "urllib.request", "urllib3", "requests", "httpx", "aiohttp",
                              "ftplib", "smtplib", "imaplib", "poplib", "telnetlib", "xmlrpc", "websocket",
                              "websockets", "paramiko", "socketserver", "asyncssh", "grpc")},
    **{m: "subprocess" for m in ("subprocess", "multiprocessing", "pty", "pexpect", "sh", "concurrent.futures.process")},
    **{m: "process_control" for m in ("signal", "_signal", "faulthandler")},
    **{m: "native_code" for m in ("ctypes", "_ctypes", "cffi")},
    **{m: "dynamic_code" for m in ("importlib", "runpy", "code", "codeop", "marshal", "pickle", "shelve", "dill")},
}
_HARMLESS_MODULES = ("importlib.metadata", "importlib.resources")
_CALL_CAPS: dict[str, str] = {
    **{f"os.{f}": "subprocess" for f in ("system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execle",
                                         "execlp", "execlpe", "execvp", "execvpe", "spawnl", "spawnle", "spawnlp",
                                         "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "posix_spawn",
                                         "posix_spawnp")},
    **{f"os.{f}": "process_control" for f in ("abort", "kill", "killpg", "pidfd_open", "setsid", "setpgid")},
    **{f"os.{f}": "fs_write" for f in ("remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace",
                                       "mkdir", "makedirs", "chmod", "chown", "lchown", "truncate", "symlink", "link",
                                       "utime", "mkfifo", "write")},
    **{f"shutil.{f}": "fs_write" for f in ("rmtree", "move", "copy", "copy2", "copyfile", "copytree", "copymode",
                                           "copystat", "chown", "make_archive", "unpack_archive")},
    "urllib.request.urlopen": "network",
}
_BUILTIN_CAPS = {"eval": "dynamic_code", "exec": "dynamic_code", "compile": "dynamic_code",
                 "__import__": "dynamic_code", "breakpoint": "dynamic_code"}
_PATH_WRITE_METHODS = {"write_text", "write_bytes", "unlink", "rmdir", "mkdir", "rename", "replace", "touch",
                       "symlink_to", "hardlink_to", "chmod", "lchmod"}
_WRITE_MODE_CHARS = set("wax+")


@dataclass
class Evidence:
    capability: str
    line: int
    what: str


@dataclass
class Manifest:
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def capabilities(self) -> list[str]:
        return sorted({e.capability for e in self.evidence})

    def effects(self) -> list[str]:
        """The side effects the code needs declared."""
        return sorted({effect for c in self.capabilities if (effect := REQUIRED_EFFECT.get(c))})

    def as_dict(self) -> dict:
        return {"capabilities": self.capabilities,
                "evidence": [{"capability": e.capability, "line": e.line, "what": e.what} for e in self.evidence]}

    def contradictions(self, declared: list[str]) -> list[str]:
        """Why this code does not match its declared side effects (empty when it does)."""
        problems: list[str] = []
        for cap in self.capabilities:
            needed = REQUIRED_EFFECT.get(cap)
            first = next(e for e in self.evidence if e.capability == cap)
            where = f"line {first.line}: {first.what}"
            if needed is None:
                label = "loads native code" if cap == "native_code" else "builds or loads code at run time"
                problems.append(f"the code {label} ({where}); generated tools may not do that")
            elif needed not in declared:
                problems.append(f"the code uses {cap.replace('_', ' ')} ({where}) but the spec does not declare "
                                f"the side effect {needed!r}")
        return problems


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _module_cap(module: str) -> str | None:
    if any(module == h or module.startswith(h + ".") for h in _HARMLESS_MODULES):
        return None
    for name, cap in _MODULE_CAPS.items():
        if module == name or module.startswith(name + "."):
            return cap
    return None


_MODE_RE = re.compile(r"[rwxabtU+]{1,4}")


def _write_mode(call: ast.Call, mode_pos: int) -> bool:
    """Whether an open-like call may write. `mode_pos`: where the mode is for builtin open; for `x.open(...)`
    (Path.open, gzip.open...) the mode is the first constant argument that looks like a mode."""
    for kw in call.keywords:
        if kw.arg == "mode":
            if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                return bool(set(kw.value.value) & _WRITE_MODE_CHARS)
            return True  # a computed mode: assume it may write
    if mode_pos >= 0:
        candidates = call.args[mode_pos:mode_pos + 1]
    else:
        candidates = [a for a in call.args[:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)
                      and _MODE_RE.fullmatch(a.value)]
    for mode in candidates:
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
            return bool(set(mode.value) & _WRITE_MODE_CHARS)
        return True
    return False


def derive_manifest(code: str) -> Manifest:
    tree = ast.parse(code)
    manifest = Manifest()
    aliases: dict[str, str] = {}  # local name -> dotted module or module.attr it stands for

    def add(cap: str, node: ast.AST, what: str) -> None:
        manifest.evidence.append(Evidence(cap, getattr(node, "lineno", 0), what))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
                cap = _module_cap(alias.name)
                if cap:
                    add(cap, node, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            cap = _module_cap(node.module)
            if cap:
                add(cap, node, f"from {node.module} import ...")
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                aliases[alias.asname or alias.name] = full
                sub = _module_cap(full)
                if sub and not cap:
                    add(sub, node, f"from {node.module} import {alias.name}")

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if name is None:
            if isinstance(node.func, ast.Attribute) and node.func.attr in _PATH_WRITE_METHODS:
                add("fs_write", node, f".{node.func.attr}(...)")
            continue
        head, _, rest = name.partition(".")
        resolved = f"{aliases[head]}.{rest}" if head in aliases and rest else aliases.get(head, name)
        if resolved in _CALL_CAPS:
            add(_CALL_CAPS[resolved], node, f"{name}(...)")
        elif name in _BUILTIN_CAPS and head not in aliases:
            add(_BUILTIN_CAPS[name], node, f"{name}(...)")
        elif name in ("open", "io.open", "codecs.open") and _write_mode(node, 1):
            add("fs_write", node, f"{name}(..., writing)")
        elif name == "os.open":
            add("fs_write", node, "os.open(...)")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _PATH_WRITE_METHODS:
            add("fs_write", node, f"{name}(...)")
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "open" and _write_mode(node, -1):
            add("fs_write", node, f"{name}(..., writing)")
    manifest.evidence.sort(key=lambda e: (e.line, e.capability))
    return manifest
