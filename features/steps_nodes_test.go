package features

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// identityIs reads the identity a node is connected with.
var identityIs = regexp.MustCompile(`^ with the identity "([^"]*)"$`)

// withConfig reads the config a node is connected with.
var withConfig = regexp.MustCompile(`^ with config "([^"]*)"$`)

// connectedAs connects node name as the rest of the step says: "node A is
// connected" and then nothing, or one of
//
//	and its session is live                 (waits until it is)
//	, its connection stalled                (before the client starts)
//	with the identity "ops-1"               (of its sessions)
//	with config "c"                         (a config the scenario named)
//	, with metrics                          (a collector fed by its events)
//	with a callback executor that rejects the next callback
//	, its event listener closing the client on the first Elected event
func (w *world) connectedAs(name, how string) error {
	var o connectOptions
	switch how {
	case "":
	case " and its session is live":
		n, err := w.connect(name, o)
		if err != nil {
			return err
		}
		return n.waitLive()
	case ", its connection stalled":
		o.stalled = true
	case ", with metrics":
		return w.connectedWithMetrics(name)
	case " with a callback executor that rejects the next callback":
		o.rejecting, o.noEvents = true, true
	case ", its event listener closing the client on the first Elected event":
		return w.connectedClosingOnElected(name)
	default:
		if m := withConfig.FindStringSubmatch(how); m != nil {
			cfg, err := w.config(m[1])
			if err != nil {
				return err
			}
			o.cfg = &cfg
			break
		}
		m := identityIs.FindStringSubmatch(how)
		if m == nil {
			return fmt.Errorf("features: cannot connect node %s%s: unknown way", name, how)
		}
		o.identity = m[1]
	}
	_, err := w.connect(name, o)
	return err
}

func (w *world) nodesConnected(list, last string) error {
	for _, name := range append(strings.Split(list, ", "), last) {
		if err := w.connectedAs(name, ""); err != nil {
			return err
		}
	}
	return nil
}

// waitLive waits until the node's session is open.
func (n *node) waitLive() error {
	d := n.cfg().LeaseDuration
	return n.w.eventually(d, "node "+n.name+"'s session is not LIVE", func() bool {
		return n.client.Snapshot().Session.Status == simba.StatusLive
	})
}

// connectedClosingOnElected connects a node whose event listener closes
// the client, with the ctx it was given, on the first Elected event.
func (w *world) connectedClosingOnElected(name string) error {
	done := make(chan struct{})
	_, err := w.connect(name, connectOptions{onEvent: func(ctx context.Context, n *node, e simba.Event) {
		if e.Kind != simba.EventElected {
			return
		}
		select {
		case <-done:
			return
		default:
			close(done)
		}
		start := time.Now()
		err := n.client.Close(ctx)
		n.events.mu.Lock()
		n.events.closeTook, n.events.closeErr, n.events.closed = time.Since(start), err, true
		n.events.mu.Unlock()
	}})
	return err
}

// closeAll closes the client of every node of a list ("A", "A and B").
func (w *world) closeAll(list string) error {
	for _, name := range nodeList(list) {
		n, err := w.node(name)
		if err != nil {
			return err
		}
		if err := n.closeClient(); err != nil {
			return err
		}
	}
	return nil
}

// reconnectEach closes each node's client and builds a new one, times
// times, waiting each time for the new session to open.
func (w *world) reconnectEach(list, last string, times int) error {
	for _, name := range append(strings.Split(list, ", "), last) {
		n, err := w.node(name)
		if err != nil {
			return err
		}
		if err := n.waitLive(); err != nil {
			return err
		}
		for range times {
			if err := n.closeClient(); err != nil {
				return err
			}
			if err := n.newClient(false); err != nil {
				return err
			}
			if err := n.waitLive(); err != nil {
				return err
			}
		}
	}
	return nil
}

// timePasses lets time pass.
func (w *world) timePasses(phrase string) error {
	d, err := w.dur(phrase, w.timing)
	if err != nil {
		return err
	}
	time.Sleep(d)
	return nil
}

func (w *world) connection(name, what string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	if what == "stalls" {
		n.marks["stall"] = time.Now()
		n.link.Stall()
	} else {
		n.link.Heal()
	}
	return nil
}

func (w *world) callsDelayed(name, phrase string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	n.rec.setDelay(d)
	return nil
}

func (w *world) failAfterKeepAlive(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	armed := make(chan time.Time, 1)
	n.rec.onNextKeepAlive(func() {
		armed <- time.Now()
		n.rec.inject("*", &fault{fail: errInjected})
	})
	t := time.NewTimer(w.grace(2 * n.cfg().RenewInterval))
	defer t.Stop()
	select {
	case <-armed:
	case <-t.C:
		return fmt.Errorf("node %s made no successful keep-alive", name)
	}
	return nil
}

// currentSession returns the id of the node's open session.
func (n *node) currentSession() (simba.SessionID, error) {
	id := n.client.Snapshot().Session.ID
	if id == "" {
		return "", fmt.Errorf("node %s has no open session", n.name)
	}
	return id, nil
}

func (w *world) expireSession(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	if err := n.waitLive(); err != nil {
		return err
	}
	id, err := n.currentSession()
	if err != nil {
		return err
	}
	if err := w.expire(id); err != nil {
		return fmt.Errorf("expire session %s of node %s: %w", id, name, err)
	}
	return nil
}

// expire ends session id on the backend now, as its expiry would.
func (w *world) expire(id simba.SessionID) error {
	if w.mem != nil {
		if !w.mem.ExpireSession(id) {
			return errNoSession
		}
		return nil
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	return w.env.expireSession(ctx, id)
}

// takeOver hands lease to a session of the backend's that no node owns,
// with a new term, without telling its owner: on the memory backend with
// its control, elsewhere by freeing the lease on the server and winning it
// with a session opened directly.
func (w *world) takeOver(lease string) error {
	w.takenAt[lease] = time.Now()
	name := w.name(lease)
	if w.mem != nil {
		if w.mem.TakeOver(name) == 0 {
			return fmt.Errorf("the backend refused to take %s over", lease)
		}
		id, _, _ := w.mem.Owner(name)
		w.takers[lease] = id
		return nil
	}
	r, err := w.openRaw("the session that took "+lease+" over", time.Minute)
	if err != nil {
		return err
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	if err := w.env.freeLease(ctx, name); err != nil {
		return fmt.Errorf("free %s on the server: %w", lease, err)
	}
	res, err := r.nb.backend.Acquire(ctx, r.id, name)
	if err != nil {
		return fmt.Errorf("a session opened directly tried to win %s once freed: %w", lease, err)
	}
	if !res.Won {
		return fmt.Errorf("a session opened directly did not win %s once freed", lease)
	}
	w.takers[lease] = r.id
	return nil
}

// phantomExpires ends the session that took lease over, if one did; when
// nothing took the lease over there is nothing to end.
func (w *world) phantomExpires(lease string) error {
	id, ok := w.takers[lease]
	if !ok {
		return nil
	}
	if err := w.expire(id); err != nil && !errors.Is(err, errNoSession) {
		return err
	}
	return nil
}

// maxLease makes the backend grant leases of at most the given duration to
// every node, connected or not.
func (w *world) maxLease(phrase string) error {
	d, err := time.ParseDuration(phrase)
	if err != nil {
		return err
	}
	w.leaseCap = d
	for _, n := range w.nodes {
		n.rec.capLease(d)
	}
	return nil
}

func (w *world) holdReply(name, op, how string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	f := &fault{times: 1}
	if how == "until released" {
		f.gate = make(chan struct{})
	} else if f.hold, err = n.dur(strings.TrimPrefix(how, "for ")); err != nil {
		return err
	}
	opName := map[string]string{"keep-alive": memory.OpKeepAlive, "acquire": memory.OpAcquire, "release": memory.OpRelease}[op]
	n.rec.inject(opName, f)
	n.holds[op] = &heldReply{op: opName, at: time.Now(), gate: f.gate}
	return nil
}

// heldReply is a reply of a node that a step held back.
type heldReply struct {
	op   string        // the operation, as the recorder names it
	at   time.Time     // when the step held it back
	gate chan struct{} // closed to let it through; nil when held for a time
}

// heldCall returns the call of node n whose answer a fault of op held
// back: the first call of op that started after the fault was set.
func (n *node) heldCall(op string) (*call, error) {
	h := n.holds[op]
	if h == nil {
		return nil, fmt.Errorf("features: no %s reply of node %s was held back", op, n.name)
	}
	for _, c := range n.rec.filter(h.op, "") {
		if !c.start.Before(h.at) {
			return &c, nil
		}
	}
	return nil, fmt.Errorf("node %s made no %s call after the reply was held back", n.name, op)
}

func (w *world) heldArrives(name, op string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	if h := n.holds[op]; h != nil && h.gate != nil {
		openGate(h.gate)
	}
	return w.eventually(2*n.cfg().LeaseDuration, "the held "+op+" reply did not arrive", func() bool {
		got, err := n.heldCall(op)
		return err == nil && !got.end.IsZero()
	})
}

func (w *world) forgeToken(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	t, err := n.term(w.name(lease))
	if err != nil {
		return err
	}
	n.rec.inject(memory.OpAcquire, &fault{times: 1, forge: t.Token(), onlyOn: w.name(lease)})
	return nil
}
