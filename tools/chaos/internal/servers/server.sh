#!/usr/bin/env bash
#
# server.sh LIB ACTION SERVER - manage one private server instance of the
# robustness suite with the functions of tools/testenv/lib.sh (LIB), on
# the state directory and port the caller exports (SIMBA_TESTENV_DIR,
# SIMBA_TESTENV_<SERVER>_PORT), so that the suite can stop and restart its
# own servers without touching the shared test servers.
#
#   fresh   wipe the instance and start it empty; wait until it answers
#   stop    stop it, keeping its data (Redis saves a snapshot first)
#   resume  start it again on its data; wait until it answers
#   down    stop it and delete its data
set -euo pipefail

lib=$1 action=$2 server=$3
# shellcheck source=tools/testenv/lib.sh
. "$lib"
# Zookeeper here ticks every 100ms: sessions as short as 200ms are granted.
ZK_TICK_MS=100

resume_postgres() {
	local dir
	dir=$(inst_realdir postgres)
	as_postgres "$(pg_bindir)/pg_ctl" -D "$dir/data" -l "$dir/log" -W start \
		</dev/null >>"$dir/ctl.log" 2>&1 8>&- 9>&-
}

resume_mysql() {
	local dir sock user=()
	dir=$(inst_dir mysql)
	is_root && user=(--user=root)
	sock=$dir/mysql.sock
	((${#sock} > 100)) && sock=/tmp/simba-chaos-$(short_hash "$TESTENV_DIR")-mysql.sock
	launch "$dir" "$(command -v mariadbd)" --no-defaults --datadir="$dir/data" "${user[@]}" \
		--port="$MYSQL_PORT" --bind-address=127.0.0.1 --socket="$sock" --pid-file="$dir/pid" \
		--skip-name-resolve --skip-log-bin --max-connections=500 \
		--character-set-server=utf8mb4 \
		--innodb-buffer-pool-size=64M --innodb-log-file-size=32M \
		--innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --sync-binlog=0
}

ready() {
	if ! wait_ready "$server" "$TESTENV_TIMEOUT"; then
		log_tail "$server"
		die "$server did not get ready"
	fi
	if [[ $server == mysql ]]; then
		mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "$MYSQL_PORT" -u root \
			-e "CREATE DATABASE IF NOT EXISTS $MYSQL_DB CHARACTER SET utf8mb4"
	fi
}

mkdir -p "$TESTENV_DIR"
case $action in
fresh)
	stop_inst "$server" KILL
	remove_inst "$server"
	start_inst "$server"
	ready
	;;
stop)
	if [[ $server == redis ]]; then
		timeout 10 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown save >/dev/null 2>&1 || true
	fi
	stop_inst "$server"
	;;
resume)
	case $server in
	redis) start_redis ;;
	postgres) resume_postgres ;;
	mysql) resume_mysql ;;
	zk) start_zk zk ;;
	esac
	ready
	;;
down)
	stop_inst "$server" KILL
	remove_inst "$server"
	;;
*) die "unknown action $action" ;;
esac
