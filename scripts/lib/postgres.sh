# Shared by scripts/test, scripts/run and the benchmark and check scripts: install what is missing,
# and start a PostgreSQL cluster of our own (throwaway or under .data/) when DATABASE_URL is unset.
# Source it; it defines functions only.

# Prints a line to stderr with the script's name.
say() { echo "[$(basename "$0")] $*" >&2; }

# apt-get waits this long for the dpkg lock that another apt-get (an unattended upgrade, another
# script) holds, instead of failing at once.
APT_LOCK_WAIT=(-o DPkg::Lock::Timeout=120)

# Installs Debian packages that are missing, or says exactly what to install when we cannot.
ensure_packages() {
    local missing=()
    local package
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        say "installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get "${APT_LOCK_WAIT[@]}" install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
            apt-get "${APT_LOCK_WAIT[@]}" update -q >/dev/null 2>&1
            apt-get "${APT_LOCK_WAIT[@]}" install -y -q --no-install-recommends "${missing[@]}" >/dev/null
        }
    else
        say "missing packages: ${missing[*]}. Install them with: sudo apt-get install ${missing[*]}"
        exit 1
    fi
}

# ensure_commands COMMAND:PACKAGE...: installs PACKAGE only when COMMAND is not on PATH (psql comes
# with postgresql-client-NN, which the server packages install, not only with postgresql-client).
ensure_commands() {
    local pair missing=()
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
    done
    [ ${#missing[@]} -eq 0 ] || ensure_packages "${missing[@]}"
}

# The build needs libpq's headers (pkg-config libpq); a local cluster needs the server binaries.
ensure_build_packages() {
    ensure_packages libpq-dev pkg-config
}

ensure_server_packages() {
    ensure_packages postgresql
}

# Directory of initdb/pg_ctl/postgres: the newest installed major version.
postgres_bindir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
        say "no PostgreSQL server binaries under /usr/lib/postgresql (install the postgresql package)"
        exit 1
    fi
    echo "$dir"
}

# A free TCP port on 127.0.0.1.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Runs a command as the postgres user when we are root (PostgreSQL refuses to run as root).
as_db_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# Processes whose working directory is DATA: a postmaster and every one of its children chdir there.
processes_in() {
    local data=$1 p
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/cwd" 2>/dev/null)" = "$data" ] && echo "${p#/proc/}"
    done
    return 0
}

# recover_cluster DIR: makes DIR/data startable after an unclean end. A postmaster.pid whose
# process is gone (or whose number now belongs to another process, which PostgreSQL would take for
# a running server) is removed, with the socket lock files in DIR; a server still running there
# (left by a script that was killed) is stopped first, so the start below gets the options it asks for.
recover_cluster() {
    local dir=$1 pid_file="$1/data/postmaster.pid" data pid running _
    [ -f "$pid_file" ] || return 0
    data=$(cd "$dir/data" && pwd -P)
    pid=$(head -1 "$pid_file" 2>/dev/null || true)
    running=$(processes_in "$data")
    if [ -n "$pid" ] && grep -qx "$pid" <<<"$running"; then
        say "a PostgreSQL server was left running in $dir (pid $pid); stopping it first"
        as_db_owner "$(postgres_bindir)/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    fi
    # Children of a killed postmaster notice its death and exit within moments.
    for _ in $(seq 1 100); do
        running=$(processes_in "$data" | tr '\n' ' ')
        [ -z "$running" ] && break
        sleep 0.1
    done
    if [ -n "$running" ]; then
        say "processes still running in $dir/data (pids $running); stop them, then run again"
        exit 1
    fi
    if [ -f "$pid_file" ]; then
        say "removing the stale postmaster.pid in $dir (process $pid is not its server)"
        rm -f "$pid_file" "$dir"/.s.PGSQL.*.lock
    fi
}

# start_cluster DIR PORT DURABLE: initialises DIR/data when needed, starts a server on
# 127.0.0.1:PORT with its socket in DIR, creates database "adtally", exports DATABASE_URL.
# DURABLE=no turns fsync off (throwaway test clusters only).
start_cluster() {
    local dir=$1 port=$2 durable=${3:-yes}
    local bindir
    bindir=$(postgres_bindir)
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; chmod 700 "$dir"; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_db_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
            || { cat "$dir/initdb.log" >&2; say "initdb failed"; exit 1; }
    fi
    recover_cluster "$dir"
    local options="-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=300 -c shared_buffers=256MB"
    [ "$durable" = "no" ] && options="$options -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    # ADTALLY_PG_OPTIONS: more server options of the caller's (a profiling run's extension, say).
    [ -n "${ADTALLY_PG_OPTIONS:-}" ] && options="$options $ADTALLY_PG_OPTIONS"
    as_db_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "$options" -w -t 60 start >/dev/null \
        || { cat "$dir/server.log" >&2; say "PostgreSQL did not start"; exit 1; }
    as_db_owner "$bindir/psql" -h "$dir" -p "$port" -U postgres -d postgres -qtAc \
        "SELECT 1 FROM pg_database WHERE datname = 'adtally'" | grep -q 1 \
        || as_db_owner "$bindir/createdb" -h "$dir" -p "$port" -U postgres adtally
    export DATABASE_URL="postgresql://postgres@127.0.0.1:$port/adtally"
    export ADTALLY_PG_DIR="$dir" ADTALLY_PG_PORT="$port" ADTALLY_PG_BINDIR="$bindir"
}

# stop_cluster DIR: fast shutdown; quiet when it is not running. Returns once no process of the
# cluster is left: pg_ctl returns when the postmaster has gone, and its children (which notice
# that) may still be exiting for a moment, longer on a loaded machine.
stop_cluster() {
    local dir=$1 data _
    [ -f "$dir/data/postmaster.pid" ] || return 0
    as_db_owner "$(postgres_bindir)/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    data=$(cd "$dir/data" 2>/dev/null && pwd -P) || return 0
    for _ in $(seq 1 100); do
        [ -z "$(processes_in "$data")" ] && return 0
        sleep 0.1
    done
    say "processes of the cluster in $dir are still running after it stopped"
}

# start_throwaway_cluster: a cluster in a temporary folder, stopped and deleted on any exit.
start_throwaway_cluster() {
    ensure_server_packages
    ADTALLY_THROWAWAY_DIR=$(mktemp -d /tmp/adtally-pg.XXXXXX)
    chmod 755 "$ADTALLY_THROWAWAY_DIR"
    trap stop_throwaway_cluster EXIT
    start_cluster "$ADTALLY_THROWAWAY_DIR/pg" "$(free_port)" "${1:-no}"
    say "throwaway PostgreSQL on 127.0.0.1:$ADTALLY_PG_PORT ($ADTALLY_THROWAWAY_DIR)"
}

# Stops and deletes the cluster start_throwaway_cluster started, if it did (nothing otherwise): the
# one cleanup of it, for scripts that replace its EXIT trap with their own and call this from it.
stop_throwaway_cluster() {
    if [ -n "${ADTALLY_THROWAWAY_DIR:-}" ]; then
        stop_cluster "$ADTALLY_THROWAWAY_DIR/pg"
        rm -rf "$ADTALLY_THROWAWAY_DIR"
    fi
}

# --- Replication and pooling (scripts/chaos failover, the topology tests) ---

# start_standby PRIMARY_PORT DIR PORT [DURABLE] [SETTINGS]: a hot standby of the primary on
# 127.0.0.1:PRIMARY_PORT, copied with pg_basebackup (-R: it then streams from the primary, as
# application_name "adtally_standby"), started on 127.0.0.1:PORT. SETTINGS: extra postgresql.conf
# lines for the standby (such as "max_standby_streaming_delay = 0").
start_standby() {
    local primary_port=$1 dir=$2 port=$3 durable=${4:-yes} settings=${5:-}
    local bindir
    bindir=$(postgres_bindir)
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; chmod 700 "$dir"; fi
    as_db_owner "$bindir/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$dir/data" -R -X stream -c fast \
        -d "application_name=adtally_standby" >"$dir/basebackup.log" 2>&1 \
        || { cat "$dir/basebackup.log" >&2; say "pg_basebackup failed"; exit 1; }
    [ -n "$settings" ] && printf '%s\n' "$settings" | as_db_owner tee -a "$dir/data/postgresql.auto.conf" >/dev/null
    start_cluster "$dir" "$port" "$durable"
}

# set_synchronous_standby PORT NAMES: synchronous_standby_names on the primary on 127.0.0.1:PORT
# ('*': any standby confirms each commit; '': asynchronous), reloaded.
set_synchronous_standby() {
    local port=$1 names=$2
    as_db_owner "$(postgres_bindir)/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qtAX \
        -c "ALTER SYSTEM SET synchronous_standby_names = '$names'" -c "SELECT pg_reload_conf()" >/dev/null
}

# promote_cluster DIR: ends recovery; returns once the server accepts writes.
promote_cluster() {
    as_db_owner "$(postgres_bindir)/pg_ctl" -D "$1/data" -w -t 60 promote >/dev/null
}

# cluster_pids DIR: the postmaster of DIR and its children (the whole server, as a machine's crash
# or freeze would take it).
cluster_pids() {
    local pid
    pid=$(head -1 "$1/data/postmaster.pid" 2>/dev/null) || return 0
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    echo "$pid" $(pgrep -P "$pid")
}

# signal_cluster DIR SIGNAL: sends SIGNAL (KILL, STOP, CONT) to every process of the server.
signal_cluster() {
    local pids
    pids=$(cluster_pids "$1")
    [ -n "$pids" ] && kill -"$2" $pids 2>/dev/null
    return 0
}

# start_pgbouncer DIR PORT TARGET_PORT: pgbouncer in transaction pooling mode on 127.0.0.1:PORT in
# front of the PostgreSQL on 127.0.0.1:TARGET_PORT, for every database, user postgres without a
# password. It runs as the postgres user (pgbouncer refuses root); stop it with stop_pgbouncer DIR.
start_pgbouncer() {
    local dir=$1 port=$2 target=$3
    ensure_packages pgbouncer
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$target
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
max_client_conn = 5000
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    echo '"postgres" ""' >"$dir/users.txt"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir/pgbouncer.ini" "$dir/users.txt"; fi
    as_db_owner pgbouncer -q -d "$dir/pgbouncer.ini" || { cat "$dir/pgbouncer.log" >&2 2>/dev/null; say "pgbouncer did not start"; exit 1; }
    local i
    for i in $(seq 1 100); do
        as_db_owner "$(postgres_bindir)/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qtAXc "SELECT 1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    cat "$dir/pgbouncer.log" >&2 2>/dev/null
    say "pgbouncer does not answer on port $port"
    exit 1
}

# stop_pgbouncer DIR: stops the pgbouncer of DIR (by its pid file) and waits for it; quiet when none.
stop_pgbouncer() {
    local pid
    pid=$(cat "$1/pgbouncer.pid" 2>/dev/null) || return 0
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    local i
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}
