#!/usr/bin/env bash
#
# redis.sh LIB ACTION NAME [ARGS...] - manage one Redis process of a
# replicated topology with the functions of tools/testenv/lib.sh (LIB). Each
# process is an instance of its own, in $SIMBA_TESTENV_DIR/NAME, with its
# pid in NAME/pid and its log in NAME/log, so that lib.sh's stop_inst finds
# it (and its strays) by its directory.
#
#   server NAME PORT [REDIS-ARG...]   start redis-server empty, no persistence;
#                                     wait until it answers PING
#   sentinel NAME PORT PRIMARY-PORT MASTER [DOWN-MS FAILOVER-MS]
#                                     start a sentinel monitoring the primary
#                                     on 127.0.0.1:PRIMARY-PORT as MASTER
#   sentinel-resume NAME PORT         start a stopped sentinel again on its own
#                                     (rewritten) configuration
#   kill NAME                         SIGKILL the process, keeping its directory
#   stop NAME                         stop it (SIGTERM, then SIGKILL)
#   wipe NAME                         kill it and delete its directory
#   cluster-create PORT...            make a cluster with one replica per primary
set -euo pipefail

lib=$1 action=$2
shift 2
# shellcheck source=tools/testenv/lib.sh
. "$lib"

# wait_ping PORT waits until a server answers on PORT.
wait_ping() {
	local port=$1 name=$2 start=$SECONDS
	while ((SECONDS - start < TESTENV_TIMEOUT)); do
		[[ $(timeout 3 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]] && return 0
		if ((SECONDS - start > 3)) && [[ -z $(inst_running "$name") ]]; then
			log_tail "$name"
			die "$name exited before it answered on port $port"
		fi
		sleep 0.1
	done
	log_tail "$name"
	die "$name did not answer on port $port within ${TESTENV_TIMEOUT}s"
}

mkdir -p "$TESTENV_DIR"
case $action in
server)
	name=$1 port=$2
	shift 2
	dir=$(inst_dir "$name")
	stop_inst "$name" KILL
	# An empty start keeps only a cluster node's identity (nodes.conf).
	find "$dir" -mindepth 1 -maxdepth 1 ! -name nodes.conf -exec rm -rf {} + 2>/dev/null || true
	mkdir -p "$dir"
	launch "$dir" "$(command -v redis-server)" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$dir" --maxclients 4000 "$@"
	wait_ping "$port" "$name"
	;;
sentinel)
	name=$1 port=$2 primary=$3 master=$4 down=${5:-1000} failover=${6:-4000}
	dir=$(inst_dir "$name")
	stop_inst "$name" KILL
	rm -rf "$dir"
	mkdir -p "$dir"
	# The sentinel rewrites this file with what it learns; it must be its own.
	cat >"$dir/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
dir $dir
sentinel resolve-hostnames no
sentinel monitor $master 127.0.0.1 $primary 2
sentinel down-after-milliseconds $master $down
sentinel failover-timeout $master $failover
sentinel parallel-syncs $master 1
EOF
	launch "$dir" "$(command -v redis-server)" "$dir/sentinel.conf" --sentinel
	wait_ping "$port" "$name"
	;;
sentinel-resume)
	name=$1 port=$2
	dir=$(inst_dir "$name")
	stop_inst "$name" KILL
	launch "$dir" "$(command -v redis-server)" "$dir/sentinel.conf" --sentinel
	wait_ping "$port" "$name"
	;;
kill)
	pid=$(inst_running "$1") || true
	[[ -n $pid ]] && kill -s KILL "$pid"
	stop_inst "$1" KILL
	;;
stop) stop_inst "$1" ;;
wipe)
	stop_inst "$1" KILL
	remove_inst "$1"
	;;
cluster-create)
	hosts=()
	for p in "$@"; do hosts+=("127.0.0.1:$p"); done
	timeout 60 redis-cli --cluster create "${hosts[@]}" --cluster-replicas 1 --cluster-yes >&2
	;;
*) die "unknown action $action" ;;
esac
