#!/usr/bin/env bash
# Installs what the console's browser tests need, from Debian's own packages:
#   chromium          /usr/bin/chromium (a launcher; the binary is /usr/lib/chromium/chromium)
#   chromium-driver   /usr/bin/chromedriver (apt keeps it at exactly chromium's version)
#   fonts-dejavu-core without any font, headless Chromium draws no text: the
#                     DOM checks still pass, but screenshots come out blank
# Idempotent: apt is skipped when all three are there and the versions agree.
# BROWSER_DEPS_SMOKE=0 skips the final headless run.
set -euo pipefail

packages=(chromium chromium-driver fonts-dejavu-core)
chromium=/usr/bin/chromium
chromedriver=/usr/bin/chromedriver

die() { echo "browser-deps: $*" >&2; exit 1; }
say() { echo "browser-deps: $*" >&2; }

installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true) == "install ok installed" ]]; }
# Only stdout is read: Debian's launcher may print shell noise on stderr.
version_of() { "$1" --version 2>/dev/null | grep -oE '[0-9]+(\.[0-9]+){3}' | head -n1; }

ready() {
  [[ -x $chromium && -x $chromedriver ]] && installed fonts-dejavu-core || return 1
  local browser driver
  browser=$(version_of "$chromium") && driver=$(version_of "$chromedriver") || return 1
  [[ -n $browser && $browser == "$driver" ]]
}

if ready; then
  say "chromium, chromedriver and fonts are installed"
else
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install ${packages[*]} with your system's package manager"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "not root, and no sudo: cannot install ${packages[*]}"
    sudo=(sudo -n)
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3)
  say "installing ${packages[*]} (about 135 MB to download)"
  "${apt[@]}" update -q || die "apt-get update failed: is a Debian mirror reachable?"
  "${apt[@]}" install -y -q --no-install-recommends "${packages[@]}" || die "apt-get install ${packages[*]} failed"
  ready || die "after the install, $chromium or $chromedriver is missing, does not run, or their versions differ"
fi

if [[ ${BROWSER_DEPS_SMOKE:-1} != 0 ]]; then
  # Root needs --no-sandbox; a browser that cannot start fails here, loudly.
  out=$(timeout 60 "$chromium" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --dump-dom 'data:text/html,<p>browser-deps-ok</p>' 2>/dev/null) \
    || die "headless chromium does not start: run '$chromium --headless=new --no-sandbox --dump-dom about:blank' to see why"
  [[ $out == *browser-deps-ok* ]] || die "headless chromium started but rendered nothing"
fi
echo "chromium $(version_of "$chromium"), chromedriver $(version_of "$chromedriver")"
