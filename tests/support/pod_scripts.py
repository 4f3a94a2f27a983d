"""The programs a Pod script runs, read from its syntax tree (shfmt --to-json, hack/build-binaries.sh
shfmt), and whether an image's root file system has them.

    words = command_words(text)   # {program: first line}, the shell's builtins and the script's
                                  # own functions left out; "$VAR" resolved to what it is assigned
    missing(image_files(archive), programs)   # those not on the PATH of an image (OCI archive)
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path
from typing import IO, Any

from tests.support.controlplane import bin_dir, versions

# bash's builtins and keywords (`compgen -b -k`), and the POSIX special builtins busybox sh has
BUILTINS = frozenset(
    """
    . : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare
    dirs disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill
    let local logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt
    source suspend test times trap true type typeset ulimit umask unalias unset wait
    if then else elif fi case esac for select while until do done in function time coproc { } ! [[ ]]
    """.split()
)
# words that run the program named by a later argument: how many arguments (after options) to skip
WRAPPERS = {"exec": 0, "timeout": 1, "nohup": 0, "nice": 0}
PATH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def shfmt() -> Path:
    return bin_dir() / f"shfmt-{versions()['SHFMT_VERSION']}" / "shfmt"


def syntax_tree(text: str, dialect: str = "bash") -> dict[str, Any]:
    r = subprocess.run(
        [str(shfmt()), "--to-json", "-ln", dialect], input=text, capture_output=True, text=True, timeout=60
    )
    if r.returncode != 0:
        raise ValueError(f"shfmt could not parse the script: {r.stderr.strip()}")
    return json.loads(r.stdout)


def _literal(word: dict[str, Any] | None) -> str | None:
    """A word's text when it is fixed ("mysql", 'mysql', mysql), "$NAME" for a lone parameter
    ("$VAR", ${VAR}); None for anything else."""
    parts = (word or {}).get("Parts") or []
    if len(parts) == 1 and parts[0]["Type"] == "DblQuoted":
        parts = parts[0].get("Parts") or []
    if len(parts) != 1:
        return None
    part = parts[0]
    if part["Type"] in ("Lit", "SglQuoted"):
        return part.get("Value", "")  # '' has none
    if part["Type"] == "ParamExp" and not any(
        part.get(k) for k in ("Index", "Slice", "Exp", "Repl", "Length")
    ):
        return "$" + part["Param"]["Value"]
    return None


def _defaults(word: dict[str, Any] | None) -> list[str]:
    """What an assignment's value can be: its text, or the fixed default of "${X:-default}"."""
    text = _literal(word)
    if text is not None:
        return [text]
    parts = (word or {}).get("Parts") or []
    if len(parts) == 1 and parts[0]["Type"] == "DblQuoted":
        parts = parts[0].get("Parts") or []
    if len(parts) == 1 and parts[0]["Type"] == "ParamExp" and (parts[0].get("Exp") or {}).get("Word"):
        default = _literal(parts[0]["Exp"]["Word"])
        return [default] if default is not None else []
    return []


def _walk(node: Any, calls: list, assigns: dict[str, set[str]], functions: set[str]) -> None:
    if isinstance(node, dict):
        kind = node.get("Type")
        if kind == "CallExpr":
            for a in node.get("Assigns") or []:
                if not node.get("Args"):  # VAR=value alone sets it; before a command, only for it
                    assigns.setdefault(a["Name"]["Value"], set()).update(_defaults(a.get("Value")))
            if node.get("Args"):
                calls.append((node["Pos"]["Line"], [_literal(w) for w in node["Args"]]))
        elif kind == "FuncDecl":
            functions.add(node["Name"]["Value"])
        for value in node.values():
            _walk(value, calls, assigns, functions)
    elif isinstance(node, list):
        for value in node:
            _walk(value, calls, assigns, functions)


def _programs(args: list[str | None]) -> list[str | None]:
    """The programs a call runs: its first word, and the word a wrapper (exec, timeout) runs."""
    i, out = 0, []
    while i < len(args) and args[i] in WRAPPERS:
        out.append(args[i])
        skip = WRAPPERS[args[i]]  # type: ignore[index]
        i += 1
        while i < len(args) and (args[i] or "").startswith("-"):
            i += 1
        i += skip
    return out + [args[i] if i < len(args) else None]


def command_words(text: str, dialect: str = "bash") -> dict[str, int]:
    """{program: the first line that runs it}: every command word that is not a builtin or one of
    the script's functions; "$VAR" becomes each fixed value the script assigns to VAR, and stays
    "$VAR" when it assigns none (a program the script cannot name: the caller decides)."""
    calls: list[tuple[int, list[str | None]]] = []
    assigns: dict[str, set[str]] = {}
    functions: set[str] = set()
    _walk(syntax_tree(text, dialect), calls, assigns, functions)
    words: dict[str, int] = {}
    for line, args in calls:
        for word in _programs(args):
            if word is None:
                continue
            names = sorted(assigns.get(word[1:]) or {word}) if word.startswith("$") else [word]
            for name in names:
                if name not in BUILTINS and name not in functions:
                    words.setdefault(name, line)
    return words


def image_files(archive: Path) -> dict[str, tuple[str, str, int]]:
    """Every path of the single image in an OCI archive (hack/build-images.sh), its layers applied
    in order with their whiteouts: {"/usr/bin/mysql": (kind, link target, mode)}, kind "f", "l"
    (symbolic link), "d" or "o" (other). Read from the layers, nothing unpacked."""
    files: dict[str, tuple[str, str, int]] = {}
    with tarfile.open(archive) as oci:

        def blob(digest: str) -> IO[bytes]:
            f = oci.extractfile(f"blobs/{digest.replace(':', '/')}")
            assert f is not None, digest
            return f

        (entry,) = json.load(oci.extractfile("index.json"))["manifests"]  # type: ignore[arg-type]
        manifest = json.load(blob(entry["digest"]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r:*") as tar:
                for m in tar:
                    path = "/" + m.name.lstrip("./").rstrip("/")
                    head, _, base = path.rpartition("/")
                    if base == ".wh..wh..opq":
                        for p in [p for p in files if p.startswith(head + "/")]:
                            del files[p]
                    elif base.startswith(".wh."):
                        gone = f"{head}/{base[4:]}"
                        for p in [p for p in files if p == gone or p.startswith(gone + "/")]:
                            del files[p]
                    else:
                        kind = (
                            "f" if m.isreg() or m.islnk() else "l" if m.issym() else "d" if m.isdir() else "o"
                        )
                        files[path] = (kind, m.linkname, m.mode)
    return files


def _resolve(files: dict[str, tuple[str, str, int]], path: str) -> str | None:
    """The path a name leads to inside the image (symbolic links followed in every component,
    never onto the host), or None when it leads nowhere."""
    parts = [p for p in path.split("/") if p]
    done = ""
    for _ in range(40):
        if not parts:
            return done or "/"
        part = parts.pop(0)
        if part in (".", ".."):
            done = done.rpartition("/")[0] if part == ".." else done
            continue
        candidate = f"{done}/{part}"
        kind, target, _ = files.get(candidate, ("", "", 0))
        if kind == "l":
            base = "" if target.startswith("/") else done
            parts = [p for p in f"{base}/{target}".split("/") if p] + parts
            done = ""
        elif kind:
            done = candidate
        else:
            return None
    return None


def missing(files: dict[str, tuple[str, str, int]], programs: tuple[str, ...] | list[str]) -> list[str]:
    """The programs not on the image's PATH as executable files."""

    def found(name: str) -> bool:
        for d in PATH_DIRS:
            real = _resolve(files, f"{d}/{name}")
            if real is not None and files[real][0] == "f" and files[real][2] & 0o111:
                return True
        return False

    return [p for p in programs if not found(p)]
