# ensure_uv: put a `uv` on PATH without touching the system Python.
#
# Debian 12, Ubuntu 24.04 and Homebrew mark their python3 "externally managed" (PEP 668), so
# `python3 -m pip install uv` is refused there. In order: a uv already on PATH; one installed
# earlier into .tools/uv; a fresh venv of the system python3 at .tools/uv with uv in it; Astral's
# standalone installer (into ~/.local/bin). The venv step needs ensurepip (Debian's
# python3-venv package); where neither it nor curl is present, one line says what to install.
ensure_uv() {
  local root="${1:-.}"
  if command -v uv >/dev/null 2>&1; then return 0; fi
  if [ -x "$root/.tools/uv/bin/uv" ]; then PATH="$root/.tools/uv/bin:$PATH"; export PATH; return 0; fi
  if python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    rm -rf "$root/.tools/uv"
    python3 -m venv "$root/.tools/uv" \
      && "$root/.tools/uv/bin/python" -m pip install --quiet --disable-pip-version-check uv \
      && { PATH="$root/.tools/uv/bin:$PATH"; export PATH; return 0; }
    echo "install: could not install uv into a venv at $root/.tools/uv (see pip's message above)" >&2
    return 1
  fi
  if command -v curl >/dev/null 2>&1; then
    curl -LsSf https://astral.sh/uv/install.sh | env UV_NO_MODIFY_PATH=1 sh >/dev/null \
      && { PATH="$HOME/.local/bin:$PATH"; export PATH; return 0; }
  fi
  echo "install: no uv, and python3 cannot make a venv: install python3-venv (Debian/Ubuntu: sudo apt-get install python3-venv) or uv itself (https://docs.astral.sh/uv/getting-started/installation/)" >&2
  return 1
}
