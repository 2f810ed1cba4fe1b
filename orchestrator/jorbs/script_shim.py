"""Runs inside the sandboxed child process: executes one jorb script with a `jarvis` object whose calls travel
over the pipe to the parent (JSON lines: the parent's stdin/stdout). Kept dependency-free (stdlib only)."""

import ast
import io
import json
import os
import sys
import traceback

_proto_out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
_proto_in = sys.stdin
_captured = io.StringIO()
sys.stdout = _captured  # the script's prints are captured, the pipe stays clean
_calls = [0]


class CapabilityError(Exception):
    """A jarvis.* call failed; the message says why (denied, bad arguments, tool error...)."""


def _send(obj):
    _proto_out.write(json.dumps(obj, default=str) + "\n")
    _proto_out.flush()


def _call(namespace, method, args, kwargs):
    _calls[0] += 1
    _send({"type": "call", "id": _calls[0], "ns": namespace, "method": method, "args": list(args), "kwargs": kwargs})
    line = _proto_in.readline()
    if not line:
        raise SystemExit(3)  # the parent is gone
    reply = json.loads(line)
    if reply.get("error") is not None:
        raise CapabilityError(reply["error"])
    return reply.get("result")


class _Method:
    def __init__(self, namespace, name):
        self._ns, self._name = namespace, name

    def __call__(self, *args, **kwargs):
        return _call(self._ns, self._name, args, kwargs)


class _Namespace:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, method):
        if method.startswith("__"):
            raise AttributeError(method)
        return _Method(self._name, method)


class _Jarvis:
    def __getattr__(self, namespace):
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        return _Namespace(namespace)

    def call(self, tool, *args, **kwargs):
        return _call("call", tool, args, kwargs)


def _compile(script):
    """The script as the body of a function, its last expression returned (as the seed's examples expect)."""
    tree = ast.parse(script, filename="<jorb script>")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        tree.body[-1] = ast.copy_location(ast.Return(value=last.value), last)
    func = ast.FunctionDef(name="__jorb_main__", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                                    defaults=[]),
                           body=tree.body or [ast.Pass()], decorator_list=[], returns=None, type_params=[])
    module = ast.Module(body=[func], type_ignores=[])
    ast.fix_missing_locations(module)
    return compile(module, "<jorb script>", "exec")


def _json_safe(value):
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return repr(value)


def main():
    request = json.loads(_proto_in.readline())
    env = {"jarvis": _Jarvis(), "CapabilityError": CapabilityError, "__name__": "__jorb__"}
    try:
        exec(_compile(request["script"]), env)  # noqa: S102 - the jorb's script, inside the sandbox this shim runs in
        result = env["__jorb_main__"]()
        _send({"type": "done", "result": _json_safe(result), "output": _captured.getvalue()[-4000:]})
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the policy
        tb = traceback.format_exc(limit=5)
        _send({"type": "done", "error": f"{type(exc).__name__}: {exc}", "traceback": tb[-3000:],
               "output": _captured.getvalue()[-4000:]})


main()
