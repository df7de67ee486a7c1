#!/usr/bin/env bash
#
# postgres.sh LIB ACTION NODE [ARGS] - one node of a PostgreSQL primary and
# streaming replica, with the functions of tools/testenv/lib.sh (LIB). NODE
# is the node's state directory (its instance lives in NODE/postgres, or
# behind a symlink there when the postgres user cannot reach NODE).
#
#   primary NODE PORT        wipe the node, start it empty as a primary on
#                            PORT; wait until it answers
#   sync NODE PORT on|off    make the primary on PORT wait for one standby's
#                            flush at every commit (on), or only for its own
#                            WAL flush (off)
#   replica NODE PORT FROM   wipe the node, copy the primary on port FROM
#                            with pg_basebackup -R and start it as its
#                            streaming replica on PORT; wait until the
#                            primary sees it streaming
#   kill NODE                SIGKILL the server and all its children at
#                            once (a crash); print "killed <unix ns>", the
#                            time the signals were sent
#   freeze NODE              SIGSTOP the server and its children: it
#                            accepts connections and answers nothing, as a
#                            hung or cut-off host (down and kill end it)
#   promote NODE             promote the replica; wait until it is done
#   down NODE                kill the server and delete its data
set -euo pipefail

lib=$1 action=$2 node=$3
shift 3
# shellcheck source=tools/testenv/lib.sh
. "$lib"
# Every function of lib.sh below works on the instance "postgres" of the
# state directory TESTENV_DIR, on POSTGRES_PORT: point them at this node.
TESTENV_DIR=$node
mkdir -p "$TESTENV_DIR"

bindir() { pg_bindir || die "PostgreSQL binaries not found under /usr/lib/postgresql"; }

# signal_all SIG sends SIG to the server and all its processes at once (a
# backend that outlived the postmaster by a moment could still commit and
# answer) and leaves their ids in pids.
signal_all() {
	local dir
	dir=$(inst_realdir postgres)
	pids="$(inst_running postgres || true) $(stray_pids "$dir")"
	if [[ -n ${pids// /} ]]; then
		# shellcheck disable=SC2086
		kill -s "$1" $pids
	fi
}

sql() { # sql PORT STATEMENT
	PGCONNECT_TIMEOUT=3 timeout 20 psql -X -q -w -h 127.0.0.1 -p "$1" -U postgres -d postgres -v ON_ERROR_STOP=1 -Atc "$2"
}

ready() {
	if ! wait_ready postgres "$TESTENV_TIMEOUT"; then
		log_tail postgres
		die "postgres on port $POSTGRES_PORT did not get ready"
	fi
}

case $action in
primary)
	POSTGRES_PORT=$1
	stop_inst postgres KILL
	remove_inst postgres
	start_postgres
	ready
	;;
sync)
	if [[ $2 == on ]]; then
		# '*': whichever standby is connected, so that the setting holds
		# unchanged after a promotion, in either direction.
		sql "$1" "ALTER SYSTEM SET synchronous_standby_names = '*'"
		sql "$1" "ALTER SYSTEM SET synchronous_commit = 'on'"
	else
		# Asynchronous replication as PostgreSQL ships it: a commit waits
		# for its local WAL flush (the default synchronous_commit = on;
		# the test environment's own server has it off), not for the
		# standby.
		sql "$1" "ALTER SYSTEM SET synchronous_standby_names = ''"
		sql "$1" "ALTER SYSTEM SET synchronous_commit = 'on'"
	fi
	sql "$1" "SELECT pg_reload_conf()" >/dev/null
	;;
replica)
	POSTGRES_PORT=$1
	from=$2
	stop_inst postgres KILL
	remove_inst postgres
	prepare_postgres_dir
	dir=$(inst_realdir postgres)
	: >"$dir/log"
	is_root && chown postgres: "$dir/log"
	# -R writes primary_conninfo and standby.signal; -X stream copies the
	# WAL written meanwhile; -c fast does not wait for a checkpoint.
	if ! as_postgres "$(bindir)/pg_basebackup" -h 127.0.0.1 -p "$from" -U postgres -w \
		-D "$dir/data" -R -X stream -c fast --no-sync \
		</dev/null >>"$dir/log" 2>&1 8>&- 9>&-; then
		log_tail postgres
		die "pg_basebackup from port $from failed"
	fi
	# The copy carries the primary's postgresql.conf, port included: a
	# later line wins.
	printf '\n# replica of port %s\nport = %s\n' "$from" "$POSTGRES_PORT" >>"$dir/data/postgresql.conf"
	if ! as_postgres "$(bindir)/pg_ctl" -D "$dir/data" -l "$dir/log" -W start \
		</dev/null >>"$dir/ctl.log" 2>&1 8>&- 9>&-; then
		cat "$dir/ctl.log" >&2
		log_tail postgres
		die "pg_ctl start of the replica failed"
	fi
	ready
	start=$SECONDS
	until [[ $(sql "$from" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null) -ge 1 ]]; do
		((SECONDS - start < TESTENV_TIMEOUT)) || die "the replica on port $POSTGRES_PORT did not stream from port $from"
		sleep 0.1
	done
	;;
kill)
	signal_all KILL
	echo "killed $(date +%s%N)"
	# A killed process stays a zombie until its parent (init, here the
	# machine's own process manager) reaps it, which can take a second;
	# it holds no port and writes nothing, so it counts as gone.
	for ((i = 0; i < 500; i++)); do
		alive=
		for p in $pids; do
			state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) || continue
			[[ $state != Z ]] && alive=1 && break
		done
		[[ -z $alive ]] && break
		sleep 0.01
	done
	;;
freeze)
	signal_all STOP
	;;
promote)
	dir=$(inst_realdir postgres)
	if ! as_postgres "$(bindir)/pg_ctl" -D "$dir/data" -w -t "$TESTENV_TIMEOUT" promote \
		</dev/null >>"$dir/ctl.log" 2>&1 8>&- 9>&-; then
		cat "$dir/ctl.log" >&2
		log_tail postgres
		die "pg_ctl promote failed"
	fi
	;;
down)
	stop_inst postgres KILL
	remove_inst postgres
	;;
*) die "unknown action $action" ;;
esac
