# shellcheck shell=bash
#
# Helpers shared by the test-environment scripts (up, down, env, with-servers):
# where the state lives, which ports the servers use, and how each server is
# installed, checked, started and stopped. Sourced, never run.
#
# Servers (the names the scripts take): redis, postgres, mysql, zk,
# redis-cluster.
# Instances (one directory and one process each): redis, postgres, mysql, zk
# and zk-capped; the zk server is the pair zk + zk-capped.
#
# Settings, all optional:
#   SIMBA_TESTENV_DIR             state directory (default <repo>/.testenv)
#   SIMBA_TESTENV_TIMEOUT         seconds a server may take to get ready (90)
#   SIMBA_TESTENV_REDIS_PORT      16379
#   SIMBA_TESTENV_POSTGRES_PORT   15432
#   SIMBA_TESTENV_MYSQL_PORT      13306
#   SIMBA_TESTENV_ZK_PORT         12181
#   SIMBA_TESTENV_ZK_CAPPED_PORT  12182
#   SIMBA_TESTENV_REDIS_CLUSTER_PORT  16400 (and the five ports above it)

# shellcheck disable=SC2034 # the settings are read by the scripts that source this file
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

TESTENV_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
TESTENV_DIR=${SIMBA_TESTENV_DIR:-$TESTENV_REPO/.testenv}
TESTENV_TIMEOUT=${SIMBA_TESTENV_TIMEOUT:-90}

REDIS_PORT=${SIMBA_TESTENV_REDIS_PORT:-16379}
POSTGRES_PORT=${SIMBA_TESTENV_POSTGRES_PORT:-15432}
MYSQL_PORT=${SIMBA_TESTENV_MYSQL_PORT:-13306}
ZK_PORT=${SIMBA_TESTENV_ZK_PORT:-12181}
ZK_CAPPED_PORT=${SIMBA_TESTENV_ZK_CAPPED_PORT:-12182}

MYSQL_DB=simba_test
# Zookeeper ticks every 500ms, so the smallest session it grants is 1s (two
# ticks). The main instance accepts sessions up to 60s, the capped one only
# up to 4s, which lets tests see a server-capped session timeout.
ZK_TICK_MS=500
ZK_MAX_SESSION_MS=60000
ZK_CAPPED_MAX_SESSION_MS=4000

ALL_SERVERS=(redis postgres mysql zk)
ALL_SERVERS+=(redis-cluster) # see the Redis Cluster section at the end

for _port in "$REDIS_PORT" "$POSTGRES_PORT" "$MYSQL_PORT" "$ZK_PORT" "$ZK_CAPPED_PORT"; do
	if ! [[ $_port =~ ^[0-9]{1,5}$ ]] || ((_port < 1 || _port > 65535)); then
		printf 'testenv: error: invalid port %q in SIMBA_TESTENV_*_PORT\n' "$_port" >&2
		exit 1
	fi
done
unset _port

log() { printf 'testenv: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

is_root() { [[ $(id -u) == 0 ]]; }

# check_servers NAME... exits with an error if a name is not a server.
check_servers() {
	local s
	for s in "$@"; do
		case $s in
		redis-cluster) ;;
		redis | postgres | mysql | zk) ;;
		*) die "unknown server '$s' (known: ${ALL_SERVERS[*]})" ;;
		esac
	done
}

# is_instance NAME holds when NAME is an instance of a server.
is_instance() {
	local s inst
	for s in "${ALL_SERVERS[@]}"; do
		for inst in $(instances_of "$s"); do
			[[ $inst == "$1" ]] && return 0
		done
	done
	return 1
}

instances_of() {
	case $1 in
	redis) echo redis redis-tls ;;
	mysql) echo mysql mysql-tls ;;
	zk) echo zk zk-capped zk-tls ;;
	*) echo "$1" ;;
	esac
}

port_of() {
	case $1 in
	redis-cluster) echo "$REDIS_CLUSTER_PORT" ;;
	redis) echo "$REDIS_PORT" ;;
	postgres) echo "$POSTGRES_PORT" ;;
	mysql) echo "$MYSQL_PORT" ;;
	zk) echo "$ZK_PORT" ;;
	zk-capped) echo "$ZK_CAPPED_PORT" ;;
	redis-tls) echo "$REDIS_TLS_PORT" ;;
	mysql-tls) echo "$MYSQL_TLS_PORT" ;;
	zk-tls) echo "$ZK_TLS_PORT" ;;
	esac
}

inst_dir() { printf '%s/%s' "$TESTENV_DIR" "$1"; }

# exports_of SERVER prints the export lines that point tests at SERVER.
exports_of() {
	case $1 in
	redis-cluster) exports_redis_cluster ;;
	redis) printf "export SIMBA_TEST_REDIS_URL='redis://127.0.0.1:%s/0'\n" "$REDIS_PORT" ;;
	postgres) printf "export SIMBA_TEST_POSTGRES_URL='postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable'\n" "$POSTGRES_PORT" ;;
	mysql) printf "export SIMBA_TEST_MYSQL_URL='root@tcp(127.0.0.1:%s)/%s?parseTime=true'\n" "$MYSQL_PORT" "$MYSQL_DB" ;;
	zk)
		printf "export SIMBA_TEST_ZK_SERVERS='127.0.0.1:%s'\n" "$ZK_PORT"
		printf "export SIMBA_TEST_ZK_CAPPED_SERVERS='127.0.0.1:%s'\n" "$ZK_CAPPED_PORT"
		;;
	esac
	tls_exports_of "$1"
}

# short_hash PATH names a per-state-directory spot outside it (for paths that
# must be short or reachable by another user).
short_hash() { printf '%s' "$1" | md5sum | cut -c1-10; }

# ---------------------------------------------------------------- packages

pg_bindir() {
	local d
	d=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
	[[ -n $d && -x $d/initdb && -x $d/pg_ctl ]] && echo "$d"
}

have() { command -v "$1" >/dev/null 2>&1; }

# packages_missing SERVER prints the Debian packages SERVER still needs.
packages_missing() {
	case $1 in
	redis-cluster) packages_missing redis ;;
	redis) have redis-server && have redis-cli || echo redis-server redis-tools ;;
	postgres) [[ -n $(pg_bindir) ]] && have psql || echo postgresql postgresql-client ;;
	mysql) have mariadbd && have mariadb-install-db && have mariadb || echo mariadb-server mariadb-client ;;
	zk) [[ -f /usr/share/java/zookeeper.jar ]] && have java || echo zookeeper ;;
	esac
}

# tools_missing prints the Debian packages of the programs the tests run
# besides the servers (tools/testenv/tools installs them):
#   promtool          prometheus: checks and unit-tests metrics/alerts.yml
#   python3 with      python3, python3-pytest, python3-behave: the Python
#   pytest, behave    package of cgo-bindings, its tests and its features
#   python3 with      python3-venv, python3-setuptools, python3-wheel: the
#   venv, setuptools, wheel of cgo-bindings (make wheel), installed in a
#   wheel             fresh venv by its test
#   pgbouncer         pgbouncer: the PostgreSQL backend's tests through a
#                     pooler in transaction mode
# (the C compiler comes with gcc, which .ci/run installs).
tools_missing() {
	local py=/usr/bin/python3
	have promtool || echo prometheus
	have pgbouncer || echo pgbouncer
	[[ -x $py ]] || echo python3
	[[ -x $py ]] && "$py" -c 'import pytest' 2>/dev/null || echo python3-pytest
	[[ -x $py ]] && "$py" -c 'import behave' 2>/dev/null || echo python3-behave
	[[ -x $py ]] && "$py" -c 'import ensurepip' 2>/dev/null || echo python3-venv
	[[ -x $py ]] && "$py" -c 'import setuptools.build_meta, wheel.bdist_wheel' 2>/dev/null || echo python3-setuptools python3-wheel
}

# apt_wait_idle waits while another apt or dpkg runs on this machine.
apt_wait_idle() {
	local waited=0 busy comm f
	while :; do
		busy=
		for f in /proc/[0-9]*/comm; do
			read -r comm 2>/dev/null <"$f" || continue
			case $comm in
			apt | apt-get | aptitude | dpkg | unattended-upgr) busy=$comm && break ;;
			esac
		done
		[[ -z $busy ]] && return 0
		((waited % 30 == 0)) && log "waiting for another package manager ($busy) to finish"
		((waited >= 1800)) && die "the package manager stayed busy for 30 minutes"
		sleep 3
		waited=$((waited + 3))
	done
}

# install_packages PKG... installs Debian packages with apt-get, waiting for
# another apt to finish rather than failing on its lock.
install_packages() {
	local sudo=() added_policy=
	if ! is_root; then
		if ! have sudo || ! sudo -n true 2>/dev/null; then
			die "missing packages ($*): install them as root, e.g. apt-get install -y $*"
		fi
		sudo=(sudo -n)
	fi
	log "installing Debian packages: $*"
	apt_wait_idle
	local try
	for try in 1 2 3; do
		"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 -q update >&2 && break
		((try == 3)) && die "apt-get update failed"
		sleep 5
		apt_wait_idle
	done
	# The packages try to start their own system-wide services; the test
	# servers run on their own ports, so keep those from starting.
	if is_root && [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && added_policy=1
	fi
	local rc=0
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 -q install -y "$@" >&2 || rc=$?
	[[ -n $added_policy ]] && rm -f /usr/sbin/policy-rc.d
	((rc == 0)) || die "apt-get install $* failed (exit $rc)"
}

# ---------------------------------------------------------------- processes

pid_alive() { [[ $1 =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null; }

# inst_realdir INST resolves the instance directory (postgres may live
# elsewhere behind a symlink, see prepare_postgres_dir).
inst_realdir() { readlink -f "$(inst_dir "$1")" 2>/dev/null || inst_dir "$1"; }

# pid_in_dir PID DIR holds when the process runs with its working directory
# inside DIR: every server here runs in its own directory, so this tells our
# processes from others that reuse a pid.
pid_in_dir() {
	local cwd
	cwd=$(readlink "/proc/$1/cwd" 2>/dev/null) || return 1
	[[ $cwd == "$2" || $cwd == "$2"/* ]]
}

# inst_pid INST prints the recorded pid of INST, if any.
inst_pid() {
	local dir
	dir=$(inst_dir "$1")
	case $1 in
	postgres) [[ -r $dir/data/postmaster.pid ]] && head -n 1 "$dir/data/postmaster.pid" ;;
	*) [[ -r $dir/pid ]] && head -n 1 "$dir/pid" ;;
	esac
	return 0
}

# inst_running INST prints the pid of INST when that process runs from its
# directory.
inst_running() {
	local pid
	pid=$(inst_pid "$1")
	pid_alive "$pid" && pid_in_dir "$pid" "$(inst_realdir "$1")" && echo "$pid"
}

# stray_pids DIR prints the server processes that run inside DIR (left over
# after a lost pid file, or children of a killed server).
stray_pids() {
	local p comm
	[[ -d $1 ]] || return 0
	for p in /proc/[0-9]*; do
		read -r comm 2>/dev/null <"$p/comm" || continue
		case $comm in
		redis-server | postgres | mariadbd | mysqld | java) ;;
		*) continue ;;
		esac
		pid_in_dir "${p#/proc/}" "$1" && echo "${p#/proc/}"
	done
	return 0
}

# stop_inst INST [KILL] stops the processes of INST: politely first (unless
# KILL is given, for a server that no longer answers), then with SIGKILL.
stop_inst() {
	local inst=$1 dir pid sig=TERM i pids
	dir=$(inst_realdir "$inst")
	[[ $inst == postgres ]] && sig=INT # fast shutdown; TERM waits for clients
	[[ ${2:-} == KILL ]] && sig=KILL
	pid=$(inst_running "$inst") || true
	if [[ -n $pid ]]; then
		log "stopping $inst (pid $pid)"
		kill -s "$sig" "$pid" 2>/dev/null || true
		for ((i = 0; i < 75; i++)); do
			pid_alive "$pid" || break
			sleep 0.2
		done
	fi
	pids=$(stray_pids "$dir")
	if [[ -n $pids ]]; then
		# shellcheck disable=SC2086
		kill -s KILL $pids 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			[[ -z $(stray_pids "$dir") ]] && break
			sleep 0.1
		done
	fi
}

# remove_inst INST deletes the directory of INST (and where it points to).
remove_inst() {
	local link real
	link=$(inst_dir "$1")
	real=$(inst_realdir "$1")
	if [[ -L $link ]]; then
		rm -rf "$real"
		rmdir "$(dirname "$real")" 2>/dev/null || true
	fi
	rm -rf "$link"
}

# ---------------------------------------------------------------- health

# zk_word PORT WORD sends a Zookeeper four-letter command and prints the answer.
zk_word() {
	# shellcheck disable=SC2016 # $1 and $2 belong to the inner shell
	timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' _ "$1" "$2" 2>/dev/null
}

port_open() {
	# shellcheck disable=SC2016 # $1 belongs to the inner shell
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# inst_healthy INST holds when a server of the right kind answers on INST's port.
inst_healthy() {
	local port out=
	port=$(port_of "$1")
	case $1 in
	redis-cluster) redis_cluster_healthy && out=PONG ;;
	redis)
		have redis-cli || return 1
		out=$(timeout 5 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)
		;;
	postgres)
		have psql || return 1
		out=$(PGCONNECT_TIMEOUT=3 timeout 5 psql -X -q -w -h 127.0.0.1 -p "$port" -U postgres -d postgres -Atc 'select 1' 2>/dev/null)
		[[ $out == 1 ]] && out=PONG
		;;
	mysql)
		have mariadb || return 1
		out=$(timeout 5 mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "$port" -u root --connect-timeout=3 -N -B -e 'select 1' 2>/dev/null)
		[[ $out == 1 ]] && out=PONG
		;;
	zk | zk-capped)
		out=$(zk_word "$port" srvr)
		[[ $out == *"Mode: standalone"* ]] && out=PONG
		;;
	redis-tls | mysql-tls | zk-tls) out= && tls_healthy "$1" && out=PONG ;;
	esac
	[[ $out == PONG ]]
}

# log_tail INST prints the end of INST's log on stderr.
log_tail() {
	local f
	f=$(inst_realdir "$1")/log
	if [[ -s $f ]]; then
		log "last lines of $f:"
		tail -n 40 "$f" | sed 's/^/    /' >&2
	else
		log "$1 wrote no log at $f"
	fi
}

# wait_ready INST SECONDS waits until INST answers. It fails early when the
# process it started has exited.
wait_ready() {
	local inst=$1 limit=$2 start
	start=$SECONDS
	while ((SECONDS - start < limit)); do
		inst_healthy "$inst" && return 0
		# postgres forks away from pg_ctl and mysql writes its pid late;
		# give them a few seconds before judging by the pid.
		if ((SECONDS - start > 5)) && [[ -z $(inst_running "$inst") ]]; then
			inst_healthy "$inst" && return 0
			log "$inst exited before it was ready"
			return 1
		fi
		sleep 0.3
	done
	log "$inst was not ready after ${limit}s"
	return 1
}

# ---------------------------------------------------------------- starting
#
# Each start_* launches one instance in a fresh directory and returns without
# waiting for it; the servers get their own session and write to their own
# log, so they hold none of the caller's descriptors (command substitution or
# a pipe reading up's output would otherwise never end).

# launch DIR CMD... runs CMD detached with DIR as its working directory and
# records its pid in DIR/pid.
launch() {
	local dir=$1
	shift
	(cd "$dir" && exec setsid bash -c 'echo $$ >pid && exec "$@"' _ "$@") \
		</dev/null >>"$dir/log" 2>&1 8>&- 9>&- &
}

start_redis() {
	local dir
	dir=$(inst_dir redis)
	mkdir -p "$dir"
	# Redis daemonizes itself (setsid, std streams to /dev/null); errors
	# before it opens its log file land in the same file.
	# shellcheck disable=SC2094
	(cd "$dir" && redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$dir" --daemonize yes --pidfile "$dir/pid" --logfile "$dir/log" --maxclients 4000) \
		</dev/null >>"$dir/log" 2>&1 8>&- 9>&-
}

as_postgres() {
	if is_root; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# prepare_postgres_dir makes the postgres directory, owned by the postgres
# user. PostgreSQL refuses to run as root; when that user cannot reach the
# state directory (say under /root), the data lives in /var/tmp and the
# state directory holds a symlink to it.
prepare_postgres_dir() {
	local dir real
	dir=$(inst_dir postgres)
	if ! is_root; then
		mkdir -p "$dir"
		return
	fi
	id postgres >/dev/null 2>&1 || die "the postgres user does not exist (is the postgresql package installed?)"
	if runuser -u postgres -- test -x "$TESTENV_DIR"; then
		mkdir -p "$dir"
	else
		real=/var/tmp/simba-testenv-$(short_hash "$TESTENV_DIR")/postgres
		log "the postgres user cannot reach $TESTENV_DIR; keeping its data in $real"
		rm -rf "$real"
		mkdir -p "$real"
		chmod 755 "$(dirname "$real")"
		ln -sfn "$real" "$dir"
	fi
	chown postgres: "$(readlink -f "$dir")"
}

start_postgres() {
	local bindir dir
	bindir=$(pg_bindir) || die "PostgreSQL binaries not found under /usr/lib/postgresql"
	prepare_postgres_dir
	dir=$(inst_realdir postgres)
	: >"$dir/log"
	is_root && chown postgres: "$dir/log"
	if ! as_postgres "$bindir/initdb" -D "$dir/data" -A trust -U postgres --locale=C -E UTF8 --no-sync \
		</dev/null >>"$dir/log" 2>&1 8>&- 9>&-; then
		log_tail postgres
		die "initdb failed"
	fi
	# Later settings win over the ones initdb wrote. No unix socket: the
	# tests connect over TCP and a socket path could exceed its length limit.
	cat >>"$dir/data/postgresql.conf" <<EOF

# simba test environment
port = $POSTGRES_PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 300
fsync = off
# PostgreSQL's default: a commit waits for its WAL write (with fsync off, no
# disk flush). Off, a crash loses acknowledged commits, and simbapg warns.
synchronous_commit = on
full_page_writes = off
EOF
	postgres_tls_conf "$dir/data"
	if ! as_postgres "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -W start \
		</dev/null >>"$dir/ctl.log" 2>&1 8>&- 9>&-; then
		cat "$dir/ctl.log" >&2
		log_tail postgres
		die "pg_ctl start failed"
	fi
}

# mysql_sock INST prints the unix socket path of a MariaDB instance: in its
# directory, or in /tmp when that path would pass the length limit of a
# socket path (about 100 bytes).
mysql_sock() {
	local sock
	sock=$(inst_dir "$1")/mysql.sock
	if ((${#sock} > 100)); then
		sock=/tmp/simba-testenv-$(short_hash "$TESTENV_DIR")-mysql.sock
		[[ $1 == mysql ]] || sock=${sock%.sock}-$1.sock
	fi
	echo "$sock"
}

# start_mysql [INST [ARG...]] starts the MariaDB instance INST (default
# mysql) with the server arguments ARG added.
start_mysql() {
	local inst=${1:-mysql} dir user=()
	(($#)) && shift
	dir=$(inst_dir "$inst")
	mkdir -p "$dir"
	is_root && user=(--user=root)
	if ! mariadb-install-db --no-defaults --datadir="$dir/data" "${user[@]}" \
		--auth-root-authentication-method=normal --skip-test-db \
		</dev/null >>"$dir/log" 2>&1 8>&- 9>&-; then
		log_tail "$inst"
		die "mariadb-install-db failed"
	fi
	launch "$dir" "$(command -v mariadbd)" --no-defaults --datadir="$dir/data" "${user[@]}" \
		--port="$(port_of "$inst")" --bind-address=127.0.0.1 --socket="$(mysql_sock "$inst")" --pid-file="$dir/pid" \
		--skip-name-resolve --skip-log-bin --max-connections=500 \
		--character-set-server=utf8mb4 \
		--innodb-buffer-pool-size=128M --innodb-log-file-size=32M \
		--innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --sync-binlog=0 "$@"
}

# zk_runtime prints three lines: the java command, the main class and the
# classpath, read from the Debian package's own environment file so that a
# change of its jar list does not break the scripts.
zk_runtime() {
	local f out=
	for f in /etc/zookeeper/conf/environment /usr/share/zookeeper/bin/zkEnv.sh /usr/libexec/zkEnv.sh; do
		[[ -r $f ]] || continue
		out=$(
			set +eu
			unset CLASSPATH ZOOMAIN JAVA
			export ZOOBINDIR
			ZOOBINDIR=$(dirname "$f")
			# shellcheck disable=SC1090
			. "$f" >/dev/null 2>&1 </dev/null
			printf '%s\n%s\n%s\n' "${JAVA:-}" "${ZOOMAIN:-}" "${CLASSPATH:-}"
		)
		[[ -n $(sed -n 3p <<<"$out") ]] && break
		out=
	done
	local java main cp
	java=$(sed -n 1p <<<"$out")
	main=$(sed -n 2p <<<"$out")
	cp=$(sed -n 3p <<<"$out")
	# The package jar names its dependencies in its manifest; it is enough
	# when no environment file was found.
	[[ -z $cp && -f /usr/share/java/zookeeper.jar ]] && cp=/usr/share/java/zookeeper.jar
	[[ -n $cp ]] || die "cannot find the Zookeeper classpath (is the zookeeper package installed?)"
	# Zookeeper logs through slf4j; the Debian package ships no binding on
	# that classpath, so add the simple one (it logs to stderr, our log).
	[[ -f /usr/share/java/slf4j-simple.jar && $cp != *slf4j-simple* ]] && cp=$cp:/usr/share/java/slf4j-simple.jar
	[[ -x $java ]] || java=$(command -v java) || die "java not found"
	printf '%s\n%s\n%s\n' "$java" "${main:-org.apache.zookeeper.server.quorum.QuorumPeerMain}" "$cp"
}

# zk_cfg DIR TICK_MS MAX_SESSION_MS prints the zoo.cfg settings every
# Zookeeper server of the test environments shares: data in DIR/data,
# sessions from two ticks to MAX_SESSION_MS, the four-letter words the
# scripts and tests send.
zk_cfg() {
	cat <<EOF
tickTime=$2
minSessionTimeout=$((2 * $2))
maxSessionTimeout=$3
dataDir=$1/data
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,conf,stat,mntr,cons
EOF
}

# launch_zk DIR EXTRA_CP [JAVA_OPTION...] starts the Zookeeper server of
# the package on DIR/zoo.cfg, in DIR (its pid and log there), with
# EXTRA_CP (may be empty) after the package's classpath and the Java
# options after the defaults (a later -Xmx wins).
launch_zk() {
	local dir=$1 extra=$2 rt java main cp
	shift 2
	rt=$(zk_runtime) || exit 1
	java=$(sed -n 1p <<<"$rt")
	main=$(sed -n 2p <<<"$rt")
	cp=$(sed -n 3p <<<"$rt")$extra
	# forceSync=no: the transaction log is not synced to disk (test data).
	launch "$dir" "$java" -Xms32m -Xmx256m -XX:+UseSerialGC "$@" \
		-Dzookeeper.forceSync=no -Dzookeeper.preAllocSize=4096 \
		-Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS \
		-cp "$cp" "$main" "$dir/zoo.cfg"
}

start_zk() {
	local inst=$1 dir port max
	dir=$(inst_dir "$inst")
	port=$(port_of "$inst")
	max=$ZK_MAX_SESSION_MS
	[[ $inst == zk-capped ]] && max=$ZK_CAPPED_MAX_SESSION_MS
	mkdir -p "$dir/data"
	{
		echo "# simba test environment: standalone, loopback only"
		zk_cfg "$dir" "$ZK_TICK_MS" "$max"
		echo "clientPort=$port"
		echo "clientPortAddress=127.0.0.1"
	} >"$dir/zoo.cfg"
	launch_zk "$dir" ""
}

start_inst() {
	case $1 in
	redis-cluster) start_redis_cluster ;;
	redis) start_redis ;;
	postgres) start_postgres ;;
	mysql) start_mysql ;;
	zk | zk-capped) start_zk "$1" ;;
	redis-tls) start_redis_tls ;;
	mysql-tls) start_mysql_tls ;;
	zk-tls) start_zk_tls ;;
	esac
}

# ---------------------------------------------------------------- TLS and authentication
#
# Each server also runs behind TLS with a password user, named simba:
#   redis-tls  its own Redis, TLS only (tls-port), the ACL user simba (the
#              default user is off)
#   postgres   the same server: ssl=on; simba logs in over TLS only, with
#              scram-sha-256, to its own database simba_tls; postgres keeps
#              trust over plain TCP
#   mysql-tls  its own MariaDB with require_secure_transport (it is
#              server-wide); simba is granted the database simba_test
#   zk-tls     its own Zookeeper, its secureClientPort only (Netty); clients
#              authenticate with the digest identity simba:PASSWORD
# The state directory's tls/ holds a CA and a server certificate for
# 127.0.0.1 and localhost, made with openssl on first use, and one password
# per server (letters and digits), which only the export lines show.
# Settings, all optional:
#   SIMBA_TESTENV_REDIS_TLS_PORT  16380
#   SIMBA_TESTENV_MYSQL_TLS_PORT  13307
#   SIMBA_TESTENV_ZK_TLS_PORT     12183
# (PostgreSQL serves TLS on SIMBA_TESTENV_POSTGRES_PORT.)

REDIS_TLS_PORT=${SIMBA_TESTENV_REDIS_TLS_PORT:-16380}
MYSQL_TLS_PORT=${SIMBA_TESTENV_MYSQL_TLS_PORT:-13307}
ZK_TLS_PORT=${SIMBA_TESTENV_ZK_TLS_PORT:-12183}
for _port in "$REDIS_TLS_PORT" "$MYSQL_TLS_PORT" "$ZK_TLS_PORT"; do
	if ! [[ $_port =~ ^[0-9]{1,5}$ ]] || ((_port < 1 || _port > 65535)); then
		printf 'testenv: error: invalid port %q in SIMBA_TESTENV_*_TLS_PORT\n' "$_port" >&2
		exit 1
	fi
done
unset _port

TLS_USER=simba
PG_TLS_DB=simba_tls

# tls_packages_missing prints the Debian packages the TLS instances need
# besides their servers': openssl makes the certificates.
tls_packages_missing() { have openssl || echo openssl; }

tls_dir() { printf '%s/tls' "$TESTENV_DIR"; }

# ensure_tls makes the CA, the server certificate and key, and the
# passwords in tls_dir, unless they are there already.
ensure_tls() {
	local dir tmp s
	dir=$(tls_dir)
	if [[ ! -s $dir/ca.pem || ! -s $dir/server.pem || ! -s $dir/server.key ]]; then
		have openssl || die "openssl is missing (apt-get install openssl)"
		mkdir -p "$TESTENV_DIR"
		tmp=$(mktemp -d "$TESTENV_DIR/.tls.XXXXXX")
		if ! (
			cd "$tmp" &&
				openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 \
					-keyout ca.key -out ca.pem -subj '/CN=Simba test CA' &&
				openssl req -new -nodes -newkey rsa:2048 -sha256 \
					-keyout server.key -out server.csr -subj '/CN=localhost' &&
				printf '%s\n' 'basicConstraints=critical,CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
					'extendedKeyUsage=serverAuth' 'subjectAltName=IP:127.0.0.1,DNS:localhost' >server.ext &&
				openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days 825 \
					-extfile server.ext -out server.pem &&
				cat server.key server.pem >server-bundle.pem &&
				rm -f server.csr server.ext ca.srl
		) >"$tmp/openssl.log" 2>&1; then
			cat "$tmp/openssl.log" >&2
			rm -rf "$tmp"
			die "openssl could not make the test certificates"
		fi
		rm -f "$tmp/openssl.log"
		chmod 600 "$tmp"/*.key "$tmp/server-bundle.pem"
		chmod 644 "$tmp/ca.pem" "$tmp/server.pem"
		rm -rf "$dir"
		mv "$tmp" "$dir"
		chmod 755 "$dir"
	fi
	for s in redis postgres mysql zk; do
		[[ -s $dir/$s.password ]] && continue
		(umask 077 && openssl rand -hex 16 >"$dir/$s.password") || die "cannot make the $s password"
	done
}

# tls_password SERVER prints the password of SERVER's TLS user.
tls_password() { cat "$(tls_dir)/$1.password" 2>/dev/null; }

# tls_exports_of SERVER prints the export lines of SERVER's TLS instance,
# once its password exists.
tls_exports_of() {
	local dir pass
	dir=$(tls_dir)
	pass=$(tls_password "$1") || return 0
	[[ -n $pass ]] || return 0
	printf "export SIMBA_TEST_TLS_CA='%s'\n" "$dir/ca.pem"
	case $1 in
	redis) printf "export SIMBA_TEST_REDIS_TLS_URL='rediss://%s:%s@127.0.0.1:%s/0'\n" "$TLS_USER" "$pass" "$REDIS_TLS_PORT" ;;
	postgres)
		printf "export SIMBA_TEST_POSTGRES_TLS_URL='postgres://%s:%s@127.0.0.1:%s/%s?sslmode=verify-full&sslrootcert=%s'\n" \
			"$TLS_USER" "$pass" "$POSTGRES_PORT" "$PG_TLS_DB" "$dir/ca.pem"
		;;
	mysql)
		printf "export SIMBA_TEST_MYSQL_TLS_URL='%s:%s@tcp(127.0.0.1:%s)/%s?parseTime=true&tls=custom'\n" \
			"$TLS_USER" "$pass" "$MYSQL_TLS_PORT" "$MYSQL_DB"
		;;
	zk)
		printf "export SIMBA_TEST_ZK_TLS_SERVERS='127.0.0.1:%s'\n" "$ZK_TLS_PORT"
		printf "export SIMBA_TEST_ZK_TLS_AUTH='%s:%s'\n" "$TLS_USER" "$pass"
		;;
	esac
}

# tls_healthy INST holds when INST answers over TLS, verified with the CA.
tls_healthy() {
	local port ca out=
	port=$(port_of "$1")
	ca=$(tls_dir)/ca.pem
	[[ -s $ca ]] || return 1
	case $1 in
	redis-tls)
		have redis-cli || return 1
		out=$(REDISCLI_AUTH=$(tls_password redis) timeout 5 redis-cli --no-auth-warning --tls --cacert "$ca" \
			-h 127.0.0.1 -p "$port" --user "$TLS_USER" ping 2>/dev/null)
		;;
	mysql-tls)
		have mariadb || return 1
		out=$(timeout 5 mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "$port" -u root --connect-timeout=3 \
			--ssl --ssl-ca="$ca" --ssl-verify-server-cert -N -B -e 'select 1' 2>/dev/null)
		[[ $out == 1 ]] && out=PONG
		;;
	zk-tls)
		have openssl || return 1
		# -quiet waits for the server to close the connection, which it
		# does once it has answered.
		out=$(printf srvr | timeout 5 openssl s_client -quiet -verify_return_error -CAfile "$ca" \
			-verify_ip 127.0.0.1 -connect "127.0.0.1:$port" 2>/dev/null)
		[[ $out == *"Mode: standalone"* ]] && out=PONG
		;;
	esac
	[[ $out == PONG ]]
}

start_redis_tls() {
	local dir tls
	ensure_tls
	dir=$(inst_dir redis-tls)
	tls=$(tls_dir)
	mkdir -p "$dir"
	# The password stays out of the command line: it is in a file only
	# the owner reads.
	(
		umask 077
		cat >"$dir/redis.conf" <<EOF
# simba test environment: TLS only, loopback only, one ACL user
port 0
tls-port $REDIS_TLS_PORT
bind 127.0.0.1
tls-cert-file $tls/server.pem
tls-key-file $tls/server.key
tls-ca-cert-file $tls/ca.pem
tls-auth-clients no
save ""
appendonly no
dir $dir
daemonize yes
pidfile $dir/pid
logfile $dir/log
maxclients 1000
user default off
user $TLS_USER on >$(tls_password redis) ~* &* +@all
EOF
	)
	# shellcheck disable=SC2094
	(cd "$dir" && redis-server "$dir/redis.conf") </dev/null >>"$dir/log" 2>&1 8>&- 9>&-
}

# postgres_tls_conf DATADIR turns TLS on in a PostgreSQL data directory:
# the server certificate and key are copied into it (the key must belong to
# the server's user), simba logs in over TLS only with scram-sha-256, and
# everyone else keeps trust over TCP. It is idempotent, and a reload of the
# server applies it (every setting here takes effect at a reload).
postgres_tls_conf() {
	local data=$1
	ensure_tls
	postgres_tls_files "$data"
	grep -q '^# simba test environment: TLS' "$data/postgresql.conf" || cat >>"$data/postgresql.conf" <<EOF

# simba test environment: TLS
ssl = on
ssl_cert_file = 'server.pem'
ssl_key_file = 'server.key'
password_encryption = 'scram-sha-256'
EOF
	# First match wins: the lines go before initdb's, which stay (trust,
	# replication connections included).
	if ! grep -q '^# simba test environment: TLS' "$data/pg_hba.conf"; then
		{
			echo '# simba test environment: TLS; the TLS user over TLS only, with scram-sha-256'
			echo "hostssl all $TLS_USER 127.0.0.1/32 scram-sha-256"
			echo "host    all $TLS_USER 127.0.0.1/32 reject"
			cat "$data/pg_hba.conf"
		} >"$data/pg_hba.conf.new" && mv "$data/pg_hba.conf.new" "$data/pg_hba.conf"
	fi
	is_root && chown postgres: "$data/pg_hba.conf"
	return 0
}

# postgres_tls_files DATADIR copies the server certificate and key into
# DATADIR, where the server reads them (at start and at a reload).
postgres_tls_files() {
	local data=$1 tls
	tls=$(tls_dir)
	cmp -s "$tls/server.pem" "$data/server.pem" && cmp -s "$tls/server.key" "$data/server.key" && return 0
	cp "$tls/server.pem" "$data/server.pem"
	cp "$tls/server.key" "$data/server.key"
	chmod 600 "$data/server.key"
	is_root && chown postgres: "$data/server.pem" "$data/server.key"
	return 0
}

start_mysql_tls() {
	local tls
	ensure_tls
	tls=$(tls_dir)
	start_mysql mysql-tls --ssl-ca="$tls/ca.pem" --ssl-cert="$tls/server.pem" --ssl-key="$tls/server.key" \
		--require-secure-transport=ON
}

start_zk_tls() {
	local dir tls j netty=
	ensure_tls
	dir=$(inst_dir zk-tls)
	tls=$(tls_dir)
	# The Netty connection factory, which alone serves TLS, needs the
	# Netty jars the package's manifest does not name.
	for j in netty-codec netty-resolver netty-transport-native-unix-common; do
		[[ -f /usr/share/java/$j.jar ]] && netty=$netty:/usr/share/java/$j.jar
	done
	mkdir -p "$dir/data"
	{
		echo "# simba test environment: standalone, loopback only, TLS only"
		zk_cfg "$dir" "$ZK_TICK_MS" "$ZK_MAX_SESSION_MS"
		cat <<EOF
secureClientPort=$ZK_TLS_PORT
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=$tls/server-bundle.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=$tls/ca.pem
ssl.trustStore.type=PEM
ssl.clientAuth=none
EOF
	} >"$dir/zoo.cfg"
	launch_zk "$dir" "$netty"
}

# tls_setup SERVER, run by up once SERVER answers, creates or updates its
# TLS user with the current password (idempotent). Passwords travel on
# standard input, never on a command line.
tls_setup() {
	local pass
	ensure_tls
	case $1 in
	postgres)
		# A server started here by an earlier version of this file gets
		# TLS at the reload below.
		[[ -n $(inst_running postgres) ]] && postgres_tls_conf "$(inst_realdir postgres)/data"
		pass=$(tls_password postgres)
		PGCONNECT_TIMEOUT=5 psql -X -q -w -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$POSTGRES_PORT" -U postgres -d postgres >/dev/null <<EOF ||
SELECT format('CREATE ROLE %I LOGIN', '$TLS_USER') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$TLS_USER') \gexec
ALTER ROLE $TLS_USER LOGIN PASSWORD '$pass';
SELECT format('CREATE DATABASE %I OWNER %I', '$PG_TLS_DB', '$TLS_USER') WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$PG_TLS_DB') \gexec
SELECT pg_reload_conf();
EOF
			die "cannot set up the PostgreSQL user $TLS_USER"
		;;
	mysql)
		pass=$(tls_password mysql)
		mariadb --no-defaults --protocol=SOCKET --socket="$(mysql_sock mysql-tls)" -u root <<EOF ||
CREATE DATABASE IF NOT EXISTS $MYSQL_DB CHARACTER SET utf8mb4;
CREATE USER IF NOT EXISTS '$TLS_USER'@'%' IDENTIFIED BY '$pass' REQUIRE SSL;
ALTER USER '$TLS_USER'@'%' IDENTIFIED BY '$pass' REQUIRE SSL;
GRANT ALL ON $MYSQL_DB.* TO '$TLS_USER'@'%';
GRANT PROCESS ON *.* TO '$TLS_USER'@'%';
EOF
			die "cannot set up the MariaDB user $TLS_USER"
		;;
	esac
}

# ---------------------------------------------------------------- servers not started here

# zk_cap_ok INST checks, when the server tells, that a Zookeeper not started
# here caps sessions as this environment promises.
zk_cap_ok() {
	local want=$ZK_MAX_SESSION_MS got
	[[ $1 == zk-capped ]] && want=$ZK_CAPPED_MAX_SESSION_MS
	got=$(zk_word "$(port_of "$1")" conf | sed -n 's/^maxSessionTimeout=//p' | tr -d '\r')
	if [[ -z $got ]]; then
		log "warning: cannot read maxSessionTimeout of the Zookeeper on port $(port_of "$1") (want $want)"
		return 0
	fi
	[[ $got == "$want" ]]
}

# ---------------------------------------------------------------- Redis Cluster
#
# The redis-cluster server is one instance of six redis-server processes on
# 127.0.0.1, ports REDIS_CLUSTER_PORT .. +5 (and their cluster bus ports,
# 10000 above): three primaries with one replica each, no persistence. Each
# node runs in a directory of its own under the instance's directory, so
# stop_inst finds them all; the instance's pid is the first node's.

REDIS_CLUSTER_PORT=${SIMBA_TESTENV_REDIS_CLUSTER_PORT:-16400}
REDIS_CLUSTER_NODES=6
if ! [[ $REDIS_CLUSTER_PORT =~ ^[0-9]{1,5}$ ]] || ((REDIS_CLUSTER_PORT < 1 || REDIS_CLUSTER_PORT + REDIS_CLUSTER_NODES - 1 + 10000 > 65535)); then
	printf 'testenv: error: invalid port %q in SIMBA_TESTENV_REDIS_CLUSTER_PORT (its bus ports are 10000 above)\n' "$REDIS_CLUSTER_PORT" >&2
	exit 1
fi

redis_cluster_ports() {
	local i
	for ((i = 0; i < REDIS_CLUSTER_NODES; i++)); do echo $((REDIS_CLUSTER_PORT + i)); done
}

exports_redis_cluster() {
	local p hosts=()
	for p in $(redis_cluster_ports); do hosts+=("127.0.0.1:$p"); done
	printf "export SIMBA_TEST_REDIS_CLUSTER_URL='redis+cluster://%s'\n" "$(
		IFS=,
		echo "${hosts[*]}"
	)"
}

# redis_cluster_healthy holds when every node answers and reports the
# cluster ok.
redis_cluster_healthy() {
	local p
	have redis-cli || return 1
	for p in $(redis_cluster_ports); do
		[[ $(timeout 5 redis-cli -h 127.0.0.1 -p "$p" cluster info 2>/dev/null) == *cluster_state:ok* ]] || return 1
	done
}

start_redis_cluster() {
	local dir p hosts=() start
	dir=$(inst_dir redis-cluster)
	mkdir -p "$dir"
	for p in $(redis_cluster_ports); do
		mkdir -p "$dir/$p"
		launch "$dir/$p" "$(command -v redis-server)" --port "$p" --bind 127.0.0.1 --save '' --appendonly no \
			--dir "$dir/$p" --maxclients 4000 --cluster-enabled yes --cluster-config-file nodes.conf \
			--cluster-node-timeout 2000
		hosts+=("127.0.0.1:$p")
	done
	start=$SECONDS
	for p in $(redis_cluster_ports); do
		until [[ $(timeout 3 redis-cli -h 127.0.0.1 -p "$p" ping 2>/dev/null) == PONG ]]; do
			((SECONDS - start < TESTENV_TIMEOUT)) || die "the Redis Cluster node on port $p did not start (log in $dir/$p/log)"
			sleep 0.2
		done
	done
	cp "$dir/$REDIS_CLUSTER_PORT/pid" "$dir/pid"
	if ! timeout 60 redis-cli --cluster create "${hosts[@]}" --cluster-replicas 1 --cluster-yes \
		</dev/null >>"$dir/log" 2>&1 8>&- 9>&-; then
		log_tail redis-cluster
		die "redis-cli --cluster create failed"
	fi
}
