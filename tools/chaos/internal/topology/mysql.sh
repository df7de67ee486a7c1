#!/usr/bin/env bash
#
# mysql.sh LIB ACTION [ARGS] - run one MariaDB node of a primary/replica
# topology with the functions of tools/testenv/lib.sh (LIB), on the state
# directory and port the caller exports (SIMBA_TESTENV_DIR,
# SIMBA_TESTENV_MYSQL_PORT) and the node settings it exports:
#   NODE_ID        server_id, 1 or more
#   NODE_SEMISYNC  1 for semi-synchronous replication (AFTER_SYNC)
#   NODE_PASSWORD  password of the simba and repl users (on a primary)
#
# Actions:
#   primary               start empty as a writable primary; create the
#                         database, the simba user and the repl user
#   replica PORT          start empty, read-only, and replicate from the
#                         primary on PORT from the start of its binary log
#                         (GTID, MASTER_USE_GTID=slave_pos)
#   promote               stop replicating once every event received is
#                         applied, forget the primary, turn read_only off
#   demote                turn read_only on (clients stay connected)
#   rejoin PORT           replicate, on this node's data, from the primary
#                         on PORT, from the GTIDs this node logged
#   caught-up PORT        wait until this replica has applied everything
#                         the primary on PORT logged (and, with semisync,
#                         until the primary waits for it again)
#   kill                  SIGKILL the server
#   down                  SIGKILL the server and delete its data
set -euo pipefail

lib=$1 action=$2
shift 2
# shellcheck source=tools/testenv/lib.sh
. "$lib"

node_id=${NODE_ID:?}
semisync=${NODE_SEMISYNC:-0}

sql() {
	local port=$1
	shift
	timeout 20 mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "$port" -u root \
		--connect-timeout=3 -N -B -e "$*"
}

# slave_status PORT prints SHOW SLAVE STATUS as "Field: value" lines.
slave_status() {
	timeout 20 mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "$1" -u root \
		--connect-timeout=3 -e 'SHOW SLAVE STATUS\G'
}

# start_node fresh-installs the node and starts it with a binary log and
# GTIDs; extra arguments go to mariadbd.
start_node() {
	local dir sock user=() sync=()
	stop_inst mysql KILL
	remove_inst mysql
	dir=$(inst_dir mysql)
	mkdir -p "$dir"
	is_root && user=(--user=root)
	if ! mariadb-install-db --no-defaults --datadir="$dir/data" "${user[@]}" \
		--auth-root-authentication-method=normal --skip-test-db \
		</dev/null >>"$dir/log" 2>&1 8>&- 9>&-; then
		log_tail mysql
		die "mariadb-install-db failed"
	fi
	sock=$dir/mysql.sock
	((${#sock} > 100)) && sock=/tmp/simba-topology-$(short_hash "$dir")-mysql.sock
	if ((semisync)); then
		# Built into MariaDB 10.3 and later: no plugin to load. A commit
		# waits until the replica has the event in its relay log before
		# the engine commits it (AFTER_SYNC), for at most 1s without a
		# replica, after which the primary runs asynchronously until a
		# replica catches up.
		sync=(--rpl-semi-sync-master-enabled=ON --rpl-semi-sync-slave-enabled=ON
			--rpl-semi-sync-master-wait-point=AFTER_SYNC --rpl-semi-sync-master-timeout=1000)
	fi
	launch "$dir" "$(command -v mariadbd)" --no-defaults --datadir="$dir/data" "${user[@]}" \
		--port="$MYSQL_PORT" --bind-address=127.0.0.1 --socket="$sock" --pid-file="$dir/pid" \
		--skip-name-resolve --max-connections=300 --character-set-server=utf8mb4 \
		--innodb-buffer-pool-size=32M --innodb-log-file-size=16M \
		--innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --sync-binlog=0 \
		--server-id="$node_id" --log-bin=mariadb-bin --log-slave-updates=ON --binlog-format=ROW \
		--gtid-strict-mode=ON --gtid-domain-id=0 --slave-net-timeout=5 \
		--relay-log=relay-bin --skip-slave-start "${sync[@]}" "$@"
	if ! wait_ready mysql "$TESTENV_TIMEOUT"; then
		log_tail mysql
		die "mariadb node $node_id did not get ready"
	fi
}

# applied PORT prints the GTIDs the server on PORT has applied (replica)
# or logged (primary).
gtid_pos() { sql "$1" 'SELECT @@gtid_binlog_pos'; }

case $action in
primary)
	start_node
	# The simba user cannot write while read_only is on (no READ ONLY
	# ADMIN), unlike root.
	sql "$MYSQL_PORT" "CREATE DATABASE $MYSQL_DB CHARACTER SET utf8mb4;
		CREATE USER 'simba'@'127.0.0.1' IDENTIFIED BY '${NODE_PASSWORD:?}';
		GRANT ALL ON $MYSQL_DB.* TO 'simba'@'127.0.0.1';
		CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY '${NODE_PASSWORD:?}';
		GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1';"
	;;
replica)
	primary=${1:?}
	start_node --read-only=ON
	# gtid_slave_pos is empty: the whole binary log of the primary is
	# applied, users and database included.
	sql "$MYSQL_PORT" "SET GLOBAL gtid_slave_pos = '';
		CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$primary, MASTER_USER='repl',
			MASTER_PASSWORD='${NODE_PASSWORD:?}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
		START SLAVE;"
	;;
promote)
	# Stop receiving, apply what the relay log holds (with AFTER_SYNC, an
	# event acknowledged to the primary may be received but not applied
	# yet: RESET SLAVE ALL would delete it), then take over.
	sql "$MYSQL_PORT" 'STOP SLAVE IO_THREAD'
	for ((i = 0; i < 300; i++)); do
		status=$(slave_status "$MYSQL_PORT")
		io=$(sed -n 's/^ *Gtid_IO_Pos: *//p' <<<"$status")
		running=$(sed -n 's/^ *Slave_SQL_Running: *//p' <<<"$status")
		[[ $running != Yes ]] && die "replication SQL thread stopped: $(sed -n 's/^ *Last_SQL_Error: *//p' <<<"$status")"
		applied=$(sql "$MYSQL_PORT" 'SELECT @@gtid_slave_pos')
		[[ $io == "$applied" ]] && break
		sleep 0.05
	done
	[[ $io == "$applied" ]] || die "relay log not applied after 15s (received $io, applied $applied)"
	sql "$MYSQL_PORT" 'STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF'
	;;
demote)
	sql "$MYSQL_PORT" 'SET GLOBAL read_only = ON'
	;;
rejoin)
	primary=${1:?}
	sql "$MYSQL_PORT" "SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos;
		CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$primary, MASTER_USER='repl',
			MASTER_PASSWORD='${NODE_PASSWORD:?}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
		START SLAVE;"
	;;
caught-up)
	primary=${1:?}
	for ((i = 0; i < 600; i++)); do
		want=$(gtid_pos "$primary")
		got=$(sql "$MYSQL_PORT" 'SELECT @@gtid_slave_pos')
		ok=1
		[[ $want == "$got" ]] || ok=0
		if ((ok && semisync)); then
			[[ $(sql "$primary" "SHOW STATUS LIKE 'Rpl_semi_sync_master_status'") == *ON ]] || ok=0
		fi
		((ok)) && exit 0
		sleep 0.1
	done
	die "replica on $MYSQL_PORT not caught up with $primary after 60s"
	;;
kill)
	stop_inst mysql KILL
	;;
down)
	stop_inst mysql KILL
	remove_inst mysql
	;;
*) die "unknown action $action" ;;
esac
