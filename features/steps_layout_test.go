package features

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Steps that read what a backend stores (R-BE-1, R-BE-2, R-BE-3), with a
// connection of their own to the server.

// serverCtx bounds one look at the server.
func (w *world) serverCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(w.ctx, 10*time.Second)
}

func (w *world) sessionRecord(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	id, err := n.currentSession()
	if err != nil {
		return err
	}
	lease := n.cfg().LeaseDuration
	ctx, cancel := w.serverCtx()
	defer cancel()
	var left time.Duration
	switch {
	case w.env.db != nil:
		now := "now()"
		if w.env.dialect == dialectMySQL {
			now = "UTC_TIMESTAMP(6)"
		}
		var expires, created, dbNow time.Time
		q := placeholders(w.env.dialect, "SELECT expires_at, created_at, "+now+" FROM "+w.env.prefix+"session WHERE id = ?")
		if err := w.env.db.QueryRowContext(ctx, q, string(id)).Scan(&expires, &created, &dbNow); err != nil {
			return fmt.Errorf("the session row of %s: %w", id, err)
		}
		if created.After(dbNow) {
			return fmt.Errorf("the session row of %s was created %v in the database's future", id, created.Sub(dbNow))
		}
		left = expires.Sub(dbNow)
	case w.env.redis != nil:
		key := w.env.prefix + "session:" + string(id)
		opened, err := w.env.redis.HGet(ctx, key, "opened").Int64()
		if err != nil {
			return fmt.Errorf("the session hash %s: %w", key, err)
		}
		now, err := w.env.redis.Time(ctx).Result()
		if err != nil {
			return err
		}
		if opened > now.UnixMilli() {
			return fmt.Errorf("the session hash %s was opened %dms in the server's future", key, opened-now.UnixMilli())
		}
		if left, err = w.env.redis.PTTL(ctx, key).Result(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("features: no session record to read on %s: tag the scenario", w.env.name)
	}
	if left <= 0 || left > lease {
		return fmt.Errorf("session %s expires %v from the server's clock, want within (0, %v]", id, left, lease)
	}
	return nil
}

// leaseRecord reads the backend's record of lease: the session it names
// (empty for none), the token, and whether it expires.
type leaseRecord struct {
	exists  bool
	session string
	token   uint64
	expires bool
}

func (w *world) readLease(lease string) (leaseRecord, error) {
	ctx, cancel := w.serverCtx()
	defer cancel()
	l := w.name(lease)
	var r leaseRecord
	switch {
	case w.env.db != nil:
		var sid sql.NullString
		var token int64
		q := placeholders(w.env.dialect, "SELECT session_id, token FROM "+w.env.prefix+"lease WHERE name = ?")
		err := w.env.db.QueryRowContext(ctx, q, l).Scan(&sid, &token)
		if errors.Is(err, sql.ErrNoRows) {
			return r, nil
		}
		if err != nil {
			return r, err
		}
		return leaseRecord{exists: true, session: sid.String, token: uint64(token)}, nil
	case w.env.redis != nil:
		key := w.env.prefix + "lease:" + l
		vals, err := w.env.redis.HGetAll(ctx, key).Result()
		if err != nil || len(vals) == 0 {
			return r, err
		}
		token, err := strconv.ParseUint(vals["token"], 10, 64)
		if err != nil {
			return r, fmt.Errorf("the token of %s: %w", key, err)
		}
		ttl, err := w.env.redis.PTTL(ctx, key).Result()
		if err != nil {
			return r, err
		}
		return leaseRecord{exists: true, session: vals["session"], token: token, expires: ttl != -1}, nil
	case w.env.zk != nil:
		_, st, err := w.env.zk.Get(path.Join(w.env.prefix, "leases", l))
		if err != nil {
			return r, fmt.Errorf("the lease node of %s: %w", l, err)
		}
		// An ephemeral node belongs to its session until that ends.
		return leaseRecord{exists: true, session: fmt.Sprintf("%016x", st.EphemeralOwner), token: uint64(st.Czxid), expires: true}, nil
	}
	return r, fmt.Errorf("features: no lease record to read on %s: tag the scenario", w.env.name)
}

func (w *world) leaseRecord(lease, name, never string) error {
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	r, err := w.readLease(lease)
	if err != nil {
		return err
	}
	if !r.exists {
		return fmt.Errorf("the backend keeps no record of %s", lease)
	}
	if r.session != string(t.Session()) || r.token != t.Token() {
		return fmt.Errorf("the record of %s names session %q and token %d, want %q and %d", lease, r.session, r.token, t.Session(), t.Token())
	}
	if never != "" && r.expires {
		return fmt.Errorf("the record of %s expires", lease)
	}
	return nil
}

func (w *world) releasedRecord(lease, name string) error {
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	var r leaseRecord
	err = w.eventually(w.lease(w.timing), "the record still names a session", func() bool {
		var rerr error
		r, rerr = w.readLease(lease)
		return rerr == nil && r.exists && r.session == ""
	})
	if err != nil {
		return fmt.Errorf("%w: %+v", err, r)
	}
	if r.token != t.Token() || r.expires {
		return fmt.Errorf("the released record of %s has token %d (expires: %v), want %d and no expiry", lease, r.token, r.expires, t.Token())
	}
	return nil
}

func (w *world) tokens(a, lease, b string) (uint64, uint64, error) {
	_, ta, err := w.term(a, lease)
	if err != nil {
		return 0, 0, err
	}
	_, tb, err := w.term(b, lease)
	if err != nil {
		return 0, 0, err
	}
	return ta.Token(), tb.Token(), nil
}

// tokenAbove compares the tokens of two nodes' terms of lease: "above"
// or "one above".
func (w *world) tokenAbove(a, lease, how, b string) error {
	ta, tb, err := w.tokens(a, lease, b)
	if err != nil {
		return err
	}
	if how == "one above" && ta != tb+1 || ta <= tb {
		return fmt.Errorf("%s's token %d is not %s %s's %d", a, ta, how, b, tb)
	}
	return nil
}

// tokenFromServerClock checks that a node's token of lease is the Redis
// server's TIME in microseconds at its win (ADR 0020): not after the
// server's clock now, and not older than the scenario.
func (w *world) tokenFromServerClock(node, lease, winner string) error {
	if w.env.redis == nil {
		return fmt.Errorf("features: tokens follow the server's clock on Redis only: tag the scenario @redis")
	}
	if winner != node {
		return fmt.Errorf("features: the step names %s's token and %s's win: name one node", node, winner)
	}
	_, t, err := w.term(node, lease)
	if err != nil {
		return err
	}
	ctx, cancel := w.serverCtx()
	defer cancel()
	now, err := w.env.redis.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("features: TIME: %w", err)
	}
	tok, nowUS := int64(t.Token()), now.UnixMicro()
	if tok > nowUS || tok < nowUS-int64(time.Minute/time.Microsecond) {
		return fmt.Errorf("%s's token %d of %q is not the server's clock in µs at its win (now %d)", node, tok, lease, nowUS)
	}
	return nil
}

func (w *world) subscribeReleases() error {
	if w.env.redis == nil {
		return fmt.Errorf("features: the release channel is Redis's: tag the scenario @redis")
	}
	ctx, cancel := w.serverCtx()
	defer cancel()
	// The broadcast channel and every Backend's own channel (released:<id>).
	ps := w.env.redis.PSubscribe(ctx, w.env.prefix+"released*")
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		_ = ps.Close()
		return err
	}
	w.subscriber = ps
	return nil
}

func (w *world) heardRelease(lease string) error {
	ps, ok := w.subscriber.(*redis.PubSub)
	if !ok {
		return errors.New("features: no subscriber listens")
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.grace(w.lease(w.timing)))
	defer cancel()
	for {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			return fmt.Errorf("no release of %s heard: %w", lease, err)
		}
		// The release goes to the first Backend in the lease's queue of
		// waiters, on that Backend's own channel (ADR 0011).
		if msg.Payload == w.name(lease) {
			if !strings.HasPrefix(msg.Channel, w.env.prefix+"released:") {
				return fmt.Errorf("the release of %s was announced on %s, to every node, not to the one that waits", lease, msg.Channel)
			}
			return nil
		}
	}
}
