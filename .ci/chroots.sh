#!/usr/bin/env bash
# Builds the Debian chroots the flavour tests start their servers from (sandbox.Flavour):
#   trixie -> MariaDB 11.8 (mariadb-server)
#   sid    -> Oracle MySQL 9.7 (mysql-server)
# Cached under $ENGINEMIG_CHROOTS (default /var/cache/enginemig-chroots/<suite>); a chroot that
# is complete (marker file .enginemig-ready) is left alone, so running this again is cheap.
# Needs root. Usage: .ci/chroots.sh [suite...]   (default: trixie sid)
set -euo pipefail

root=${ENGINEMIG_CHROOTS:-/var/cache/enginemig-chroots}
mirror=${ENGINEMIG_MIRROR:-http://deb.debian.org/debian}
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(trixie sid)

package_for() {
  case "$1" in
    trixie) echo mariadb-server ;;
    sid) echo mysql-server ;;
    *) echo "unknown suite $1" >&2; return 1 ;;
  esac
}

if [ "$(id -u)" != 0 ]; then echo "chroots.sh: needs root" >&2; exit 1; fi
if ! command -v debootstrap >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q debootstrap
fi

# mount_into DIR: /proc and /dev inside the chroot (the servers need /dev/null, /dev/urandom and
# /proc); idempotent.
mount_into() {
  local dir=$1
  # minbase has no /etc/hosts; mariadb-install-db resolves localhost.
  [ -s "$dir/etc/hosts" ] || printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$dir/etc/hosts"
  mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
  mountpoint -q "$dir/dev" || mount --bind /dev "$dir/dev"
}

unmount_from() {
  local dir=$1
  mountpoint -q "$dir/dev" && umount -l "$dir/dev" || true
  mountpoint -q "$dir/proc" && umount -l "$dir/proc" || true
}

build() {
  local suite=$1 pkg dir tmp start
  pkg=$(package_for "$suite")
  dir=$root/$suite
  if [ -e "$dir/.enginemig-ready" ]; then
    mount_into "$dir"
    echo "chroots.sh: $suite ready at $dir"
    return
  fi
  start=$(date +%s)
  mkdir -p "$root"
  tmp=$dir.building
  # --one-file-system: never descend into a /dev or /proc still mounted there.
  if [ -d "$tmp" ]; then unmount_from "$tmp"; rm -rf --one-file-system "$tmp"; fi
  # sid's Release file on a frozen mirror can be past its Valid-Until; debootstrap does not check
  # it, apt inside the chroot is told not to.
  debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$root/$suite.debootstrap.log" 2>&1 || {
    tail -30 "$root/$suite.debootstrap.log" >&2; exit 1; }
  # No service may start inside the chroot while packages install.
  printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
  chmod +x "$tmp/usr/sbin/policy-rc.d"
  mount_into "$tmp"
  trap "unmount_from '$tmp'" EXIT
  chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get -q \
    -o Acquire::Check-Valid-Until=false update >/dev/null
  # The server package's postinst initialises a data directory the tests never use; MySQL 9.7's
  # once failed there ("System views initialization failed") on a new machine and passed when run
  # again on an emptied directory, so a failed configure is retried twice before giving up.
  local try
  for try in 1 2 3; do
    if [ "$try" = 1 ]; then
      chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get -q -y \
        -o Acquire::Check-Valid-Until=false --no-install-recommends install "$pkg" >"$root/$suite.apt.log" 2>&1 && break
    else
      rm -rf --one-file-system "$tmp/var/lib/mysql"
      chroot "$tmp" env DEBIAN_FRONTEND=noninteractive dpkg --configure -a >>"$root/$suite.apt.log" 2>&1 && break
    fi
    if [ "$try" = 3 ]; then tail -30 "$root/$suite.apt.log" >&2; exit 1; fi
    echo "chroots.sh: installing $pkg in $suite failed (try $try); configuring again" >&2
  done
  chroot "$tmp" dpkg-query -W -f='${Status}' "$pkg" | grep -q 'install ok installed' || {
    tail -30 "$root/$suite.apt.log" >&2; echo "chroots.sh: $pkg is not installed in $suite" >&2; exit 1; }
  chroot "$tmp" apt-get clean
  unmount_from "$tmp"
  trap - EXIT
  touch "$tmp/.enginemig-ready"
  if [ -d "$dir" ]; then unmount_from "$dir"; rm -rf --one-file-system "$dir"; fi
  mv "$tmp" "$dir"
  mount_into "$dir"
  echo "chroots.sh: built $suite ($pkg) at $dir in $(( $(date +%s) - start )) s"
}

for s in "${suites[@]}"; do build "$s"; done
