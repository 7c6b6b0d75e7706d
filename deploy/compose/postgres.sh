#!/bin/sh
# Debian's PostgreSQL 15 run as the official postgres image runs it (deploy/compose/local.yml): on the first
# start, a cluster in /var/lib/postgresql/data with POSTGRES_USER (password POSTGRES_PASSWORD, scram) owning
# POSTGRES_DB, in UTF-8 (the official image's encoding; minbase has no locale, which would make it SQL_ASCII);
# then the server on every address of the compose network.
set -eu
bin=/usr/lib/postgresql/15/bin
data=/var/lib/postgresql/data
mkdir -p "$data" /var/run/postgresql
chown postgres:postgres "$data" /var/run/postgresql
chmod 700 "$data"
as_postgres() { runuser -u postgres -- "$@"; }
if [ ! -s "$data/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  chown postgres "$pwfile"
  as_postgres "$bin/initdb" -D "$data" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$data/pg_hba.conf"
  as_postgres "$bin/pg_ctl" -D "$data" -w -o "-c listen_addresses=''" start
  as_postgres "$bin/createdb" -U "$POSTGRES_USER" "$POSTGRES_DB"
  as_postgres "$bin/pg_ctl" -D "$data" -m fast -w stop
fi
exec runuser -u postgres -- "$bin/postgres" -D "$data" -c listen_addresses='*'
