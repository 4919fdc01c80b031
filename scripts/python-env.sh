#!/usr/bin/env bash
# Creates the project virtualenv (.venv at the repository root, or $TANDEM_VENV) and installs the
# pinned packages of the requested groups. A group is a requirement file:
# scripts/requirements-<group>.txt. With no argument every group is installed.
#
#   scripts/python-env.sh bench        # TensorFlow + PyTorch for bench/cnn_vs_peers.sh
#   scripts/python-env.sh              # all groups
#
# Idempotent: a stamp per group records the hash of its requirement file, so a second run with
# unchanged files returns at once without asking the index. Groups installed earlier constrain
# later ones, so installing a group never silently changes another group's pins.
#
# Exit status: 0 ready; 3 the package index cannot be reached (callers print the message and
# SKIP); 2 bad usage; 1 anything else (no python3-venv, pip failed).
set -euo pipefail

readonly INDEX_UNREACHABLE=3
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${TANDEM_VENV:-$repo_root/.venv}"
# Debian's interpreter, which scripts/install-deps.sh provides together with python3-venv;
# PYTHON overrides it.
python="${PYTHON:-/usr/bin/python3}"

fail() {
  echo "python-env: $1" >&2
  exit "${2:-1}"
}

requirements_of() { echo "$repo_root/scripts/requirements-$1.txt"; }

groups=("$@")
if [ ${#groups[@]} -eq 0 ]; then
  for file in "$repo_root"/scripts/requirements-*.txt; do
    name="${file##*/requirements-}"
    groups+=("${name%.txt}")
  done
fi
for group in "${groups[@]}"; do
  [ -f "$(requirements_of "$group")" ] ||
    fail "unknown group '$group': no $(requirements_of "$group"); \
the groups are the scripts/requirements-<group>.txt files" 2
done

stamp_dir="$venv/.tandem-stamps"
stamp_of() { echo "$stamp_dir/$1.$(sha256sum "$(requirements_of "$1")" | cut -c1-16)"; }

missing_groups() {
  for group in "${groups[@]}"; do
    [ -f "$(stamp_of "$group")" ] || echo "$group"
  done
}

# Fast path without the lock: everything requested is installed already.
[ -z "$(missing_groups)" ] && exit 0

# One installer at a time (tests may start several); `python -m venv` accepts the existing folder.
mkdir -p "$venv"
exec {lock_fd}>"$venv/.tandem-lock"
flock "$lock_fd"

mapfile -t to_install < <(missing_groups)
[ ${#to_install[@]} -eq 0 ] && exit 0 # another process installed them while we waited

if [ ! -x "$venv/bin/python" ]; then
  command -v "$python" >/dev/null || fail "no $python; run scripts/install-deps.sh or set PYTHON"
  echo "python-env: creating $venv with $("$python" --version 2>&1)"
  "$python" -m venv "$venv" ||
    fail "could not create $venv: install python3-venv (scripts/install-deps.sh) and retry"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# Ask the index once, briefly, so an offline machine gets one clear line instead of pip's retries.
if ! "${pip[@]}" index versions pip --timeout 20 --retries 1 >/dev/null 2>&1; then
  fail "the Python package index cannot be reached (pip index versions pip failed); \
groups not installed: ${to_install[*]}" "$INDEX_UNREACHABLE"
fi

install_args=()
for group in "${to_install[@]}"; do
  install_args+=(-r "$(requirements_of "$group")")
done
for file in "$stamp_dir"/*; do
  [ -e "$file" ] || continue
  installed_group="${file##*/}"
  installed_group="${installed_group%.*}"
  if [ -f "$(requirements_of "$installed_group")" ]; then
    install_args+=(-c "$(requirements_of "$installed_group")")
  fi
done

echo "python-env: installing groups ${to_install[*]} into $venv"
"${pip[@]}" install --no-input "${install_args[@]}" ||
  fail "pip could not install groups ${to_install[*]} (see pip's message above)"

mkdir -p "$stamp_dir"
for group in "${to_install[@]}"; do
  rm -f "$stamp_dir/$group".*
  touch "$(stamp_of "$group")"
done
echo "python-env: ready: $venv (groups ${groups[*]})"
