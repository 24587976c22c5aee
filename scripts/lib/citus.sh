# PostgreSQL nodes of their own on this machine, for scripts/bench-citus (and, through
# `scripts/bench-citus --cluster-only`, for scripts/check-citus). Each node is a PostgreSQL server
# run by the postgres user
#   - in a network namespace of its own (adtally-bench-<node>), joined to the host by a veth pair
#     whose host end is on the bridge adtb0: the host is 10.77.0.1, the coordinator .10, the
#     workers .11, .12, .13, a plain PostgreSQL .20 (CITUS_NET changes 10.77.0); every node
#     listens on port 5432 of its own address;
#   - in a cgroup v1 of its own, /sys/fs/cgroup/cpu/adtally-bench/<node> (cpu.cfs_quota_us caps
#     its CPU; unlimited until bn_quota sets it) and /sys/fs/cgroup/cpuacct/adtally-bench/<node>
#     (cpuacct.usage counts its CPU time, every process of the server, in nanoseconds).
# Root only. Source after scripts/lib/postgres.sh; defines functions and variables only.
# bn_cleanup stops and removes everything these functions made; bn_sweep removes what a run that
# was killed outright (SIGKILL) left behind, once the lock (bn_lock) says no run is alive.

BN_PREFIX=adtally-bench           # network namespaces adtally-bench-<node>
BN_CG=adtally-bench               # cgroups .../cpu/adtally-bench/<node>, .../cpuacct/adtally-bench/<node>
BN_BRIDGE=adtb0
BN_NET="${CITUS_NET:-10.77.0}"
BN_LOCK=/run/adtally-bench-citus.lock
BN_CPU_CG=/sys/fs/cgroup/cpu
BN_ACCT_CG=/sys/fs/cgroup/cpuacct
BN_NODES=()                        # the nodes made, in order
declare -A BN_IP=() BN_DIR=()
BN_WORK=""                         # set by the caller: the folder the nodes' data directories go in
BN_BINDIR=""                       # set by bn_find_bindir
BN_LOCK_FD=""                      # set by bn_lock

# Fails unless this is root with cgroup v1 cpu and cpuacct controllers and iproute2.
bn_require_host() {
    [ "$(id -u)" -eq 0 ] || { say "run as root: it makes network namespaces and cgroups"; exit 1; }
    [ -f "$BN_CPU_CG/cpu.cfs_quota_us" ] && [ -f "$BN_ACCT_CG/cpuacct.usage" ] || {
        say "needs cgroup v1 cpu and cpuacct controllers at $BN_CPU_CG and $BN_ACCT_CG (cpu.cfs_quota_us, cpuacct.usage)"
        exit 1
    }
    ensure_commands ip:iproute2
}

# Sets BN_BINDIR: the PostgreSQL binaries the nodes run. PG_BINDIR if given; else those of the
# server CITUS_URL names (its pg_config BINDIR: that server must run on this machine); else the
# newest /usr/lib/postgresql/*/bin. Fails unless that installation has the citus extension.
bn_find_bindir() {
    if [ -n "${PG_BINDIR:-}" ]; then
        BN_BINDIR=$PG_BINDIR
    elif [ -n "${CITUS_URL:-}" ]; then
        BN_BINDIR=$(timeout 20 psql "$CITUS_URL" -qAtX -c "SELECT setting FROM pg_config WHERE name = 'BINDIR'") \
            || { say "could not ask CITUS_URL for its binaries (pg_config BINDIR)"; exit 1; }
    else
        BN_BINDIR=$(postgres_bindir)
    fi
    [ -x "$BN_BINDIR/postgres" ] && [ -x "$BN_BINDIR/initdb" ] && [ -x "$BN_BINDIR/pg_config" ] \
        || { say "no PostgreSQL server binaries in $BN_BINDIR"; exit 1; }
    local lib share
    lib=$("$BN_BINDIR/pg_config" --pkglibdir); share=$("$BN_BINDIR/pg_config" --sharedir)
    [ -f "$lib/citus.so" ] && [ -f "$share/extension/citus.control" ] || {
        say "the citus extension is not installed for $BN_BINDIR ($lib/citus.so): build and install it as docs/SCALING.md (Installing Citus) says"
        exit 1
    }
    [ -f "$share/extension/pg_stat_statements.control" ] || ensure_packages postgresql-contrib
}

# The citus version the nodes' installation offers (its control file's default_version).
bn_citus_version() {
    sed -n "s/^default_version = '\(.*\)'/\1/p" "$("$BN_BINDIR/pg_config" --sharedir)/extension/citus.control"
}

# bn_lock: one run at a time on this machine (the addresses, namespaces and cgroups are fixed
# names). Waits up to 10 s, then fails. Whatever is started in the background must not inherit the
# lock's descriptor ({BN_LOCK_FD}>&-), or a process left by a killed run would keep it.
bn_lock() {
    exec {BN_LOCK_FD}>"$BN_LOCK"
    flock -w 10 "$BN_LOCK_FD" || { say "another scripts/bench-citus is running (it holds $BN_LOCK)"; exit 1; }
}

# Kills the processes of a cgroup (pids read from it: only what a run of ours put there).
bn_kill_cgroup() {
    local dir=$1 pid
    [ -d "$dir" ] || return 0
    for pid in $(cat "$dir/cgroup.procs" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 50); do [ -z "$(cat "$dir/cgroup.procs" 2>/dev/null)" ] && break; sleep 0.1; done
}

# bn_sweep: what an earlier run killed outright left (namespaces, cgroups and their processes, the
# bridge). Call it holding the lock: no live run owns them then.
bn_sweep() {
    local ns pid dir found=no
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$BN_PREFIX-" || true); do
        found=yes
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    for dir in "$BN_CPU_CG/$BN_CG" "$BN_ACCT_CG/$BN_CG"; do
        [ -d "$dir" ] || continue
        found=yes
        for sub in "$dir"/*/; do
            [ -d "$sub" ] || continue
            bn_kill_cgroup "${sub%/}"
            rmdir "${sub%/}" 2>/dev/null || true
        done
        rmdir "$dir" 2>/dev/null || true
    done
    ip link show "$BN_BRIDGE" >/dev/null 2>&1 && { found=yes; ip link del "$BN_BRIDGE" 2>/dev/null || true; }
    [ "$found" = no ] || say "removed what an earlier run left behind (namespaces, cgroups, bridge)"
}

# bn_net_up: the bridge the nodes' veths join, with the host's address.
bn_net_up() {
    ip link add "$BN_BRIDGE" type bridge
    ip addr add "$BN_NET.1/24" dev "$BN_BRIDGE"
    ip link set "$BN_BRIDGE" up
}

# bn_node_make NAME HOST_NUMBER SETTINGS: a namespace, a veth, cgroups and an initialised data
# directory for node NAME at $BN_NET.HOST_NUMBER; SETTINGS are postgresql.conf lines of its own.
bn_node_make() {
    local name=$1 number=$2 settings=$3 ns="$BN_PREFIX-$1" ip="$BN_NET.$2" dir="$BN_WORK/$1"
    BN_NODES+=("$name"); BN_IP[$name]=$ip; BN_DIR[$name]=$dir
    ip netns add "$ns"
    ip link add "adtv-$name" type veth peer name "adtp-$name"
    ip link set "adtp-$name" netns "$ns"
    ip -n "$ns" link set "adtp-$name" name eth0
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip link set "adtv-$name" master "$BN_BRIDGE"
    ip link set "adtv-$name" up
    mkdir -p "$BN_CPU_CG/$BN_CG/$name" "$BN_ACCT_CG/$BN_CG/$name"
    echo 100000 >"$BN_CPU_CG/$BN_CG/$name/cpu.cfs_period_us"
    echo -1 >"$BN_CPU_CG/$BN_CG/$name/cpu.cfs_quota_us"
    mkdir -p "$dir"; chown postgres: "$dir"; chmod 700 "$dir"
    runuser -u postgres -- "$BN_BINDIR/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-instructions \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; say "initdb failed for $name"; exit 1; }
    {
        echo "# scripts/bench-citus"
        # Its own address, and its namespace's loopback: Citus connects to the node it runs on
        # through citus.local_hostname (localhost) to move or copy a shard.
        echo "listen_addresses = '$ip,127.0.0.1'"
        echo "port = 5432"
        echo "unix_socket_directories = '$dir'"
        echo "$settings"
    } >>"$dir/data/postgresql.conf"
    echo "host all all $BN_NET.0/24 trust" >>"$dir/data/pg_hba.conf"
}

# bn_node_start NAME: starts the node's server inside its namespace and cgroups (the wrapper
# shell joins the cgroups, then becomes ip netns exec ... pg_ctl; the server inherits both).
bn_node_start() {
    local name=$1 dir=${BN_DIR[$1]}
    timeout 90 sh -c 'echo $$ >"$1/cgroup.procs" && echo $$ >"$2/cgroup.procs" &&
        exec ip netns exec "$3" runuser -u postgres -- "$4/pg_ctl" -D "$5/data" -l "$5/server.log" -w -t 60 start' \
        sh "$BN_CPU_CG/$BN_CG/$name" "$BN_ACCT_CG/$BN_CG/$name" "$BN_PREFIX-$name" "$BN_BINDIR" "$dir" >/dev/null {BN_LOCK_FD}>&- \
        || { tail -20 "$dir/server.log" >&2; say "PostgreSQL node $name did not start"; exit 1; }
    local _
    for _ in $(seq 1 100); do
        timeout 5 "$BN_BINDIR/pg_isready" -q -h "${BN_IP[$name]}" -p 5432 && return 0
        sleep 0.1
    done
    say "node $name does not answer on ${BN_IP[$name]}:5432 from the host"; exit 1
}

# bn_node_stop NAME: stops the server (fast, then immediate), then kills whatever of it is left
# in its cgroup.
bn_node_stop() {
    local name=$1 dir=${BN_DIR[$1]}
    if [ -f "$dir/data/postmaster.pid" ]; then
        timeout 40 runuser -u postgres -- "$BN_BINDIR/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 \
            || timeout 20 runuser -u postgres -- "$BN_BINDIR/pg_ctl" -D "$dir/data" -m immediate -w -t 10 stop >/dev/null 2>&1 \
            || true
    fi
    bn_kill_cgroup "$BN_CPU_CG/$BN_CG/$name"
}

# bn_cleanup: every node stopped, its namespace (and so its veth pair) and cgroups removed; the bridge.
bn_cleanup() {
    local name
    for name in "${BN_NODES[@]}"; do bn_node_stop "$name"; done
    for name in "${BN_NODES[@]}"; do
        ip netns del "$BN_PREFIX-$name" 2>/dev/null || true
        ip link del "adtv-$name" 2>/dev/null || true
        rmdir "$BN_CPU_CG/$BN_CG/$name" "$BN_ACCT_CG/$BN_CG/$name" 2>/dev/null || true
    done
    rmdir "$BN_CPU_CG/$BN_CG" "$BN_ACCT_CG/$BN_CG" 2>/dev/null || true
    ip link del "$BN_BRIDGE" 2>/dev/null || true
    BN_NODES=()
}

# bn_quota NAME CPUS: caps the node at CPUS CPUs (0.25: 25 ms of every 100 ms); "none" lifts it.
bn_quota() {
    local quota=-1
    [ "$2" = none ] || quota=$(awk -v c="$2" 'BEGIN { printf "%d", c * 100000 }')
    echo "$quota" >"$BN_CPU_CG/$BN_CG/$1/cpu.cfs_quota_us"
}

# bn_cpu_ns NAME: CPU time of every process of the node so far, in nanoseconds.
bn_cpu_ns() { cat "$BN_ACCT_CG/$BN_CG/$1/cpuacct.usage"; }

# bn_throttled NAME: how many 100 ms periods the quota held the node back so far.
bn_throttled() { awk '$1 == "nr_throttled" { print $2 }' "$BN_CPU_CG/$BN_CG/$1/cpu.stat"; }

# bn_url NAME DATABASE: the URL of a database on a node, from the host.
bn_url() { echo "postgresql://postgres@${BN_IP[$1]}:5432/$2"; }

# bn_sql NAME DATABASE SQL: runs SQL there (2 minutes at most), rows unaligned.
bn_sql() { timeout 120 psql "$(bn_url "$1" "$2")" -v ON_ERROR_STOP=1 -qAtX -c "$3"; }

# bn_citus_database DATABASE COORDINATOR SHARD_COUNT WORKER...: DATABASE on the coordinator and
# every worker, with the citus extension, made one cluster: the coordinator's host set, the
# workers added (Citus 11 and later sync its metadata to them as they are added, so that they can
# route queries too), SHARD_COUNT shards a table for the tables the migrations distribute.
bn_citus_database() {
    local db=$1 coordinator=$2 shards=$3 worker
    shift 3
    for worker in "$@"; do
        bn_sql "$worker" postgres "CREATE DATABASE $db" >/dev/null
        bn_sql "$worker" "$db" "CREATE EXTENSION citus" >/dev/null
    done
    bn_sql "$coordinator" postgres "CREATE DATABASE $db" >/dev/null
    bn_sql "$coordinator" postgres "ALTER DATABASE $db SET citus.shard_count = $shards" >/dev/null
    bn_sql "$coordinator" "$db" "CREATE EXTENSION citus" >/dev/null
    bn_sql "$coordinator" "$db" "SELECT citus_set_coordinator_host('${BN_IP[$coordinator]}', 5432)" >/dev/null
    for worker in "$@"; do
        bn_sql "$coordinator" "$db" "SELECT citus_add_node('${BN_IP[$worker]}', 5432)" >/dev/null
    done
}

# bn_drop_database DATABASE NODE...: drops it on every node given (quietly; it may not be there).
bn_drop_database() {
    local db=$1 node
    shift
    for node in "$@"; do
        bn_sql "$node" postgres "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    done
}
