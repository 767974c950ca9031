#!/usr/bin/env bash
# The test command, and exactly what CI runs. It sets up what the tests need, then:
#
#   * checks formatting and lints (cargo fmt --check, clippy with warnings as errors), that
#     every crate uses each dependency it lists (cargo machete) and that no circle of imports
#     spans more than two of a crate's files (tests/import_circles.py);
#   * builds the binaries the end-to-end tests start and runs every test, then the capsule
#     tests once more with spawned (not forked) interpreter runs;
#   * builds the release binaries and runs the compose suite (deploy/test-compose.sh: Docker
#     images built here, core + three edges + proxy + a local OTLP receiver).
#
# Arguments narrow a run to the tests they select and skip the rest: they go to
# `cargo nextest run`, e.g. tests/run.sh -E 'test(store)'.
#
# What the tests need:
#
#   * PostgreSQL: a throwaway cluster from the installed server binaries
#     (/usr/lib/postgresql/<newest>/bin), on loopback and a free port, with a random
#     superuser password, stopped and removed when this script exits. Debian's
#     `postgresql` is installed when the binaries are missing and we run as root.
#   * Python: a virtualenv at target/test-venv with tests/python/requirements.txt
#     installed (the MCP SDK, FastMCP, the A2A SDK and Playwright), rebuilt when the
#     requirements change.
#   * Chromium: Debian's `chromium`, installed when missing and we run as root, for the
#     explorer's browser test.
#   * Docker with compose, for the compose suite.
#
# WORLD_TEST_POSTGRES_URL (an admin URL of a server the tests may create databases on),
# WORLD_TEST_PYTHON (a python with the requirements installed) and WORLD_TEST_CHROMIUM (a
# Chromium executable), when set, are used instead.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'tests/run.sh: %s\n' "$*" >&2; }
die() {
    say "$*"
    exit 1
}

cargo nextest --version >/dev/null 2>&1 ||
    die "cargo-nextest is missing: install it with 'cargo install cargo-nextest --locked'"

# No arguments: the whole run, lints first since they fail fastest.
whole=$([ $# -eq 0 ] && echo yes || true)
if [ -n "$whole" ]; then
    say "checking formatting and lints"
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo machete --version >/dev/null 2>&1 ||
        die "cargo-machete is missing: install it with 'cargo install cargo-machete --locked'"
    cargo machete
    python3 tests/import_circles.py core-svc/src edge-svc/src publish-cli/src packages/*/src
fi

# ---------------------------------------------------------------------------
# PostgreSQL

pg_dir=""
pg_bin=""
pg_user=""

# Runs a PostgreSQL server program as the cluster's owner (PostgreSQL refuses root).
as_owner() {
    if [ -n "$pg_user" ]; then
        (cd "$pg_dir" && runuser -u "$pg_user" -- "$@")
    else
        "$@"
    fi
}

stop_postgres() {
    if [ -n "$pg_dir" ] && [ -d "$pg_dir" ]; then
        if [ -f "$pg_dir/data/postmaster.pid" ]; then
            say "stopping the PostgreSQL cluster"
            as_owner "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -t 30 -w stop >/dev/null 2>&1 || true
        fi
        rm -rf "$pg_dir"
    fi
}

newest_pg_bin() {
    local version
    for version in $(ls /usr/lib/postgresql 2>/dev/null | sort -V -r); do
        local bin="/usr/lib/postgresql/$version/bin"
        if [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] && [ -x "$bin/postgres" ] && [ -x "$bin/pg_isready" ]; then
            echo "$bin"
            return
        fi
    done
}

# A loopback TCP port nothing listens on now (the server's bind is the final check).
free_port() {
    local port
    for _ in $(seq 1 50); do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    die "found no free loopback port"
}

start_postgres() {
    pg_bin=$(newest_pg_bin)
    if [ -z "$pg_bin" ]; then
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
            say "installing Debian's postgresql (its server binaries are missing)"
            DEBIAN_FRONTEND=noninteractive apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
            pg_bin=$(newest_pg_bin)
        fi
        [ -n "$pg_bin" ] || die "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin:" \
            "install them (Debian: sudo apt-get install postgresql), or set WORLD_TEST_POSTGRES_URL" \
            "to an admin URL of a server the tests may create databases on"
    fi

    if [ "$(id -u)" -eq 0 ]; then
        command -v runuser >/dev/null || die "running as root needs runuser (util-linux) to start PostgreSQL as another user"
        pg_user=postgres
        if ! id -u "$pg_user" >/dev/null 2>&1; then
            pg_user=world-test-pg
            id -u "$pg_user" >/dev/null 2>&1 ||
                useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$pg_user"
        fi
    fi

    pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/world-test-pg.XXXXXX")
    local password
    password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    printf '%s\n' "$password" >"$pg_dir/password"
    if [ -n "$pg_user" ]; then
        chown -R "$pg_user" "$pg_dir"
        runuser -u "$pg_user" -- test -w "$pg_dir" ||
            die "the $pg_user user cannot write $pg_dir: set TMPDIR to a directory it can reach"
    fi

    say "starting a throwaway PostgreSQL cluster ($pg_bin) in $pg_dir"
    as_owner "$pg_bin/initdb" -D "$pg_dir/data" -U postgres --pwfile="$pg_dir/password" \
        --auth=scram-sha-256 -E UTF8 --locale=C --no-sync >"$pg_dir/initdb.log" 2>&1 || {
        cat "$pg_dir/initdb.log" >&2
        die "initdb failed"
    }
    rm -f "$pg_dir/password"
    printf "%s\n" "listen_addresses = '127.0.0.1'" "unix_socket_directories = '$pg_dir'" \
        "max_connections = 300" >>"$pg_dir/data/postgresql.conf"

    local port started=""
    for _ in 1 2 3; do
        port=$(free_port)
        rm -f "$pg_dir/server.log"
        if as_owner "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
            -o "-p $port" start >/dev/null 2>&1; then
            started=yes
            break
        fi
        # A lost race for the port is worth another; anything else is not.
        grep -q 'could not bind\|could not create any TCP/IP sockets' "$pg_dir/server.log" 2>/dev/null || break
    done
    if [ -z "$started" ]; then
        tail -n 20 "$pg_dir/server.log" >&2 2>/dev/null || true
        die "the PostgreSQL cluster did not start"
    fi
    for i in $(seq 1 30); do
        "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$port" && break
        [ "$i" -lt 30 ] || die "the PostgreSQL cluster is not ready after 30 s"
        sleep 1
    done
    export WORLD_TEST_POSTGRES_URL="postgres://postgres:$password@127.0.0.1:$port/postgres"
    say "PostgreSQL is ready on 127.0.0.1:$port"
}

on_exit() {
    local status=$?
    stop_postgres
    exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -n "${WORLD_TEST_POSTGRES_URL:-}" ]; then
    say "PostgreSQL: using WORLD_TEST_POSTGRES_URL"
else
    start_postgres
fi

# ---------------------------------------------------------------------------
# Python

if [ -n "${WORLD_TEST_PYTHON:-}" ]; then
    say "Python: using WORLD_TEST_PYTHON ($WORLD_TEST_PYTHON)"
else
    requirements=tests/python/requirements.txt
    venv="${CARGO_TARGET_DIR:-target}/test-venv"
    mkdir -p "$(dirname "$venv")"
    venv=$(cd "$(dirname "$venv")" && pwd)/$(basename "$venv")
    command -v python3 >/dev/null || die "python3 is missing: install it (Debian: apt-get install python3 python3-venv)"
    # What the virtualenv was made from: the requirements and the interpreter.
    wanted="$(python3 -c 'import sys; print(sys.executable, sys.version.split()[0])')
$(cat "$requirements")"
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.made-from" 2>/dev/null)" = "$wanted" ]; then
        say "Python: reusing $venv"
    else
        say "Python: creating $venv with $requirements"
        rm -rf "$venv"
        python3 -m venv "$venv" >"${venv}.log" 2>&1 || {
            cat "${venv}.log" >&2
            rm -rf "$venv"
            die "python3 -m venv failed: install the venv module (Debian: apt-get install python3-venv)," \
                "or set WORLD_TEST_PYTHON to a python with $requirements installed"
        }
        "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements" </dev/null ||
            die "installing $requirements into $venv failed"
        printf '%s' "$wanted" >"$venv/.made-from"
        rm -f "${venv}.log"
    fi
    export WORLD_TEST_PYTHON="$venv/bin/python"
fi

# ---------------------------------------------------------------------------
# Chromium, for the explorer's browser test (Playwright drives it; it cannot download one)

if [ -n "${WORLD_TEST_CHROMIUM:-}" ]; then
    say "Chromium: using WORLD_TEST_CHROMIUM ($WORLD_TEST_CHROMIUM)"
else
    chromium=$(command -v chromium || command -v chromium-browser || true)
    if [ -z "$chromium" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        say "installing Debian's chromium (the explorer's browser test drives it)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        chromium=$(command -v chromium || true)
    fi
    [ -n "$chromium" ] || die "Chromium is missing: install it (Debian: sudo apt-get install chromium)," \
        "or set WORLD_TEST_CHROMIUM to a Chromium or Chrome executable"
    export WORLD_TEST_CHROMIUM="$chromium"
fi

# ---------------------------------------------------------------------------
# Build and run

say "building the binaries and running the tests"
cargo build --workspace --bins
# The crash tests' core: the same binary with its fault points live.
cargo build -p world-core --features fault-points --bin world-core-faults
cargo nextest run --workspace --no-fail-fast "$@"

if [ -n "$whole" ]; then
    # Interpreter runs are forked from the interpreter's fork server by default; the tests that
    # run transitions in the capsule run once more with each run spawned.
    say "running the capsule tests again with spawned interpreter runs"
    WORLD_INTERPRETER_RUNS=spawned cargo nextest run --workspace --no-fail-fast -E \
        'binary(invoke_grpc) | binary(mcp) | binary(a2a) | binary(effects) | binary(coding_tools) | binary(reference_tools)'

    say "building the release binaries and running the compose suite"
    cargo build --release --workspace --bins
    deploy/test-compose.sh
fi
