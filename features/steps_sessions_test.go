package features

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// keepAlivesOver lets the time of phrase pass and counts the keep-alives
// each node of list sent meanwhile.
func (w *world) keepAlivesOver(list string, want int, phrase string) error {
	d, err := w.dur(phrase, w.timing)
	if err != nil {
		return err
	}
	from := time.Now()
	time.Sleep(d)
	to := time.Now()
	var counts []int
	for _, name := range nodeList(list) {
		n, err := w.node(name)
		if err != nil {
			return err
		}
		got := 0
		for _, c := range n.rec.filter(memory.OpKeepAlive, "") {
			if !c.start.Before(from) && c.start.Before(to) {
				got++
			}
		}
		if got < want-1 || got > want+1 {
			var ts []time.Duration
			for _, c := range n.rec.filter(memory.OpKeepAlive, "") {
				ts = append(ts, c.start.Sub(from))
			}
			return fmt.Errorf("node %s sent %d keep-alives in %v, want %d give or take one (sent at %v from the start)", name, got, to.Sub(from), want, ts)
		}
		counts = append(counts, got)
	}
	if d := slices.Max(counts) - slices.Min(counts); d > 1 {
		return fmt.Errorf("%s sent %v keep-alives, more than one apart", list, counts)
	}
	return nil
}

func (w *world) oneSession(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	ids := n.sessionIDs()
	if len(ids) != 1 {
		return fmt.Errorf("node %s opened %d sessions", name, len(ids))
	}
	ts := n.allTerms()
	if len(ts) == 0 {
		return fmt.Errorf("node %s holds no term", name)
	}
	for _, t := range ts {
		if t.Session() != ids[0] {
			return fmt.Errorf("%v belongs to session %s, not %s", t, t.Session(), ids[0])
		}
	}
	return nil
}

func (w *world) distinctSessions(count int) error {
	seen := make(map[simba.SessionID]bool)
	total := 0
	for _, n := range w.nodes {
		for _, id := range n.sessionIDs() {
			total++
			seen[id] = true
		}
	}
	if total != count || len(seen) != count {
		return fmt.Errorf("%d sessions were opened, %d distinct ids; want %d", total, len(seen), count)
	}
	return nil
}

func (w *world) idForm() error {
	for _, n := range w.nodes {
		for _, id := range n.sessionIDs() {
			if !w.env.idForm.MatchString(string(id)) {
				return fmt.Errorf("session id %q does not match %s on %s", id, w.env.idForm, w.env.name)
			}
		}
	}
	return nil
}

func (w *world) sessionStatus(phrase, name, status, detail string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	check := func() error {
		s := n.client.Snapshot().Session
		switch {
		case s.Status.String() != status:
			return fmt.Errorf("node %s's session is %s, want %s", name, s.Status, status)
		case detail == ", without an id" && s.ID != "":
			return fmt.Errorf("node %s's session has id %s", name, s.ID)
		case detail == ", with an id and time remaining" && (s.ID == "" || s.Remaining <= 0):
			return fmt.Errorf("node %s's session has id %q and %v remaining", name, s.ID, s.Remaining)
		}
		return nil
	}
	if phrase == "" {
		return check()
	}
	d, err := n.dur(phrase)
	if err != nil {
		return err
	}
	var last error
	if err := w.eventually(d, "the session status", func() bool { last = check(); return last == nil }); err != nil {
		return fmt.Errorf("%w: %w", err, last)
	}
	return nil
}

// rawSession is a session opened directly on the backend, over its own
// connection, without a client.
type rawSession struct {
	nb     nodeBackend
	id     simba.SessionID
	lease  time.Duration
	tokens map[string][]uint64 // tokens won, by lease
}

func (r *rawSession) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.nb.backend.CloseSession(ctx, r.id)
	r.nb.close()
}

// callCtx bounds one direct backend call.
func (w *world) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), w.grace(w.lease(w.timing)))
}

// openRaw opens a session directly on the backend, called name in the
// scenario.
func (w *world) openRaw(name string, lease time.Duration) (*rawSession, error) {
	if _, ok := w.sessions[name]; ok {
		return nil, fmt.Errorf("features: session %s is already open", name)
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	nb, err := w.env.connect(ctx, w)
	if err != nil {
		return nil, err
	}
	g, err := nb.backend.OpenSession(ctx, lease)
	if err != nil {
		nb.close()
		return nil, fmt.Errorf("open a session directly: %w", err)
	}
	r := &rawSession{nb: nb, id: g.ID, lease: lease, tokens: make(map[string][]uint64)}
	w.sessions[name] = r
	return r, nil
}

// raw returns the session opened directly on the backend called name.
func (w *world) raw(name string) (*rawSession, error) {
	r, ok := w.sessions[name]
	if !ok {
		return nil, fmt.Errorf("features: no session %s was opened directly on the backend", name)
	}
	return r, nil
}

func (w *world) rawOpened(name, phrase string) error {
	lease := w.lease(w.timing)
	if phrase != "" {
		var err error
		if lease, err = time.ParseDuration(phrase); err != nil {
			return err
		}
	}
	_, err := w.openRaw(name, lease)
	return err
}

func (w *world) rawKeepAliveFails(name, errName string) error {
	r, err := w.raw(name)
	if err != nil {
		return err
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	_, err = r.nb.backend.KeepAlive(ctx, r.id, simba.KeepAliveRequest{Lease: r.lease})
	return matches(err, errName)
}

func (w *world) rawAcquireFails(name, lease, errName string) error {
	r, err := w.raw(name)
	if err != nil {
		return err
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	res, err := r.nb.backend.Acquire(ctx, r.id, w.name(lease))
	if res.Won {
		return fmt.Errorf("session %s won %s", name, lease)
	}
	return matches(err, errName)
}

// rawWins makes session name win each lease of list, which must be free.
func (w *world) rawWins(name, list string) error {
	r, err := w.raw(name)
	if err != nil {
		return err
	}
	names := quoted.FindAllStringSubmatch(list, -1)
	if len(names) == 0 {
		return fmt.Errorf("features: no quoted lease names in %q", list)
	}
	for _, m := range names {
		ctx, cancel := w.callCtx()
		l := w.name(m[1])
		res, err := r.nb.backend.Acquire(ctx, r.id, l)
		cancel()
		if err != nil {
			return err
		}
		if !res.Won {
			return fmt.Errorf("session %s did not win %s", name, m[1])
		}
		r.tokens[l] = append(r.tokens[l], res.Token)
	}
	return nil
}

// rawReleases sends the release of session name's term i of lease (the
// first is 1), even when it was released already.
func (w *world) rawReleases(name string, i int, lease string) error {
	r, err := w.raw(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	if i < 1 || i > len(r.tokens[l]) {
		return fmt.Errorf("features: session %s won %s %d times, it has no term %d", name, lease, len(r.tokens[l]), i)
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	return r.nb.backend.Release(ctx, r.id, l, r.tokens[l][i-1])
}

func (w *world) rawCannotWin(name, lease string) error {
	r, err := w.raw(name)
	if err != nil {
		return err
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	res, err := r.nb.backend.Acquire(ctx, r.id, w.name(lease))
	if err != nil {
		return err
	}
	if res.Won {
		return fmt.Errorf("session %s won %s with token %d", name, lease, res.Token)
	}
	return nil
}

func (w *world) firstSessionRefused(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	ids := n.sessionIDs()
	if len(ids) == 0 {
		return fmt.Errorf("node %s opened no session", name)
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	_, kerr := n.rec.inner.KeepAlive(ctx, ids[0], simba.KeepAliveRequest{Lease: n.cfg().LeaseDuration})
	if err := matches(kerr, "ErrSessionExpired"); err != nil {
		return fmt.Errorf("keep-alive: %w", err)
	}
	res, aerr := n.rec.inner.Acquire(ctx, ids[0], w.name("refused"))
	if res.Won {
		return fmt.Errorf("the first session won a lease")
	}
	if err := matches(aerr, "ErrSessionExpired"); err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	return nil
}

// The local deadline.

// lastSuccessfulKeepAlive returns the node's last keep-alive that the
// backend answered without error.
func (n *node) lastSuccessfulKeepAlive() (call, error) {
	kas := n.rec.filter(memory.OpKeepAlive, "")
	for i := len(kas) - 1; i >= 0; i-- {
		if kas[i].err == nil && !kas[i].answered.IsZero() {
			return kas[i], nil
		}
	}
	return call{}, fmt.Errorf("node %s made no successful keep-alive", n.name)
}

// nextKeepAlive waits for the node's next keep-alive to get its reply, and
// checks the local deadline it sets: validity after it was sent, left after
// its reply arrived.
func (w *world) nextKeepAlive(name, validity, left string) error {
	n, fromSent, err := w.nodeDur(name, validity)
	if err != nil {
		return err
	}
	fromReply, err := n.dur(left)
	if err != nil {
		return err
	}
	from := time.Now()
	var ka call
	err = w.eventually(2*n.cfg().RenewInterval, "no keep-alive got its reply", func() bool {
		for _, c := range n.rec.filter(memory.OpKeepAlive, "") {
			if !c.start.Before(from) && !c.end.IsZero() && c.err == nil {
				ka = c
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	return settled(n, func() error {
		deadline := n.localDeadline()
		if err := w.near("the deadline", deadline.Sub(ka.start), fromSent); err != nil {
			return err
		}
		return w.near("the deadline, from the reply,", deadline.Sub(ka.end), fromReply)
	})
}

// localDeadline returns the node's session deadline as read now.
func (n *node) localDeadline() time.Time {
	return time.Now().Add(n.client.Snapshot().Session.Remaining)
}

// settled runs check until it passes, for up to half a renew interval:
// the recorder sees a keep-alive's reply just before the engine applies
// it, and the next keep-alive comes a whole interval later, so a reading
// of an earlier or a later keep-alive never passes.
func settled(n *node, check func() error) error {
	until := time.Now().Add(n.cfg().RenewInterval / 2)
	for {
		err := check()
		if err == nil || time.Now().After(until) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *world) callsOfEveryKind(nodes, list string) error {
	seen := make(map[string]bool)
	for _, name := range nodeList(nodes) {
		n, err := w.node(name)
		if err != nil {
			return err
		}
		for _, c := range n.rec.snapshot() {
			seen[c.op] = true
		}
	}
	for _, op := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		if op == "and" {
			continue
		}
		if !seen[op] {
			return fmt.Errorf("no %s call was made", op)
		}
	}
	return nil
}

// checkBudgets checks that every call of n started after from (release
// watches excepted: they are subscriptions, not calls) had a context
// deadline, at most limit away, and that there was such a call.
func (w *world) checkBudgets(n *node, from time.Time, limit time.Duration) error {
	checked := 0
	for _, c := range n.rec.snapshot() {
		if c.op == memory.OpWatchRelease || c.start.Before(from) {
			continue
		}
		if c.budget <= 0 || c.budget > limit+time.Millisecond {
			return fmt.Errorf("node %s: a %s call had a deadline %v away, want at most %v", n.name, c.op, c.budget, limit)
		}
		checked++
	}
	if checked == 0 {
		return fmt.Errorf("node %s made no call to check", n.name)
	}
	return nil
}

func (w *world) callsBounded(a, b string) error {
	for _, name := range []string{a, b} {
		n, err := w.node(name)
		if err != nil {
			return err
		}
		if err := w.checkBudgets(n, time.Time{}, n.cfg().RenewInterval); err != nil {
			return err
		}
	}
	return nil
}

func (w *world) keepAliveGivesUp(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	from := n.marks["stall"]
	var failed call
	err = w.eventually(3*n.cfg().RenewInterval, "no keep-alive failed", func() bool {
		for _, c := range n.rec.filter(memory.OpKeepAlive, "") {
			if !c.start.Before(from) && !c.end.IsZero() {
				failed = c
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	if failed.err == nil {
		return fmt.Errorf("the keep-alive after the stall succeeded")
	}
	return w.near("the keep-alive's failure", failed.end.Sub(failed.start), n.cfg().RenewInterval)
}

func (w *world) callsBoundedBy(name, phrase string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	limit, err := time.ParseDuration(phrase)
	if err != nil {
		return err
	}
	opens := n.rec.filter(memory.OpOpenSession, "")
	if len(opens) == 0 {
		return fmt.Errorf("node %s opened no session", name)
	}
	return w.checkBudgets(n, opens[0].end.Add(time.Nanosecond), limit)
}

func (w *world) deadlinePasses(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	s := n.client.Snapshot().Session
	if s.ID == "" {
		return fmt.Errorf("node %s has no session", name)
	}
	time.Sleep(s.Remaining + w.poll())
	n.marks["deadline"] = time.Now()
	return nil
}

// backendStillHolds checks that the held keep-alive renewed the node's
// session on the backend: the backend answered it without error, and still
// names that session as the holder of every lease the node has a term of.
func (w *world) backendStillHolds(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	held, err := n.heldCall("keep-alive")
	if err != nil {
		return err
	}
	if held.answered.IsZero() || held.err != nil {
		return fmt.Errorf("the held keep-alive has not been answered by the backend")
	}
	id := n.client.Snapshot().Session.ID
	if id == "" || id != held.session {
		return fmt.Errorf("node %s's session is %q, the held keep-alive was for %s", name, id, held.session)
	}
	hr, ok := n.rec.inner.(simba.HolderReader)
	if !ok {
		return fmt.Errorf("features: the %s backend cannot tell who holds a lease", w.env.name)
	}
	leases := 0
	for lease := range n.listeners {
		ctx, cancel := w.callCtx()
		h, held, err := hr.Holder(ctx, lease)
		cancel()
		if err != nil {
			return err
		}
		if !held || h.Session != id {
			return fmt.Errorf("the backend no longer names session %s as the holder of %s (holder %q)", id, lease, h.Session)
		}
		leases++
	}
	if leases == 0 {
		return fmt.Errorf("node %s holds no lease to ask the backend about", name)
	}
	return nil
}

func (w *world) retryTimes(name string, t *godog.Table) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	var want []time.Duration
	for _, row := range t.Rows {
		for _, cell := range row.Cells {
			d, err := time.ParseDuration(cell.Value)
			if err != nil {
				return err
			}
			want = append(want, d)
		}
	}
	last, err := n.lastSuccessfulKeepAlive()
	if err != nil {
		return err
	}
	base := last.start
	// Let the session end first: every retry falls before its deadline.
	time.Sleep(time.Until(base.Add(n.cfg().LeaseDuration + n.cfg().RenewInterval)))
	var got []time.Duration
	for _, c := range n.rec.filter(memory.OpKeepAlive, "") {
		if c.start.After(base) && c.session == last.session {
			got = append(got, c.start.Sub(base))
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("keep-alives were sent at %v after the last success, want %v", got, want)
	}
	for i := range want {
		if err := w.near(fmt.Sprintf("keep-alive %d", i+1), got[i], want[i]); err != nil {
			return fmt.Errorf("%w (all: %v)", err, got)
		}
	}
	return nil
}

func (w *world) snapshotRenew(name, kind, phrase string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(phrase)
	if err != nil {
		return err
	}
	s := n.client.Snapshot().Session
	if s.Shortened != (kind == "a shortened") {
		return fmt.Errorf("the snapshot says shortened: %v", s.Shortened)
	}
	return w.near("the renew period", s.Renew, d)
}

func (w *world) keepAlivesApart(name, phrase string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(phrase)
	if err != nil {
		return err
	}
	kas := n.rec.filter(memory.OpKeepAlive, "")
	if len(kas) < 5 {
		return fmt.Errorf("node %s sent only %d keep-alives", name, len(kas))
	}
	for i := 1; i < len(kas); i++ {
		if err := w.near(fmt.Sprintf("keep-alive %d, after the one before,", i+1), kas[i].start.Sub(kas[i-1].start), d); err != nil {
			return err
		}
	}
	return nil
}

// shortenedEvents checks the SessionLeaseShortened events of a node: none,
// one for a grant of the given length, or two, one per session.
func (w *world) shortenedEvents(name, count, grant string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	es := n.events.of(simba.EventSessionLeaseShortened)
	switch count {
	case "no":
		if len(es) != 0 {
			return fmt.Errorf("SessionLeaseShortened events: %v", es)
		}
	case "one":
		d, err := time.ParseDuration(grant)
		if err != nil {
			return err
		}
		if len(es) != 1 || es[0].Granted != d {
			return fmt.Errorf("SessionLeaseShortened events: %v; want one granting %v", es, d)
		}
	case "two":
		if len(es) != 2 || es[0].Session == es[1].Session {
			return fmt.Errorf("SessionLeaseShortened events: %v; want one for each of two sessions", es)
		}
	}
	return nil
}

func (w *world) oneWarning(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	if got := n.logs.warnings("shorter lease"); got != 1 {
		return fmt.Errorf("node %s logged %d warnings about a shorter lease, want 1", name, got)
	}
	return nil
}

// Snapshots and events.

func (w *world) snapshotSessionID(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	id := n.client.Snapshot().Session.ID
	ts := n.allTerms()
	if len(ts) == 0 {
		return fmt.Errorf("node %s holds no term", name)
	}
	for _, t := range ts {
		if t.Session() != id {
			return fmt.Errorf("%v belongs to %s, the snapshot shows %s", t, t.Session(), id)
		}
	}
	return nil
}

func (w *world) snapshotLists(name string, t *godog.Table) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	if len(t.Rows) < 2 {
		return fmt.Errorf("features: the table needs a header and rows")
	}
	got := n.client.Snapshot().Leases
	rows := t.Rows[1:]
	if len(got) != len(rows) {
		return fmt.Errorf("the snapshot lists %d leases, want %d: %+v", len(got), len(rows), got)
	}
	for i, row := range rows {
		lease := w.name(row.Cells[0].Value)
		g := got[i]
		if g.Name != lease || g.Kind != row.Cells[1].Value || string(g.State) != row.Cells[2].Value {
			return fmt.Errorf("snapshot entry %d is %s %s %s, want %s %s %s", i+1, g.Name, g.Kind, g.State, lease, row.Cells[1].Value, row.Cells[2].Value)
		}
		var want uint64
		if row.Cells[3].Value != "none" {
			_, t, err := w.term(name, row.Cells[0].Value)
			if err != nil {
				return err
			}
			want = t.Token()
		}
		if g.Token != want {
			return fmt.Errorf("snapshot entry %s shows token %d, want %d", row.Cells[0].Value, g.Token, want)
		}
	}
	return nil
}

func (w *world) leaderRemaining(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	s := n.client.Snapshot()
	leaders := 0
	for _, ls := range s.Leases {
		if ls.State != simba.StateHolding {
			continue
		}
		leaders++
		if ls.Remaining <= 0 || ls.Remaining > s.Session.Remaining {
			return fmt.Errorf("%s has %v remaining; the session %v", ls.Name, ls.Remaining, s.Session.Remaining)
		}
	}
	if leaders == 0 {
		return fmt.Errorf("the snapshot has no HOLDING entry")
	}
	return nil
}

func (w *world) eventsInOrder(name string, t *godog.Table) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	got := n.events.of(0)
	i := 0
	for r, row := range t.Rows {
		kind, detail := row.Cells[0].Value, strings.Fields(row.Cells[1].Value)
		found := false
		for ; i < len(got); i++ {
			e := got[i]
			if e.Kind.String() != kind {
				continue
			}
			if len(detail) > 0 && e.Name != w.name(detail[0]) {
				continue
			}
			if len(detail) > 1 && e.Reason.String() != detail[1] {
				continue
			}
			found = true
			i++
			break
		}
		if !found {
			var kinds []string
			for _, e := range got {
				kinds = append(kinds, e.Kind.String())
			}
			return fmt.Errorf("row %d (%s %v) not found in order; events: %v", r+1, kind, detail, kinds)
		}
	}
	return nil
}
