package sqlcore

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	simba "github.com/simba-go/simba/core"
)

// RowSource is what pgx.Rows and *sql.Rows have in common.
type RowSource interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// SQLRows adapts *sql.Rows, whose Close returns an error, to RowSource.
type SQLRows struct{ *sql.Rows }

// Close closes the rows.
func (r SQLRows) Close() { _ = r.Rows.Close() }

// ReadKeepAlive turns the (kind, name, value) rows of a keep-alive query
// into a reply: kind 0 is the session's remaining time in microseconds
// (absent when the session is not live), 1 a lease name the keep-alive
// looked up and the session's token of it (0: the session does not own
// it), one row per name asked, 2 a group and its live member count. It
// returns in tokens the names the session owns. A live reply with fewer
// kind-1 rows than asked is an error, never a shorter answer: a client
// whose context ended mid-read may see the rows end early without an
// error, and a name missing from the reply would be reported lost. It
// closes rows.
func ReadKeepAlive(rows RowSource, asked int) (reply simba.KeepAliveReply, tokens map[string]uint64, live bool, err error) {
	defer rows.Close()
	reply.Groups = map[string]int{}
	tokens = map[string]uint64{}
	looked := 0
	for rows.Next() {
		var kind int32
		var name sql.NullString
		var val int64
		if err := rows.Scan(&kind, &name, &val); err != nil {
			return simba.KeepAliveReply{}, nil, false, err
		}
		switch {
		case kind == 0:
			reply.Remaining = max(time.Duration(val)*time.Microsecond, 0)
			live = true
		case kind == 1 && name.Valid:
			looked++
			if val > 0 {
				tokens[name.String] = uint64(val)
			}
		case kind == 2 && name.Valid:
			reply.Groups[name.String] = int(val)
		}
	}
	if err := rows.Err(); err != nil {
		return simba.KeepAliveReply{}, nil, false, err
	}
	if live && looked != asked {
		return simba.KeepAliveReply{}, nil, false, fmt.Errorf("keep-alive reply incomplete: %d of %d leases read", looked, asked)
	}
	return reply, tokens, live, nil
}

// ScanHolder reads the row of a holder's statement (Dialect.Holder):
// session, identity, token and start of the term in microseconds since
// the epoch, through scan. noRows is the driver's error of a statement
// that found no row: nobody holds the lease.
func ScanHolder(scan func(dest ...any) error, noRows error) (simba.Holder, bool, error) {
	var id, identity string
	var token, since int64
	switch err := scan(&id, &identity, &token, &since); {
	case errors.Is(err, noRows):
		return simba.Holder{}, false, nil
	case err != nil:
		return simba.Holder{}, false, err
	}
	return simba.Holder{Session: simba.SessionID(id), Identity: identity, Token: uint64(token), Since: time.UnixMicro(since).UTC()}, true, nil
}

// ReadHolders reads the rows of a listing's page (Dialect.ListHolders):
// (name, session, identity, token, start of the term in microseconds
// since the epoch) for each lease held, and a row whose session is NULL
// with the last name the page read and how many rows it read. It closes
// rows.
func ReadHolders(rows RowSource) (held []simba.HeldLease, last string, scanned int, err error) {
	defer rows.Close()
	for rows.Next() {
		var name, id, identity sql.NullString
		var token int64
		var since sql.NullInt64
		if err := rows.Scan(&name, &id, &identity, &token, &since); err != nil {
			return nil, "", 0, err
		}
		if !id.Valid { // what the page read
			scanned, last = int(token), name.String
			continue
		}
		held = append(held, simba.HeldLease{Name: name.String, Holder: simba.Holder{
			Session: simba.SessionID(id.String), Identity: identity.String, Token: uint64(token), Since: time.UnixMicro(since.Int64).UTC(),
		}})
	}
	if err := rows.Err(); err != nil {
		return nil, "", 0, err
	}
	return held, last, scanned, nil
}

// Micros returns d in whole microseconds, the unit of every lease sent to
// the database.
func Micros(d time.Duration) int64 { return d.Microseconds() }
