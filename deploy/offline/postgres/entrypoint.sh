#!/bin/sh
# Entrypoint of the offline PostgreSQL image: on an empty data directory,
# create the cluster (UTF8, the superuser POSTGRES_USER with POSTGRES_PASSWORD,
# the database POSTGRES_DB), then run the server as postgres, listening on
# every interface of the container with password authentication.
set -eu
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
as_postgres="setpriv --reuid=postgres --regid=postgres --init-groups"

mkdir -p "$PGDATA"
chown postgres:postgres "$PGDATA"
chmod 0700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	chown postgres "$pwfile"
	$as_postgres initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
		--auth-local=trust --auth-host=scram-sha-256 >/dev/null
	rm -f "$pwfile"
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	if [ "$db" != postgres ]; then
		echo "CREATE DATABASE \"$db\" OWNER \"$user\";" | $as_postgres postgres --single -D "$PGDATA" -j postgres >/dev/null
	fi
	echo "postgres-entrypoint: initialised $PGDATA (user $user, database $db, UTF8)"
fi
exec $as_postgres postgres -D "$PGDATA" -c listen_addresses='*' "$@"
