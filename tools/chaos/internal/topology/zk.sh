#!/usr/bin/env bash
#
# zk.sh LIB ACTION [MEMBER] - run a three-server Zookeeper ensemble on
# loopback with the functions of tools/testenv/lib.sh (LIB), in the state
# directory SIMBA_TESTENV_DIR. The caller exports the ports of every member
# N (1..3): ZK_ENSEMBLE_CLIENT_N, ZK_ENSEMBLE_PEER_N, ZK_ENSEMBLE_ELECTION_N,
# and ZK_ENSEMBLE_TICK_MS and ZK_ENSEMBLE_MAX_SESSION_MS.
#
#   up          wipe the members and start all three empty; wait until the
#               ensemble has a leader and every member serves
#   kill N      SIGKILL member N (its data stays)
#   start N     start member N again on its data (no wait)
#   down        SIGKILL every member and delete their data
#
# The members are the instances zk-1, zk-2 and zk-3 of the state directory.
set -euo pipefail

lib=$1 action=$2 member=${3:-}
# shellcheck source=tools/testenv/lib.sh
. "$lib"

members=(1 2 3)

client_port() { local v=ZK_ENSEMBLE_CLIENT_$1 && echo "${!v}"; }

start_member() {
	local n=$1 dir m
	dir=$(inst_dir "zk-$n")
	mkdir -p "$dir/data"
	echo "$n" >"$dir/data/myid"
	{
		echo "# simba robustness suite: one member of a three-server ensemble, loopback only"
		zk_cfg "$dir" "$ZK_ENSEMBLE_TICK_MS" "$ZK_ENSEMBLE_MAX_SESSION_MS"
		cat <<EOF
initLimit=20
syncLimit=10
clientPort=$(client_port "$n")
clientPortAddress=127.0.0.1
EOF
		for m in "${members[@]}"; do
			local p=ZK_ENSEMBLE_PEER_$m e=ZK_ENSEMBLE_ELECTION_$m
			echo "server.$m=127.0.0.1:${!p}:${!e}"
		done
	} >"$dir/zoo.cfg"
	launch_zk "$dir" "" -Xmx128m -XX:TieredStopAtLevel=1
}

# mode N prints the mode member N reports (leader, follower), or nothing
# while it does not serve.
mode() {
	zk_word "$(client_port "$1")" srvr | sed -n 's/^Mode: //p' | tr -d '\r'
}

# wait_serving waits until one member leads and every member serves.
wait_serving() {
	local start=$SECONDS m serving leaders
	while ((SECONDS - start < TESTENV_TIMEOUT)); do
		serving=0 leaders=0
		for m in "${members[@]}"; do
			case $(mode "$m") in
			leader) serving=$((serving + 1)) leaders=$((leaders + 1)) ;;
			follower) serving=$((serving + 1)) ;;
			esac
		done
		((serving == ${#members[@]} && leaders == 1)) && return 0
		sleep 0.2
	done
	for m in "${members[@]}"; do
		log_tail "zk-$m"
	done
	die "the Zookeeper ensemble did not serve within ${TESTENV_TIMEOUT}s"
}

check_member() {
	[[ $member =~ ^[123]$ ]] || die "unknown member '$member' (want 1, 2 or 3)"
}

mkdir -p "$TESTENV_DIR"
case $action in
up)
	for m in "${members[@]}"; do
		stop_inst "zk-$m" KILL
		remove_inst "zk-$m"
	done
	for m in "${members[@]}"; do
		start_member "$m"
	done
	wait_serving
	;;
kill)
	check_member
	stop_inst "zk-$member" KILL
	;;
start)
	check_member
	start_member "$member"
	;;
down)
	for m in "${members[@]}"; do
		stop_inst "zk-$m" KILL
		remove_inst "zk-$m"
	done
	;;
*) die "unknown action $action" ;;
esac
