# Sourced by scripts/demo and scripts/test: make .venv (Python >= 3.11) and install medic
# with the extras named in $1 ("" or "test"). On a bare Debian, where the venv module is
# missing, it installs python3-venv first when it runs as root. pip's output goes to
# .venv/install.log and is shown (on stderr) only when the install fails, so that what the
# caller prints is all there is, even with both streams taken as one (`scripts/demo --json
# 2>&1`).
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
  if ! {
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip &&
      .venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extras:+[$extras]}"
  } >.venv/install.log 2>&1; then
    echo "installing medic into .venv failed; the end of .venv/install.log:" >&2
    tail -n 30 .venv/install.log >&2
    return 1
  fi
}
