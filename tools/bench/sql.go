package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simba "github.com/simba-go/simba/core"
)

// sqlOptions puts Simba's tables of the run apart from the tests' own.
// simbamysql.Options has the same fields: simbamysql.Options(o) converts.
func sqlOptions(cleanup bool) simbapg.Options {
	o := simbapg.Options{TablePrefix: "simbabench_", Migrate: true}
	if !cleanup {
		o.CleanupInterval = -1 // no statement of its own inside a counting window
	}
	return o
}

// sqlFloor is what the floor of a SQL backend replays: the statements
// Simba's backend sends for an uncontended acquire and release, captured
// from the backend itself, so the floor follows any change to them. On
// PostgreSQL they are the acquire and the release; on MySQL the acquire
// is followed by a read confirming that the caller is still live.
type sqlFloor struct {
	acquire  statement   // takes the lease and returns its token
	confirm  []statement // the reads the backend sends after the acquire, if any
	release  statement
	tokenArg int // index of the token among release's arguments
}

// captureFloor opens a session on b (its client feeds w), takes and gives
// back name once so that the row exists and the statements are prepared,
// then records the statements of a second acquire and release.
func captureFloor(ctx context.Context, su *suite, b simba.Backend, w *wire, name string) (sqlFloor, error) {
	g, err := b.OpenSession(ctx, time.Hour)
	if err != nil {
		return sqlFloor{}, err
	}
	su.onClose(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return b.CloseSession(ctx, g.ID)
	})
	cycle := func() (uint64, error) {
		r, err := b.Acquire(ctx, g.ID, name)
		if err != nil {
			return 0, err
		}
		if !r.Won {
			return 0, fmt.Errorf("acquire %s: held elsewhere", name)
		}
		return r.Token, b.Release(ctx, g.ID, name, r.Token)
	}
	if _, err := cycle(); err != nil {
		return sqlFloor{}, err
	}
	stop := w.record()
	token, err := cycle()
	got := stop()
	if err != nil {
		return sqlFloor{}, err
	}
	if len(got) < 2 || len(got) > 3 {
		return sqlFloor{}, fmt.Errorf("captured %d statements of an acquire and release, want 2 or 3", len(got))
	}
	f := sqlFloor{acquire: got[0], confirm: got[1 : len(got)-1], release: got[len(got)-1], tokenArg: -1}
	for i, a := range f.release.args {
		if v, ok := asUint(a); ok && v == token {
			if f.tokenArg >= 0 {
				return sqlFloor{}, fmt.Errorf("release statement: token %d found twice among its arguments", token)
			}
			f.tokenArg = i
		}
	}
	if f.tokenArg < 0 {
		return sqlFloor{}, fmt.Errorf("release statement: token %d not among its arguments", token)
	}
	return f, nil
}

// releaseArgs returns the release arguments with token in place.
func (f sqlFloor) releaseArgs(token uint64) []any {
	args := slices.Clone(f.release.args)
	args[f.tokenArg] = int64(token)
	return args
}

func asUint(v any) (uint64, bool) {
	switch n := v.(type) {
	case int64:
		return uint64(n), n > 0
	case uint64:
		return n, true
	case int:
		return uint64(n), n > 0
	}
	return 0, false
}

// sqlDialect is what differs between the SQL suites.
type sqlDialect struct {
	backend string
	// open connects a client of its own with room for conns connections
	// at once, counted by w when w is not nil, and returns Simba's backend
	// on it; closeFn closes both.
	open func(ctx context.Context, w *wire, cleanup bool, conns int) (b simba.Backend, closeFn func() error, err error)
	// peer is the lock users would otherwise write on this database.
	peer impl
	// lean is the leanest fenced pair of statements on this database
	// (lean.go): what a fenced row lease cannot avoid.
	lean impl
	// floor returns an operation replaying f on a client of its own.
	floor func(ctx context.Context, f sqlFloor) (opFunc, error)
	// leaseRows counts the rows of the lease table.
	leaseRows func(ctx context.Context) (int64, error)
}

// leaseTable is the lease table of the backends the bench opens.
const leaseTable = "simbabench_lease"

// sqlWorkers is the number of goroutines of the SQL acquire_release_c16
// lines.
const sqlWorkers = 16

// sqlSuite compares Simba's lock with the lean pair, the dialect's peer
// and floor, with one goroutine and (all but the floor, which replays one
// captured name) with sqlWorkers, then Simba's semaphore (no peer, no
// floor), then measures the keep-alive statements of one node holding many leases
// (Simba only: the peers hold their locks on a connection and renew
// nothing).
func sqlSuite(ctx context.Context, s *settings, su *suite, d sqlDialect) error {
	open := func(w *wire, workers int) (simba.Backend, error) {
		b, closeFn, err := d.open(ctx, w, true, workers+1) // and the keep-alive
		if err == nil {
			su.onClose(closeFn)
		}
		return b, err
	}
	cases, err := s.implCases(d.backend, sqlWorkers, []impl{
		{implSimba, func(ns []string) (opFunc, error) {
			b, err := open(nil, len(ns))
			if err != nil {
				return nil, err
			}
			return simbaLockOp(su, b, ns)
		}},
		d.lean,
		d.peer,
	})
	if err != nil {
		return err
	}
	floor, err := s.implCases(d.backend, 1, []impl{
		{implFloor, func(ns []string) (opFunc, error) {
			w := &wire{}
			b, err := open(w, len(ns))
			if err != nil {
				return nil, err
			}
			f, err := captureFloor(ctx, su, b, w, ns[0])
			if err != nil {
				return nil, fmt.Errorf("capture: %w", err)
			}
			return d.floor(ctx, f)
		}},
	})
	if err != nil {
		return err
	}
	su.groups = append(su.groups, group{cases: append(cases, floor...), rounds: s.rounds})
	sem, err := s.semaphoreCases(d.backend, []semImpl{simbaSemaphoreImpl(su, func(conns int) (simba.Backend, error) {
		return open(nil, conns)
	})})
	if err != nil {
		return err
	}
	su.groups = append(su.groups, group{cases: sem, rounds: s.rounds})

	b, err := open(nil, 1)
	if err != nil {
		return err
	}
	if st := newStateCase(lineID{d.backend, implSimba, opStateNames(s.sqlNames)}, s.sqlNames, b, "rows", d.leaseRows); st != nil {
		su.groups = append(su.groups, group{cases: []benchCase{st}, rounds: 1})
	} else {
		fmt.Fprintf(s.log, "bench: %s: no Sweep, no %s line\n", d.backend, opStateNames(s.sqlNames))
	}
	if l := newListCase(d.backend, s.listHeld, b); l != nil {
		su.groups = append(su.groups, group{cases: []benchCase{l}, rounds: 1})
	}

	if err := sqlHandovers(ctx, s, su, d, open); err != nil {
		return err
	}

	var ka []benchCase
	for _, n := range s.leases {
		ka = append(ka, &simbaKeepAlive{
			lid: lineID{d.backend, implSimba, opKeepAlive(n)}, s: s, leases: n,
			open: func(ctx context.Context) (kaBackend, error) {
				w := &wire{}
				b, closeFn, err := d.open(ctx, w, false, 2)
				return kaBackend{b: b, wire: w, close: closeFn}, err
			},
		})
	}
	su.groups = append(su.groups, group{cases: ka, rounds: s.kaRounds})
	return nil
}

// sqlMaxWaiters bounds the handover_w<n> lines of a SQL backend: every
// node has a pool and a listening connection of its own, and the test
// server's connections are few.
const sqlMaxWaiters = 10

// sqlHandovers adds the clean handover between two clients and, where the
// backend broadcasts releases (PostgreSQL), the handovers among waiters,
// whose calls_per_handover counts the statements every node sent.
func sqlHandovers(ctx context.Context, s *settings, su *suite, d sqlDialect, open func(*wire, int) (simba.Backend, error)) error {
	ha, err := open(nil, 1)
	if err != nil {
		return err
	}
	hb, err := open(nil, 1)
	if err != nil {
		return err
	}
	ho, err := simbaHandover(su, s, d.backend, ha, hb)
	if err != nil {
		return err
	}
	su.groups = append(su.groups, group{cases: []benchCase{ho}, rounds: s.rounds})
	if _, ok := ha.(simba.ReleaseNotifier); !ok {
		fmt.Fprintf(s.log, "bench: %s: no release broadcast, no %s lines\n", d.backend, opHandoverW(1))
		return nil
	}
	var wires wireSet
	var herd []benchCase
	for _, w := range s.waiters {
		if w > sqlMaxWaiters {
			continue
		}
		herd = append(herd, &herdHandover{
			lid: lineID{d.backend, implSimba, opHandoverW(w)}, s: s, waiters: w, server: wires.count,
			open: func(ctx context.Context) (simba.Backend, func() error, error) {
				return d.open(ctx, wires.add(), false, 2)
			},
		})
	}
	su.groups = append(su.groups, group{cases: herd, rounds: s.rounds})
	return nil
}

// postgresSuite compares Simba's lock with a session advisory lock
// (pg_try_advisory_lock and pg_advisory_unlock on one pooled connection)
// and the floor (Simba's two statements run directly with pgx).
func postgresSuite(ctx context.Context, s *settings, rawURL string, su *suite) error {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return fmt.Errorf("SIMBA_TEST_POSTGRES_URL: %w", err)
	}
	// newPool opens a pool of its own, with room for conns connections
	// (pgx's default, max(4, cores), when that is more).
	newPool := func(ctx context.Context, w *wire, conns int) (*pgxpool.Pool, error) {
		c := cfg.Copy()
		c.MaxConns = max(c.MaxConns, int32(conns))
		if w != nil {
			c.ConnConfig.Tracer = pgTracer{w}
		}
		p, err := pgxpool.NewWithConfig(ctx, c)
		if err != nil {
			return nil, err
		}
		if err := p.Ping(ctx); err != nil {
			p.Close()
			return nil, err
		}
		return p, nil
	}
	pool := func(conns int) (*pgxpool.Pool, error) {
		p, err := newPool(ctx, nil, conns)
		if err == nil {
			su.onClose(func() error { p.Close(); return nil })
		}
		return p, err
	}
	admin, err := pool(1)
	if err != nil {
		return err
	}
	lean, err := newLeanTables(ctx, pgExec{admin}, pgLeanSchema)
	if err != nil {
		return fmt.Errorf("lean tables: %w", err)
	}
	su.onClose(func() error { return lean.drop(pgExec{admin}) })
	return sqlSuite(ctx, s, su, sqlDialect{
		backend: "postgres",
		open: func(ctx context.Context, w *wire, cleanup bool, conns int) (simba.Backend, func() error, error) {
			p, err := newPool(ctx, w, conns)
			if err != nil {
				return nil, nil, err
			}
			b, err := simbapg.New(p, sqlOptions(cleanup))
			if err != nil {
				p.Close()
				return nil, nil, err
			}
			return b, func() error { err := b.Close(); p.Close(); return err }, nil
		},
		leaseRows: func(ctx context.Context) (int64, error) {
			var n int64
			err := admin.QueryRow(ctx, "SELECT count(*) FROM "+leaseTable).Scan(&n)
			return n, err
		},
		lean: impl{implLean, func(ns []string) (opFunc, error) {
			p, err := pool(len(ns))
			if err != nil {
				return nil, err
			}
			return leanOp(pgLean{p, lean}, lean.sessions, ns)
		}},
		peer: impl{"advisory", func(ns []string) (opFunc, error) {
			p, err := pool(len(ns))
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, w int) error {
				conn, err := p.Acquire(ctx)
				if err != nil {
					return err
				}
				defer conn.Release()
				key := advisoryKey + int64(w)
				var ok bool
				if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("advisory lock %d: held elsewhere", key)
				}
				if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", key).Scan(&ok); err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("advisory unlock %d: not held", key)
				}
				return nil
			}, nil
		}},
		floor: func(ctx context.Context, f sqlFloor) (opFunc, error) {
			p, err := pool(1)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, _ int) error {
				rows, err := p.Query(ctx, f.acquire.sql, f.acquire.args...)
				if err != nil {
					return err
				}
				token, err := lastToken(rows)
				if err != nil {
					return err
				}
				for _, st := range f.confirm {
					rows, err := p.Query(ctx, st.sql, st.args...)
					if err != nil {
						return err
					}
					rows.Close()
					if err := rows.Err(); err != nil {
						return err
					}
				}
				_, err = p.Exec(ctx, f.release.sql, f.releaseArgs(token)...)
				return err
			}, nil
		},
	})
}

// advisoryKey is the first advisory lock key of the run ("SIMB" in the
// high bytes); worker w uses advisoryKey+w.
const advisoryKey int64 = 0x53494d42 << 32

// lastToken reads the rows of a captured acquire and returns its token:
// the last positive integer column of its last row.
func lastToken(rows pgx.Rows) (uint64, error) {
	defer rows.Close()
	var token uint64
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return 0, err
		}
		for _, v := range vals {
			if n, ok := asUint(v); ok {
				token = n
			}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if token == 0 {
		return 0, errors.New("acquire statement returned no token")
	}
	return token, nil
}

// mysqlSuite compares Simba's lock on MariaDB with GET_LOCK and
// RELEASE_LOCK on one pooled connection and the floor (Simba's statements
// run directly, prepared). SIMBA_TEST_MYSQL_URL is a go-sql-driver DSN.
func mysqlSuite(ctx context.Context, s *settings, dsn string, su *suite) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("SIMBA_TEST_MYSQL_URL: %w", err)
	}
	newDB := func(ctx context.Context, w *wire, interpolate bool) (*sql.DB, error) {
		c := cfg.Clone()
		c.InterpolateParams = interpolate
		c.ClientFoundRows = false // changed rows, which the lean pair reads
		conn, err := mysql.NewConnector(c)
		if err != nil {
			return nil, err
		}
		var db *sql.DB
		if w != nil {
			db = sql.OpenDB(countingConnector{Connector: conn, w: w})
		} else {
			db = sql.OpenDB(conn)
		}
		db.SetMaxIdleConns(setupWorkers)
		if err := db.PingContext(ctx); err != nil {
			return nil, errors.Join(err, db.Close())
		}
		return db, nil
	}
	database := func(interpolate bool) (*sql.DB, error) {
		db, err := newDB(ctx, nil, interpolate)
		if err == nil {
			su.onClose(db.Close)
		}
		return db, err
	}
	admin, err := database(false)
	if err != nil {
		return err
	}
	lean, err := newLeanTables(ctx, sqlExec{admin}, myLeanSchema)
	if err != nil {
		return fmt.Errorf("lean tables: %w", err)
	}
	su.onClose(func() error { return lean.drop(sqlExec{admin}) })
	return sqlSuite(ctx, s, su, sqlDialect{
		backend: "mysql",
		open: func(ctx context.Context, w *wire, cleanup bool, _ int) (simba.Backend, func() error, error) {
			db, err := newDB(ctx, w, false)
			if err != nil {
				return nil, nil, err
			}
			b, err := simbamysql.New(db, simbamysql.Options(sqlOptions(cleanup)))
			if err != nil {
				return nil, nil, errors.Join(err, db.Close())
			}
			return b, func() error { return errors.Join(b.Close(), db.Close()) }, nil
		},
		leaseRows: func(ctx context.Context) (int64, error) {
			var n int64
			err := admin.QueryRowContext(ctx, "SELECT count(*) FROM "+leaseTable).Scan(&n)
			return n, err
		},
		lean: impl{implLean, func(ns []string) (opFunc, error) {
			db, err := database(false)
			if err != nil {
				return nil, err
			}
			l, err := newMyLean(ctx, db, lean)
			if err != nil {
				return nil, err
			}
			su.onClose(l.close)
			return leanOp(l, lean.sessions, ns)
		}},
		peer: impl{"getlock", func(ns []string) (opFunc, error) {
			// Interpolated parameters: each statement is one round trip,
			// the best database/sql does without holding prepared
			// statements per connection.
			db, err := database(true)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, w int) error {
				conn, err := db.Conn(ctx)
				if err != nil {
					return err
				}
				defer conn.Close()
				name := "simbabench." + ns[w]
				var got sql.NullInt64
				if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil {
					return err
				}
				if got.Int64 != 1 {
					return fmt.Errorf("GET_LOCK %s: held elsewhere", name)
				}
				if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", name).Scan(&got); err != nil {
					return err
				}
				if got.Int64 != 1 {
					return fmt.Errorf("RELEASE_LOCK %s: not held", name)
				}
				return nil
			}, nil
		}},
		floor: func(ctx context.Context, f sqlFloor) (opFunc, error) {
			db, err := database(false)
			if err != nil {
				return nil, err
			}
			acq, err := db.PrepareContext(ctx, f.acquire.sql)
			if err != nil {
				return nil, err
			}
			su.onClose(acq.Close)
			confirm := make([]*sql.Stmt, len(f.confirm))
			for i, st := range f.confirm {
				if confirm[i], err = db.PrepareContext(ctx, st.sql); err != nil {
					return nil, err
				}
				su.onClose(confirm[i].Close)
			}
			rel, err := db.PrepareContext(ctx, f.release.sql)
			if err != nil {
				return nil, err
			}
			su.onClose(rel.Close)
			return func(ctx context.Context, _ int) error {
				res, err := acq.ExecContext(ctx, f.acquire.args...)
				if err != nil {
					return err
				}
				token, err := res.LastInsertId()
				if err != nil {
					return err
				}
				if token <= 0 {
					return errors.New("acquire statement returned no token")
				}
				for i, st := range confirm {
					rows, err := st.QueryContext(ctx, f.confirm[i].args...)
					if err != nil {
						return err
					}
					for rows.Next() {
					}
					if err := errors.Join(rows.Err(), rows.Close()); err != nil {
						return err
					}
				}
				_, err = rel.ExecContext(ctx, f.releaseArgs(uint64(token))...)
				return err
			}, nil
		},
	})
}
