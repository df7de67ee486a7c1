package sqlcore

import (
	"database/sql"
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
// (absent when the session is not live), 1 a lease and its token, 2 a group
// and its live member count, 3 the session's lease generation. It closes
// rows.
func ReadKeepAlive(rows RowSource) (reply simba.KeepAliveReply, gen int64, live bool, err error) {
	defer rows.Close()
	reply = simba.KeepAliveReply{Leases: map[string]uint64{}, Groups: map[string]int{}}
	for rows.Next() {
		var kind int32
		var name sql.NullString
		var val int64
		if err := rows.Scan(&kind, &name, &val); err != nil {
			return simba.KeepAliveReply{}, 0, false, err
		}
		switch {
		case kind == 0:
			reply.Remaining = max(time.Duration(val)*time.Microsecond, 0)
			live = true
		case kind == 1 && name.Valid && val > 0:
			reply.Leases[name.String] = uint64(val)
		case kind == 2 && name.Valid:
			reply.Groups[name.String] = int(val)
		case kind == 3:
			gen = val
		}
	}
	if err := rows.Err(); err != nil {
		return simba.KeepAliveReply{}, 0, false, err
	}
	return reply, gen, live, nil
}

// Micros returns d in whole microseconds, the unit of every lease sent to
// the database.
func Micros(d time.Duration) int64 { return d.Microseconds() }
