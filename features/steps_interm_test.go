package features

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simba "github.com/simba-go/simba/core"
)

// Transactions in a term (R-FTX-*): simbapg.InTermSQL and simbamysql.InTerm
// on the run's database, writing rows of the run's fence table whose id
// is the scenario's id, ".tx." and the value.

// inTerm runs write in a transaction of term t on the run's SQL database.
func (w *world) inTerm(ctx context.Context, t *simba.Term, write func(ctx context.Context, tx *sql.Tx) error) error {
	switch w.env.dialect {
	case dialectPostgres:
		return simbapg.InTermSQL(ctx, w.env.db, t, simbapg.TermSQLTx{TablePrefix: w.env.prefix}, write)
	case dialectMySQL:
		return simbamysql.InTermTx(ctx, w.env.db, t, simbamysql.TermTx{TablePrefix: w.env.prefix}, write)
	}
	return errors.New("features: transactions in a term need a SQL backend: tag the scenario @postgres @mysql")
}

// txWrite is the write of value with t's token in a transaction.
func (w *world) txWrite(t *simba.Term, value string) func(ctx context.Context, tx *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		q := placeholders(w.env.dialect, "INSERT INTO "+w.env.prefix+"fence (id, token, val) VALUES (?, ?, ?)")
		_, err := tx.ExecContext(ctx, q, w.id+".tx."+value, int64(t.Token()), value)
		return err
	}
}

func (w *world) inTermWrite(name, value, lease, outcome string) error {
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	ctx, cancel := w.serverCtx()
	defer cancel()
	err = w.inTerm(ctx, t, w.txWrite(t, value))
	switch {
	case outcome == "commits" && err != nil:
		return fmt.Errorf("the transaction writing %q with token %d failed: %w", value, t.Token(), err)
	case outcome == "writes nothing" && err == nil:
		return fmt.Errorf("the transaction writing %q with token %d committed, want an error matching ErrTermExpired", value, t.Token())
	case outcome == "writes nothing" && !errors.Is(err, simba.ErrTermExpired):
		return fmt.Errorf("the transaction writing %q with token %d returned %w, want an error matching ErrTermExpired", value, t.Token(), err)
	}
	return nil
}

// inTermHoldsRecord keeps a transaction of name's term open while another
// connection tries to write the lease's record, which must wait for it
// (a lock timeout), then lets the transaction commit.
func (w *world) inTermHoldsRecord(name, lease, lease2 string) error {
	if lease2 != lease {
		return fmt.Errorf("features: the transaction is in the term of %q, the record written is %q's", lease, lease2)
	}
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	ctx, cancel := w.serverCtx()
	defer cancel()
	open, commit := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- w.inTerm(ctx, t, func(ctx context.Context, tx *sql.Tx) error {
			close(open)
			<-commit
			return w.txWrite(t, "held open")(ctx, tx)
		})
	}()
	select {
	case <-open:
	case err := <-done:
		return fmt.Errorf("the transaction of %s's term ended before it was open: %w", name, err)
	}
	werr := w.writeRecordWithin(ctx, w.name(lease))
	close(commit)
	if err := <-done; err != nil {
		return fmt.Errorf("the transaction held open failed: %w", err)
	}
	if werr == nil {
		return errors.New("a write of the lease's record went through while a transaction of its term was open")
	}
	var pgErr *pgconn.PgError
	var myErr *mysql.MySQLError
	lockTimeout := errors.As(werr, &pgErr) && pgErr.Code == "55P03" || errors.As(werr, &myErr) && myErr.Number == 1205
	if !lockTimeout {
		return fmt.Errorf("the write of the lease's record failed with %w, want a lock timeout (55P03, 1205)", werr)
	}
	return nil
}

// writeRecordWithin tries to free the record of lease on a connection of
// its own, giving up after a short lock wait.
func (w *world) writeRecordWithin(ctx context.Context, lease string) error {
	conn, err := w.env.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	wait := "SET LOCAL lock_timeout = '300ms'"
	if w.env.dialect == dialectMySQL {
		wait = "SET SESSION innodb_lock_wait_timeout = 1"
		defer func() {
			_, _ = conn.ExecContext(context.Background(), "SET SESSION innodb_lock_wait_timeout = DEFAULT")
		}()
	}
	if _, err := tx.ExecContext(ctx, wait); err != nil {
		return fmt.Errorf("features: %w", err)
	}
	_, err = tx.ExecContext(ctx, placeholders(w.env.dialect, "UPDATE "+w.env.prefix+"lease SET session_id = NULL WHERE name = ?"), lease)
	return err
}

// recordRetokened changes the lease's record by hand, as a promotion that
// lost writes or an operator would: it names another token.
func (w *world) recordRetokened(lease string) error {
	if w.env.db == nil {
		return errors.New("features: changing a lease's record by hand needs a SQL backend: tag the scenario @postgres @mysql")
	}
	ctx, cancel := w.serverCtx()
	defer cancel()
	q := placeholders(w.env.dialect, "UPDATE "+w.env.prefix+"lease SET token = token + 1 WHERE name = ?")
	_, err := w.env.db.ExecContext(ctx, q, w.name(lease))
	return err
}

// transactionsWrote checks the values the scenario's transactions in a
// term committed, in token order: "nothing", or quoted values.
func (w *world) transactionsWrote(list string) error {
	want := []string{}
	for _, m := range quoted.FindAllStringSubmatch(list, -1) {
		want = append(want, m[1])
	}
	ctx, cancel := w.serverCtx()
	defer cancel()
	q := placeholders(w.env.dialect, "SELECT val FROM "+w.env.prefix+"fence WHERE id LIKE ? ORDER BY token, val")
	rows, err := w.env.db.QueryContext(ctx, q, w.id+".tx.%")
	if err != nil {
		return err
	}
	defer rows.Close()
	got := []string{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return err
		}
		got = append(got, v)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		return fmt.Errorf("the transactions in a term wrote %q, want %q", got, want)
	}
	return nil
}
