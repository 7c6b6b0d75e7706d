#!/usr/bin/env bash
# The docker sandbox backend's engine and image on this machine, from Debian's packages only (no registry):
#  - Podman serving the Docker API on a unix socket (runc, cgroupfs), started when the socket does not answer;
#  - the image, built once by debootstrap (minbase + python3) and `podman import`, skipped when it exists;
#  - the toolchain profiles' images (python-science, c-cpp, javascript, sql-postgres, render, spreadsheet),
#    built the same way.
# Usage: scripts/sandbox-image.sh [service|image|profiles|all]   (default all). Needs root and the Debian packages
# podman, runc and debootstrap (scripts/setup-system.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${ANNEAL_SANDBOX_IMAGE:-localhost/anneal-sandbox:bookworm}"
SOCKET="${ANNEAL_PODMAN_SOCKET:-/run/anneal-podman.sock}"
CONF_DIR="${ANNEAL_PODMAN_CONF_DIR:-var/podman}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Only the service this script starts reads this file; podman elsewhere on the machine keeps its own settings.
export CONTAINERS_CONF="$PWD/$CONF_DIR/containers.conf"

need() { command -v "$1" >/dev/null || { echo "$1 not found: install the Debian package $2" >&2; exit 1; }; }

write_conf() {
  mkdir -p "$CONF_DIR"
  cat > "$CONTAINERS_CONF" <<'CONF'
# crun fails on this kind of host (cgroups hybrid mode); runc with the cgroupfs manager enforces memory and pids.
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024", "core=0:0"]
log_driver = "k8s-file"
CONF
}

answers() { curl -sf --max-time 2 --unix-socket "$SOCKET" http://d/_ping >/dev/null 2>&1; }

service() {
  need podman podman; need runc runc; need curl curl
  write_conf
  if answers; then echo "podman Docker API answers at unix://$SOCKET"; return; fi
  rm -f "$SOCKET"
  mkdir -p var/log
  # Started from var/: conmon leaves an empty "oom" file in its working directory when the kernel kills a
  # container for its memory cap, which must not land in the checkout.
  (cd var && nohup podman system service --time=0 "unix://$SOCKET" >log/podman-service.log 2>&1 &)
  for _ in $(seq 100); do answers && { echo "started podman Docker API at unix://$SOCKET"; return; }; sleep 0.1; done
  echo "podman system service did not answer at $SOCKET; see var/log/podman-service.log" >&2
  exit 1
}

# build_image IMAGE PACKAGES: a minbase Debian with PACKAGES (comma-separated), skipped when IMAGE exists.
build_image() {
  local image="$1" packages="$2" root
  if podman image exists "$image"; then echo "sandbox image $image exists (cached)"; return; fi
  root="$(mktemp -d /var/tmp/anneal-rootfs.XXXXXX)"
  # shellcheck disable=SC2064 # expand now: $root is local to this function
  trap "rm -rf '$root'" EXIT
  echo "building $image with debootstrap ($packages; 1.5 to 4 minutes)..."
  debootstrap --variant=minbase --include="$packages" bookworm "$root" "$MIRROR" >var/log/debootstrap.log 2>&1 \
    || { echo "debootstrap failed; see var/log/debootstrap.log" >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | podman import --quiet --change 'CMD ["/usr/bin/python3"]' - "$image" >/dev/null
  rm -rf "$root"
  trap - EXIT
  echo "built $image"
}

# The image of a sandbox profile (sandboxes/profiles.py: image_for): <repository>-<profile>:<tag>.
profile_image() { echo "${IMAGE%:*}-$1:${IMAGE##*:}"; }

image() {
  need podman podman; need debootstrap debootstrap
  write_conf
  build_image "$IMAGE" python3
}

# The toolchain profiles' images (the python, shell and sql profiles run on the base image). Their package
# lists are sandboxes/profiles.py's.
profiles() {
  need podman podman; need debootstrap debootstrap
  write_conf
  build_image "$(profile_image c-cpp)" python3,gcc,g++,libc6-dev
  build_image "$(profile_image javascript)" python3,nodejs
  build_image "$(profile_image render)" python3,librsvg2-bin
  build_image "$(profile_image spreadsheet)" python3,libreoffice-calc-nogui
  build_image "$(profile_image python-science)" python3,python3-numpy,python3-scipy,python3-pandas,python3-sympy
  build_image "$(profile_image sql-postgres)" python3,postgresql-15,python3-psycopg2
}

# The base of the platform's own image when no registry can be pulled from (scripts/compose-up.sh builds the
# Dockerfile FROM it): Python with venv and bubblewrap for the Anneal services, and Debian's PostgreSQL and
# Redis for the compose file's postgres and redis services (deploy/compose/local.yml).
platform_base() {
  need podman podman; need debootstrap debootstrap
  write_conf
  build_image "${ANNEAL_PLATFORM_BASE:-localhost/anneal-platform-base:bookworm}" \
    python3,python3-venv,bubblewrap,libseccomp2,ca-certificates,passwd,postgresql-15,redis-server,procps
}

mkdir -p var/log
case "${1:-all}" in
  service) service ;;
  image) image ;;
  profiles) profiles ;;
  platform-base) platform_base ;;
  all) image; profiles; service ;;
  *) echo "usage: $0 [service|image|profiles|platform-base|all]" >&2; exit 2 ;;
esac
