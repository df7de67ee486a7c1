package sqlcore

import (
	"database/sql"
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

// Micros returns d in whole microseconds, the unit of every lease sent to
// the database.
func Micros(d time.Duration) int64 { return d.Microseconds() }
