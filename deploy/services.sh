#!/usr/bin/env bash
# Starts the extra loopback servers the tests need (nanio for S3, SecantusDB for MongoDB) when they
# are not already listening, and checks the ones this kind of machine already runs (PostgreSQL,
# MariaDB, RabbitMQ). Idempotent and quiet on success.
#
#   deploy/services.sh start   install (once) and start what is missing, create the test bucket
#   deploy/services.sh stop    stop only the processes this script started (recorded PIDs)
#   deploy/services.sh env     print `export` lines: the settings the service reads for these
#                              servers (OBJECT_STORAGE_*, RABBITMQ_URL, ...) and the tests' names
#
# Overrides: FETCHER_TOOLS_DIR, FETCHER_TEST_S3_PORT, FETCHER_TEST_MONGO_PORT.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$REPO/.ci-state"
TOOLS="${FETCHER_TOOLS_DIR:-$STATE/tools}"
S3_PORT="${FETCHER_TEST_S3_PORT:-9100}"
MONGO_PORT="${FETCHER_TEST_MONGO_PORT:-27018}"
S3_BUCKET="fetcher-test"
# Fixed, test-only credentials of the local nanio server; not a secret.
S3_ACCESS_KEY="fetcher-test"
S3_SECRET_KEY="fetcher-test-secret"
WAIT_SECONDS=30

die() { echo "services.sh: $*" >&2; exit 1; }

port_open() {
    # bash's /dev/tcp: true when something accepts connections on 127.0.0.1:$1
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_port() { # port name log [pid]
    local port="$1" name="$2" log="$3" pid="${4:-}" i
    for ((i = 0; i < WAIT_SECONDS * 10; i++)); do
        port_open "$port" && return 0
        if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
            die "$name exited before listening on 127.0.0.1:$port (log: $log)"
        fi
        sleep 0.1
    done
    die "$name is not listening on 127.0.0.1:$port after ${WAIT_SECONDS}s (log: $log)"
}

ensure_venv() { # name pip-spec executable
    local dir="$TOOLS/$1"
    if [[ ! -x "$dir/bin/$3" || "$(cat "$dir/.spec" 2>/dev/null)" != "$2" ]]; then
        mkdir -p "$TOOLS"
        rm -rf "$dir"
        python3 -m venv "$dir" >/dev/null
        if ! "$dir/bin/pip" install --quiet --disable-pip-version-check "$2" \
            >"$STATE/$1-install.log" 2>&1; then
            cat "$STATE/$1-install.log" >&2
            die "pip install $2 failed"
        fi
        echo "$2" >"$dir/.spec"
    fi
}

start_bg() { # name port command...   (the name includes the port: one PID file per server)
    local name="$1-$2" port="$2" pid
    shift 2
    if port_open "$port"; then
        # Someone (maybe an earlier run) serves the port; forget a PID that is no longer alive.
        if [[ -e "$STATE/$name.pid" ]] && ! ours "$(cat "$STATE/$name.pid")"; then
            rm -f "$STATE/$name.pid"
        fi
        return 0
    fi
    nohup "$@" >"$STATE/$name.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$STATE/$name.pid"
    wait_port "$port" "$name" "$STATE/$name.log" "$pid"
}

start_nanio() {
    ensure_venv nanio nanio nanio
    mkdir -p "$STATE/nanio-data"
    NANIO_ACCESS_KEY="$S3_ACCESS_KEY" NANIO_SECRET_KEY="$S3_SECRET_KEY" \
        start_bg nanio "$S3_PORT" "$TOOLS/nanio/bin/nanio" serve \
        --data-dir "$STATE/nanio-data" --host 127.0.0.1 --port "$S3_PORT" --no-access-log
}

start_secantus() {
    ensure_venv secantus "secantusdb==0.7.0b3" secantusd-py
    mkdir -p "$STATE/secantus-data"
    start_bg secantus "$MONGO_PORT" "$TOOLS/secantus/bin/secantusd-py" \
        --host 127.0.0.1 --port "$MONGO_PORT" --storage-path "$STATE/secantus-data"
}

create_bucket() {
    [[ -x "$REPO/.venv/bin/python" ]] || die "project venv missing at $REPO/.venv"
    S3_ENDPOINT="http://127.0.0.1:$S3_PORT" S3_BUCKET="$S3_BUCKET" \
        S3_ACCESS_KEY="$S3_ACCESS_KEY" S3_SECRET_KEY="$S3_SECRET_KEY" \
        "$REPO/.venv/bin/python" - <<'PY' || die "could not create bucket $S3_BUCKET"
import os
import sys

import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError

client = botocore.session.get_session().create_client(
    "s3",
    endpoint_url=os.environ["S3_ENDPOINT"],
    region_name="us-east-1",
    aws_access_key_id=os.environ["S3_ACCESS_KEY"],
    aws_secret_access_key=os.environ["S3_SECRET_KEY"],
    config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard"}),
)
bucket = os.environ["S3_BUCKET"]
try:
    client.head_bucket(Bucket=bucket)
except ClientError:
    try:
        client.create_bucket(Bucket=bucket)
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        if code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            print(f"create_bucket failed: {code}", file=sys.stderr)
            sys.exit(1)
PY
}

ensure_system_service() { # name port restart-command...
    local name="$1" port="$2"
    shift 2
    port_open "$port" && return 0
    echo "services.sh: $name is not listening on $port, restarting it" >&2
    "$@" >"$STATE/$name-restart.log" 2>&1 || true
    wait_port "$port" "$name" "$STATE/$name-restart.log"
}

check_system_services() {
    local pg_version
    pg_version="$(find /etc/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null \
        | sort | head -n1 || true)"
    if [[ -n "$pg_version" ]]; then
        ensure_system_service postgresql 5432 \
            pg_ctlcluster --skip-systemctl-redirect "$pg_version" main start
    else
        port_open 5432 || die "PostgreSQL is not listening on 5432 and is not installed"
    fi
    ensure_system_service mariadb 3306 \
        start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
    ensure_system_service rabbitmq 5672 rabbitmq-server -detached
}

ours() { # pid: alive and started by this script (its command line names our state folder)
    [[ "$1" =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null \
        && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$STATE"
}

stop_recorded() {
    local pidfile pid i
    for pidfile in "$STATE"/*.pid; do
        [[ -e "$pidfile" ]] || continue
        pid="$(cat "$pidfile")"
        if ours "$pid"; then
            kill "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            if kill -0 "$pid" 2>/dev/null; then
                kill -KILL "$pid" 2>/dev/null || true
            fi
        fi
        rm -f "$pidfile"
    done
}

print_env() {
    # First the settings the service reads, so that `eval "$(deploy/services.sh env)"` lets
    # `fetcher api`, `worker`, `relay` and `check` run against this machine's servers (the
    # event store in the local PostgreSQL's database `test`, RabbitMQ's default vhost as
    # guest, the S3 server's bucket); then the names the tests read.
    cat <<EOF
export FETCHER_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test
export RABBITMQ_URL=amqp://guest:guest@127.0.0.1:5672/
export OBJECT_STORAGE_ENDPOINT=http://127.0.0.1:$S3_PORT
export OBJECT_STORAGE_BUCKET=$S3_BUCKET
export OBJECT_STORAGE_REGION=us-east-1
export OBJECT_STORAGE_ACCESS_KEY_ID=$S3_ACCESS_KEY
export OBJECT_STORAGE_SECRET_KEY=$S3_SECRET_KEY
export OBJECT_STORAGE_USE_PATH_STYLE=true
export FETCHER_TEST_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
export FETCHER_TEST_S3_BUCKET=$S3_BUCKET
export FETCHER_TEST_S3_ACCESS_KEY=$S3_ACCESS_KEY
export FETCHER_TEST_S3_SECRET_KEY=$S3_SECRET_KEY
export FETCHER_TEST_MONGO_URL=mongodb://127.0.0.1:$MONGO_PORT
export FETCHER_TEST_NANIO=$TOOLS/nanio/bin/nanio
EOF
}

main() {
    mkdir -p "$STATE"
    case "${1:-}" in
        start)
            check_system_services
            start_nanio
            start_secantus
            create_bucket
            ;;
        stop) stop_recorded ;;
        env) print_env ;;
        *) die "usage: $0 start|stop|env" ;;
    esac
}

main "$@"
