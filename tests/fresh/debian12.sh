#!/usr/bin/env bash
# `make demo` and `make test` on a fresh Debian 12 machine: a minimal root built
# with debootstrap (git, make and python3, nothing else), this checkout's HEAD
# copied in (git archive: no .venv, no out/), both commands run in it as root
# with chroot. Not part of CI or pytest: it needs root, Debian's mirror and PyPI,
# and the whole test suite inside takes long (docs/testing.md, "A fresh machine").
#
#   tests/fresh/debian12.sh                      # demo, then test; the root is removed
#   tests/fresh/debian12.sh --demo-only          # stop after make demo
#   tests/fresh/debian12.sh --root DIR --keep    # build in DIR (empty or absent), keep it
#   tests/fresh/debian12.sh --debs FILE.tgz      # cache debootstrap's downloads in FILE.tgz
#   tests/fresh/debian12.sh --cert FILE          # HTTPS through a TLS-inspecting proxy: its CA
#   CI=true tests/fresh/debian12.sh              # make test as CI runs it (missing = failed)
#
# Prints each phase's wall time and exit code; exits 0 only if every phase did.
# SC2317: cleanup and the phases run through trap and phase(); SC2016: the
# commands given to inside() expand in the root, hence single quotes.
# shellcheck disable=SC2317,SC2016
set -euo pipefail

usage() { sed -n '2,15s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

repo=$(cd "$(dirname "$0")/../.." && pwd)
root="" keep=0 demo_only=0 debs="" cert="" mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
while [ $# -gt 0 ]; do
  case $1 in
    --root) root=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --demo-only) demo_only=1; shift ;;
    --debs) debs=$(realpath -m "$2"); shift 2 ;;
    --cert) cert=$(realpath "$2"); shift 2 ;;
    -h|--help) usage ;;
    *) echo "debian12.sh: unknown argument $1" >&2; usage 2 >&2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "debian12.sh: run it as root (debootstrap, chroot, mounts)" >&2; exit 2; }
if [ -z "$root" ]; then
  root=$(mktemp -d "${TMPDIR:-/var/tmp}/upi-fresh.XXXXXX")
elif [ -e "$root" ] && [ -n "$(ls -A "$root")" ]; then
  echo "debian12.sh: $root is not empty; give an empty or absent --root" >&2; exit 2
fi
mkdir -p "$root"
root=$(realpath "$root")

# The phases' figures, printed again at the end; failed=1 once one exits non-zero.
declare -a summary=()
failed=0 rc=0
phase() {  # phase NAME COMMAND...: run it (errexit on), print its wall time, set rc
  local name=$1 start
  shift
  echo "== $name: started $(date -u +%H:%M:%S)"
  start=$(date +%s)
  set +e
  ( set -e; "$@" )
  rc=$?
  set -e
  summary+=("$(printf '%-12s %5ss  exit %s' "$name" $(( $(date +%s) - start )) "$rc")")
  echo "== ${summary[-1]}"
  [ "$rc" = 0 ] || failed=1
}

cleanup() {
  local proc
  # Processes left running inside the root (a daemon a test started): ours, by id.
  for proc in /proc/[0-9]*; do
    if [ "$(readlink "$proc/root" 2>/dev/null)" = "$root" ]; then kill -9 "${proc#/proc/}" 2>/dev/null || true; fi
  done
  for m in run dev sys proc ""; do
    if mountpoint -q "$root/$m" 2>/dev/null; then umount -R "$root/$m" 2>/dev/null || umount -R -l "$root/$m"; fi
  done
  if findmnt -R -n -o TARGET "$root" | grep -q .; then
    echo "debian12.sh: still mounted under $root, left in place:" >&2
    findmnt -R -n -o TARGET "$root" >&2
  elif [ "$keep" = 0 ]; then
    rm -rf --one-file-system "$root"
  else
    echo "kept $root"
  fi
  if [ ${#summary[@]} -gt 0 ]; then
    echo "== summary (Debian 12 root: $root)"
    printf '  %s\n' "${summary[@]}"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bootstrap() {
  command -v debootstrap >/dev/null || {
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends debootstrap >/dev/null; }
  # shellcheck disable=SC2054  # debootstrap's --include takes a comma-separated list
  local args=(--variant=minbase --include=git,make,python3)
  if [ -n "$debs" ]; then
    [ -f "$debs" ] || debootstrap "${args[@]}" --make-tarball="$debs" bookworm "$root.debs" "$mirror"
    rm -rf "$root.debs"
    args+=(--unpack-tarball="$debs")
  fi
  debootstrap "${args[@]}" bookworm "$root" "$mirror" >/dev/null
}

prepare() {
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # A site that inspects HTTPS trusts its own CA; pip inside is told of it as
  # pip on such a machine would be (PIP_CERT), nothing else is.
  if [ -n "$cert" ]; then
    mkdir -p "$root/etc/upi-fresh" && cp "$cert" "$root/etc/upi-fresh/ca.crt"
  fi
  # Daemons the packages would start (nginx on :80, sshd on :22) would share
  # this host's network, not a fresh machine's: the standard chroot policy.
  printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  # `ip netns exec` (the PXE and TFTP tests) remounts / as a slave: / must be a mount.
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
  mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
  mount -t tmpfs -o mode=755 tmpfs "$root/run"
  if ! git -C "$repo" diff --quiet HEAD; then
    echo "note: uncommitted changes in $repo are not copied (HEAD is)"
  fi
  git -C "$repo" archive --format=tar --prefix=upi/ HEAD | tar -x -C "$root/root"
  echo "copied $(git -C "$repo" rev-parse --short HEAD) into $root/root/upi"
}

inside() {  # inside COMMAND...: run it in the root's checkout, as root on a fresh machine would
  chroot "$root" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 CI="${CI:-}" \
    ${cert:+PIP_CERT=/etc/upi-fresh/ca.crt} \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /root/upi && $*"
}

phase debootstrap bootstrap
[ "$rc" = 0 ] || exit 1
phase prepare prepare
[ "$rc" = 0 ] || exit 1
inside 'echo "fresh root: $(. /etc/os-release; echo "$PRETTY_NAME"), $(python3 --version),' \
  'gcc: $(command -v gcc || echo absent), python3-venv: $(dpkg -s python3-venv >/dev/null 2>&1 && echo present || echo absent)"'
phase "make demo" inside 'make demo'
inside 'echo "after make demo: libvirt-python $(.venv/bin/python -c "import libvirt" 2>/dev/null && echo installed || echo absent),' \
  'gcc: $(command -v gcc || echo absent)"'
if [ "$demo_only" = 0 ]; then
  phase "make test" inside 'make test'
fi
exit "$failed"
