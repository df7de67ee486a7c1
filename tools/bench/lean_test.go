package main

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestLeanPair: the lean pair is fenced as far as it claims to be, on both
// SQL databases: a live holder keeps its lease, a release frees only the
// holder's term, an expired holder is taken over with a higher token, a
// caller that is not live wins nothing, and the tables go at the end.
func TestLeanPair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type setup struct {
		db     execer
		store  func(t *testing.T, lt *leanTables) leanStore
		expire string // sets a session's expiry in the past; %s: the prefix
		count  func(lt *leanTables) error
	}
	for _, tt := range []struct {
		name string
		sc   leanSchema
		open func(t *testing.T) setup
	}{
		{"postgres", pgLeanSchema, func(t *testing.T) setup {
			p, err := pgxpool.New(ctx, serverEnv(t, "SIMBA_TEST_POSTGRES_URL"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			return setup{
				db:     pgExec{p},
				store:  func(_ *testing.T, lt *leanTables) leanStore { return pgLean{p, lt} },
				expire: "UPDATE %slean_session SET expires_at = now() - interval '1 second' WHERE id = $1",
				count: func(lt *leanTables) error {
					var n int
					return p.QueryRow(ctx, "SELECT count(*) FROM "+lt.prefix+"lean_lease").Scan(&n)
				},
			}
		}},
		{"mysql", myLeanSchema, func(t *testing.T) setup {
			cfg, err := mysql.ParseDSN(serverEnv(t, "SIMBA_TEST_MYSQL_URL"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.ClientFoundRows = false
			conn, err := mysql.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(conn)
			t.Cleanup(func() { _ = db.Close() })
			return setup{
				db: sqlExec{db},
				store: func(t *testing.T, lt *leanTables) leanStore {
					l, err := newMyLean(ctx, db, lt)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = l.close() })
					return l
				},
				expire: "UPDATE %slean_session SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?",
				count: func(lt *leanTables) error {
					var n int
					return db.QueryRowContext(ctx, "SELECT count(*) FROM "+lt.prefix+"lean_lease").Scan(&n)
				},
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			su := tt.open(t)
			lt, err := newLeanTables(ctx, su.db, tt.sc)
			if err != nil {
				t.Fatal(err)
			}
			dropped := false
			t.Cleanup(func() {
				if !dropped {
					_ = lt.drop(su.db)
				}
			})
			if len(lt.sessions) != leanSessions {
				t.Fatalf("%d live sessions, want %d", len(lt.sessions), leanSessions)
			}
			st := su.store(t, lt)
			s0, s1, s2 := lt.sessions[0], lt.sessions[1], lt.sessions[2]
			win := func(name, s string) int64 {
				t.Helper()
				tok, won, err := st.acquire(ctx, name, s)
				if err != nil || !won || tok <= 0 {
					t.Fatalf("acquire %s by %s = %d, %v, %v; want won", name, s, tok, won, err)
				}
				return tok
			}
			lose := func(name, s, why string) {
				t.Helper()
				if tok, won, err := st.acquire(ctx, name, s); err != nil || won {
					t.Fatalf("acquire %s by %s = %d, %v, %v; want lost: %s", name, s, tok, won, err, why)
				}
			}
			release := func(name, s string, tok int64, want bool) {
				t.Helper()
				if ok, err := st.release(ctx, name, s, tok); err != nil || ok != want {
					t.Fatalf("release %s by %s with %d = %v, %v; want %v", name, s, tok, ok, err, want)
				}
			}

			t1 := win("x", s0)
			lose("x", s1, "held by a live session")
			release("x", s1, t1, false)
			release("x", s0, t1, true)
			release("x", s0, t1, false)
			t2 := win("x", s1)
			if t2 <= t1 {
				t.Fatalf("token %d after %d, want higher", t2, t1)
			}
			if err := su.db.exec(ctx, fmt.Sprintf(su.expire, lt.prefix), s1); err != nil {
				t.Fatal(err)
			}
			t3 := win("x", s2)
			if t3 <= t2 {
				t.Fatalf("take-over of an expired holder: token %d after %d, want higher", t3, t2)
			}
			release("x", s1, t2, false)
			lose("y", s1, "the caller is not live")
			release("x", s2, t3, true)

			if err := lt.drop(su.db); err != nil {
				t.Fatal(err)
			}
			dropped = true
			if err := su.count(lt); err == nil {
				t.Fatal("the lease table is still there after drop")
			}
		})
	}
}
