# Sourced by scripts/demo and scripts/test: make .venv (Python >= 3.11) and install medic
# with the extras named in $1 ("" or "test"). On a bare Debian, where the venv module is
# missing, it installs python3-venv first when it runs as root. Everything it prints goes to
# stderr, so that a caller's stdout holds only its own output (`scripts/demo --json`).
make_venv() {
  local extras=$1 python
  python=${PYTHON:-$(command -v python3.11 || command -v python3)}
  if [ ! -x .venv/bin/python ]; then
    if ! "$python" -m venv .venv 2>/dev/null; then
      rm -rf .venv
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq >&2 && apt-get install -y -qq python3-venv >/dev/null
        "$python" -m venv .venv
      else
        echo "cannot create a virtual environment: install python3-venv (Debian) first" >&2
        return 1
      fi
    fi
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  if [ -n "$extras" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]" >&2
  else
    .venv/bin/python -m pip install -q --disable-pip-version-check -e . >&2
  fi
}
