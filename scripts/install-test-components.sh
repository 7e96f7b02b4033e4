#!/usr/bin/env bash
# Installs the real components some tests run against, when they are missing:
#   nvidia-cuda-mps-control (Debian's nvidia-cuda-mps, in the non-free component; runs without a GPU).
# Idempotent and quiet: does nothing when the component is already on PATH; needs root (or sudo) and
# apt to install. Without them it says so and returns 0; the tests then skip (or fail under CI=true).
set -euo pipefail
if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-components: no apt-get; MPS tests will skip (CI=true makes them fail)" >&2
  exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "install-test-components: not root; MPS tests will skip (CI=true makes them fail)" >&2
    exit 0
  fi
fi
# Debian packages the MPS control daemon in non-free; add that component from the mirror already
# configured for main, once.
src=/etc/apt/sources.list.d/gpupool-non-free.sources
if [[ ! -f $src ]]; then
  uri=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1 | awk '{print $2}')
  uri=${uri:-http://deb.debian.org/debian}
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" "$codename" | $SUDO tee "$src" >/dev/null
fi
$SUDO apt-get update -qq -o Dir::Etc::sourcelist="$src" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nvidia-cuda-mps >/dev/null
command -v nvidia-cuda-mps-control >/dev/null
