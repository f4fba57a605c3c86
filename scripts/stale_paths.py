"""Paths, modules and tests named in comments, docstrings and docs that do not exist.

`python scripts/stale_paths.py` prints one `file:line: name` per stale reference and exits 1
when there is any (tests/contracts/test_stale_paths.py runs it). Checked: repository paths
(`flashfleet/...`, `tests/...`, `roles/...`, `docs/...` and the other top-level folders; globs
and `{a,b}` lists expanded; `path.py::test_name` needs the test), dotted `flashfleet.x.y`
names (a module, or a name that module defines), and `module.py` or "`name` module" names
(a file of that name exists). Python files are read for their comments and docstrings only: a
path in code is exercised by the tests, one in prose is not.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("flashfleet", "tests", "roles", "docs", "playbooks", "scripts", "stacks", "examples", "benchmarks")
SCANNED = {".md", ".py", ".yml", ".yaml", ".cfg", ".toml", ".sh", ".j2", ".txt"}
_PATH = re.compile(r"(?<![\w./${-])((?:" + "|".join(TOPS) + r")/[\w./*{},<>-]*\w[/*]?)(::\w+)?")
_DOTTED = re.compile(r"(?<![\w./-])(flashfleet(?:\.\w+)+)")
_MODULE = re.compile(r"(?<![\w./{,-])([a-z_][a-z0-9_]*\.py)\b")
_NAMED_MODULE = re.compile(r"`(\w+)` module\b|\bmodule `(\w+)`")
_PLACEHOLDER = re.compile(r"<|\b[A-Z]{3,}\b")  # stacks/Pulumi.<stack>.yaml, Pulumi.NAME.yaml
# Names that look like ours and are not: the image name, host names, the two trees a digest
# covers, a build output, a test's example of a name, and files of other projects (SGLang's,
# a model card's).
NOT_PATHS = {
    "flashfleet/sglang", "flashfleet.dev", "flashfleet.invalid", "playbooks/roles", "tests/hosts/rootfs",
    "stacks/Pulumi.abc.yaml",
    "glm53_flash_common.py", "test_glm53_flash_eval_mi35x.py", "serving.py", "serving_base.py",
    "serving_chat.py", "scheduler.py", "decode.py", "serve.py",
}  # fmt: skip


def _prose(file: Path, text: str) -> list[tuple[int, str]]:
    """(line number, line) of what a reader reads in the file."""
    if file.suffix != ".py":
        return list(enumerate(text.splitlines(), 1))
    out: list[tuple[int, str]] = []
    previous = tokenize.NEWLINE
    starts = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}  # a string alone: a docstring
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        docstring = tok.type == tokenize.STRING and previous in starts
        if tok.type == tokenize.COMMENT or docstring:
            out += [(tok.start[0] + i, line) for i, line in enumerate(tok.string.splitlines())]
        if tok.type not in {tokenize.COMMENT, tokenize.NL}:
            previous = tok.type
    return out


def _expand(path: str) -> list[str]:
    brace = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if not brace:
        return [path]
    head, tail = path[: brace.start()], path[brace.end() :]
    return [full for part in brace.group(1).split(",") for full in _expand(head + part + tail)]


def _defines(module: Path, name: str) -> bool:
    text = module.read_text(encoding="utf-8")
    pattern = rf"^\s*(?:async\s+)?(?:def|class)\s+{name}\b|^\s*{name}\s*[:=]|^\s*(?:from|import) .*\b{name}\b"
    return re.search(pattern, text, re.M) is not None


def _exists(root: Path, path: str, near: Path) -> bool:
    """Relative to the repository, or to a folder above the naming file (tests/conftest.py
    names roles/test_x.py for tests/roles/test_x.py); `a/b.NAME` is NAME in a/b.py."""
    for base in [root, *(p for p in near.parents if root in p.parents)]:
        if any(c in path for c in "*?[") and any(base.glob(path.rstrip("/"))):
            return True
        if (base / path).exists():
            return True
        stem, _, name = path.rpartition(".")
        if stem and (base / f"{stem}.py").is_file() and _defines(base / f"{stem}.py", name):
            return True
    return False


def _dotted_exists(root: Path, dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = parts[cut:]
            return not rest or _defines(module, rest[0])
    return False


def _stale_in_line(root: Path, file: Path, line: str, names: set[str]) -> list[str]:
    found: list[str] = []
    for match in _PATH.finditer(line):
        raw, test = match.group(1).rstrip("."), match.group(2)
        if _PLACEHOLDER.search(raw) or ("{" in raw and "," not in raw) or raw in NOT_PATHS:
            continue  # a placeholder or an f-string's field
        for path in _expand(raw):
            if not _exists(root, path, file):
                found.append(path)
            elif test and (root / path).is_file() and not _defines(root / path, test[2:]):
                found.append(path + test)
    for match in _DOTTED.finditer(line):
        dotted = match.group(1).rstrip(".")
        if dotted not in NOT_PATHS and not _dotted_exists(root, dotted):
            found.append(dotted)
    for match in _MODULE.finditer(line):
        if match.group(1) not in names | NOT_PATHS:
            found.append(match.group(1))
    for match in _NAMED_MODULE.finditer(line):
        name = match.group(1) or match.group(2)
        if f"{name}.py" not in names and name not in names:
            found.append(f"`{name}` module")
    return found


def stale(root: Path, files: list[Path]) -> list[str]:
    """`file:line: name` for every stale reference in `files` (paths under `root`)."""
    names = {f.name for f in files} | {d.name for f in files for d in f.parents}
    out = []
    for file in files:
        rel = file.relative_to(root).as_posix()
        if file.suffix not in SCANNED or "golden" in rel or file.resolve() == Path(__file__).resolve():
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        for number, line in _prose(file, text):
            out += [f"{rel}:{number}: {name}" for name in _stale_in_line(root, file, line, names)]
    return out


def tracked_files(root: Path) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout.splitlines()  # fmt: skip
    return [root / f for f in listed if (root / f).is_file()]


def main() -> int:
    found = stale(ROOT, tracked_files(ROOT))
    print("\n".join(found) or "no stale references")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
