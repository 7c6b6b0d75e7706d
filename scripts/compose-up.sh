#!/usr/bin/env bash
# docker-compose.yml brought up for real on this machine's Docker API (Podman's), where no registry can be
# pulled from: `make compose-up`, then `make compose-smoke`, then `make compose-down`.
#
#   up     Podman's Docker API (scripts/sandbox-image.sh service); the base image from Debian's packages
#          (sandbox-image.sh platform-base); the wheels of every package, made with the host's own package
#          index settings; the Dockerfile built FROM that base, installing from those wheels offline (mounted
#          read-only into the build); then `docker-compose up -d` with
#          deploy/compose/local.yml (Debian's PostgreSQL and Redis in place of the official images), and a
#          wait for /healthz.
#   smoke  scripts/compose_smoke.py against it: upload, verifier, job to the end, deploy, one /v1 completion;
#          with --fault STAGE=COMMAND, a fault drill on the cluster (see that script).
#   down   the cluster and its volumes removed.
#   compose ARGS  docker-compose with this cluster's files and settings (ps, logs web, exec -T web ...).
#
# Settings: PORT (8000), COMPOSE_PROJECT_NAME (anneal), extra `up` arguments after the command (for example
# `--scale sandbox=2 --scale worker=2`). The cluster's secrets are made once, in var/compose.env.
set -euo pipefail
cd "$(dirname "$0")/.."

SOCKET="${ANNEAL_PODMAN_SOCKET:-/run/anneal-podman.sock}"
BASE="${ANNEAL_PLATFORM_BASE:-localhost/anneal-platform-base:bookworm}"
PORT="${PORT:-8000}"
export DOCKER_HOST="unix://$SOCKET"
export CONTAINERS_CONF="$PWD/var/podman/containers.conf"
export COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-anneal}"
export PORT
ENV_FILE=var/compose.env
HEALTH_PID=var/compose-health.pid
compose() { docker-compose --env-file "$ENV_FILE" -f docker-compose.yml -f deploy/compose/local.yml "$@"; }

# Every wheel the image installs, made on this host with its own package index settings (its local indexes,
# and its compiler for the few packages published only as source), so that the build installs offline.
wheelhouse() {
  local started=$SECONDS
  # async-timeout: redis needs it on Python before 3.11.3, as Debian's 3.11.2 in the image is (not the host's).
  .venv/bin/pip wheel --quiet --wheel-dir var/wheelhouse . "setuptools>=68" "async-timeout>=4.0.3" \
    >var/log/compose-wheels.log 2>&1 \
    || { echo "making the wheels failed; see var/log/compose-wheels.log" >&2; tail -20 var/log/compose-wheels.log >&2; exit 1; }
  echo "wheels for the image in var/wheelhouse ($((SECONDS - started)) s)"
}

secrets() {
  [ -s "$ENV_FILE" ] && return
  mkdir -p var
  umask 077
  {
    echo "SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
    echo "POSTGRES_PASSWORD=$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
  } >"$ENV_FILE"
}

# Podman runs healthchecks from systemd timers; where there is no systemd (containers, CI machines), this
# loop runs them, so that compose's `condition: service_healthy` is ever met.
health_loop() {
  [ -s "$HEALTH_PID" ] && kill -0 "$(cat "$HEALTH_PID")" 2>/dev/null && return
  if [ "$(ps -p 1 -o comm=)" = systemd ]; then return; fi
  (
    while true; do
      for id in $(podman ps -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME"); do
        podman healthcheck run "$id" >/dev/null 2>&1 || true
      done
      sleep 3
    done
  ) >/dev/null 2>&1 &
  echo $! >"$HEALTH_PID"
}

wait_healthz() {
  local deadline=$((SECONDS + ${1:-600}))
  until curl -sf --max-time 5 "http://127.0.0.1:$PORT/healthz" >/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      echo "/healthz did not answer 200 on port $PORT; its last answer and the cluster's state:" >&2
      curl -s --max-time 5 "http://127.0.0.1:$PORT/healthz" >&2 || true
      compose ps >&2 || true
      exit 1
    fi
    sleep 3
  done
  echo "the cluster answers /healthz on http://127.0.0.1:$PORT"
}

up() {
  command -v docker-compose >/dev/null || { echo "docker-compose not found: scripts/setup-system.sh test" >&2; exit 1; }
  scripts/sandbox-image.sh service
  scripts/sandbox-image.sh platform-base
  wheelhouse
  local started=$SECONDS
  echo "building anneal:latest from the Dockerfile on $BASE ..."
  podman build -t anneal:latest --build-arg "BASE=$BASE" --build-arg PIP_NO_INDEX=1 \
    --build-arg PIP_FIND_LINKS=/wheelhouse -v "$PWD/var/wheelhouse:/wheelhouse:ro" . >var/log/compose-build.log 2>&1 \
    || { echo "the image build failed; see var/log/compose-build.log" >&2; tail -20 var/log/compose-build.log >&2; exit 1; }
  echo "built anneal:latest in $((SECONDS - started)) s"
  secrets
  health_loop
  started=$SECONDS
  compose up -d --no-build "$@"
  wait_healthz 600
  echo "up in $((SECONDS - started)) s"
}

down() {
  if [ -s "$HEALTH_PID" ]; then kill "$(cat "$HEALTH_PID")" 2>/dev/null || true; rm -f "$HEALTH_PID"; fi
  [ -s "$ENV_FILE" ] || secrets
  compose down -v --remove-orphans
}

mkdir -p var/log
case "${1:-up}" in
  up) shift || true; up "$@" ;;
  smoke)
    run=$(date +%s)  # a team of its own each time: names (verifiers, deployments) are unique per team
    token=$(compose exec -T web python manage.py anneal_member --username "smoke-$run" \
      --organisation Smoke --team "Smoke $run" --role owner --token smoke | tail -1)
    shift
    .venv/bin/python scripts/compose_smoke.py --url "http://127.0.0.1:$PORT" --token "$token" "$@" ;;
  down) down ;;
  compose) shift; compose "$@" ;;
  *) echo "usage: $0 [up [compose up flags]|smoke [--fault STAGE=COMMAND]|down|compose ARGS...]" >&2; exit 2 ;;
esac
