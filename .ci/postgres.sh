#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests, in a temporary directory, on 127.0.0.1.
#
#   eval "$(bash .ci/postgres.sh start)"   # prints: export TOOL_INDEX_TEST_PG=… TOOL_INDEX_PG_DIR=…
#   bash .ci/postgres.sh stop [DIR]        # DIR defaults to $TOOL_INDEX_PG_DIR
#   bash .ci/postgres.sh pause DIR          # stop the server, keeping its data and port
#   bash .ci/postgres.sh resume DIR         # start it again on the same port (an outage ends)
#
# Finds the server binaries (pg_config --bindir, /usr/lib/postgresql/*/bin, PATH); installs the
# Debian package when there are none and we run as root. As root the server runs as the
# `postgres` user (PostgreSQL refuses to run as root). Progress goes to stderr, the exports to
# stdout. The server trusts local connections and does not fsync: it is for tests only.
set -euo pipefail

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

find_bindir() {
    local dir
    if command -v pg_config >/dev/null 2>&1; then
        dir=$(pg_config --bindir 2>/dev/null || true)
        if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
    done
    if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
    return 1
}

# Run a command as the server's owner: `postgres` when we are root, else ourselves. From /, since
# the postgres user may not be allowed into the current directory.
as_owner() {
    if [ "$(id -u)" -ne 0 ]; then
        "$@"
    elif command -v runuser >/dev/null 2>&1; then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && su postgres -s /bin/sh -c "$(printf '%q ' "$@")")
    fi
}

# The server's settings: on 127.0.0.1 at port $1, its socket in $2.
server_options() {
    printf '%s' "-c listen_addresses=127.0.0.1 -p $1 -k $2 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
}

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

start() {
    local bindir dir port url
    if ! bindir=$(find_bindir); then
        [ "$(id -u)" -eq 0 ] || die "no PostgreSQL server binaries found; install PostgreSQL (apt-get install postgresql)"
        log "installing PostgreSQL with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq --no-install-recommends postgresql >&2
        bindir=$(find_bindir) || die "apt-get installed postgresql but no initdb was found"
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/tool-index-pg.XXXXXX")
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/sh postgres
        chown postgres: "$dir"
        if ! as_owner test -w "$dir"; then
            # The postgres user cannot reach $TMPDIR (say, under /root): use /tmp instead.
            rm -rf "$dir"
            dir=$(mktemp -d /tmp/tool-index-pg.XXXXXX)
            chown postgres: "$dir"
        fi
    fi
    chmod 0700 "$dir"
    as_owner "$bindir/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; die "initdb failed"; }
    local attempt
    for attempt in 1 2 3; do
        port=$(free_port)
        if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
            -o "$(server_options "$port" "$dir")" start >&2; then
            url="postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
            echo "$url" >"$dir/url"
            echo "$port" >"$dir/port"
            log "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, data in $dir"
            printf 'export TOOL_INDEX_TEST_PG=%q\n' "$url"
            printf 'export TOOL_INDEX_PG_DIR=%q\n' "$dir"
            return 0
        fi
        log "start on port $port failed (attempt $attempt)"
        tail -n 20 "$dir/server.log" >&2 2>/dev/null || true
    done
    rm -rf "$dir"
    die "could not start PostgreSQL"
}

stop() {
    local dir=${1:-${TOOL_INDEX_PG_DIR:-}} bindir
    [ -n "$dir" ] || die "stop: give the directory that start printed (or set TOOL_INDEX_PG_DIR)"
    [ -d "$dir" ] || { log "stop: $dir is already gone"; return 0; }
    [ -f "$dir/url" ] || [ -d "$dir/data" ] || die "stop: $dir is not a directory made by postgres.sh start"
    if [ -f "$dir/data/postmaster.pid" ] && bindir=$(find_bindir); then
        as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || log "pg_ctl stop failed; removing $dir anyway"
    fi
    rm -rf "$dir"
}

pause() {
    local dir=${1:-} bindir
    [ -f "$dir/port" ] || die "pause: give the directory that start printed"
    bindir=$(find_bindir) || die "no PostgreSQL server binaries found"
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2
}

resume() {
    local dir=${1:-} bindir
    [ -f "$dir/port" ] || die "resume: give the directory that start printed"
    bindir=$(find_bindir) || die "no PostgreSQL server binaries found"
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "$(server_options "$(cat "$dir/port")" "$dir")" start >&2
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    pause) pause "${2:-}" ;;
    resume) resume "${2:-}" ;;
    *) die "usage: postgres.sh start | stop [DIR] | pause DIR | resume DIR" ;;
esac
