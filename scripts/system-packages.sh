#!/usr/bin/env bash
# Install the Debian packages named as arguments that are not installed yet; nothing else.
#
#   bash scripts/system-packages.sh python3-simgrid            (scripts/setup.sh: the simulator)
#   bash scripts/system-packages.sh chromium chromium-driver   (scripts/test.sh: the report's browser test)
#
# "Installed" is dpkg's word for it (dpkg-query status "install ok installed"), so a machine
# that already has every package runs no apt at all and needs neither root nor a network.
# Otherwise: `apt-get update -qq`, then `apt-get install` of the missing ones only, through
# sudo when not root.  A machine without apt-get gets one error naming what to install.
set -euo pipefail
missing=()
for pkg in "$@"; do
  [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$pkg")
done
[ ${#missing[@]} -gt 0 ] || exit 0
if ! command -v apt-get >/dev/null; then
  echo "system-packages: please install the Debian packages ${missing[*]} (no apt-get on this machine)" >&2
  exit 1
fi
sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
echo "system-packages: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
