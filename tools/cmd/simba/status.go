package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	simba "github.com/simba-go/simba/core"
)

const statusAbout = `
Opens a client on the backend, waits until its session is live (at most
--timeout), prints the client's snapshot and closes the client. The snapshot
shows the session (id, status, time left before its local deadline, renew
interval) and the elections and locks of the client; a fresh client has none,
so this checks that the backend is reachable and grants sessions, and with
which timing.

--format json prints one JSON object: {"backend", "session": {"id", "status",
"remainingMs", "renewIntervalMs", "leaseShortened"}, "leases": [{"name",
"kind", "state", "token", "remainingMs"}]}.

Exit codes:
  0    the session is live
  2    bad usage: unknown flag or format, bad backend URL
  69   the backend cannot be reached, or no session opened within --timeout
       (the snapshot is printed anyway)
`

// runStatus is "simba status".
func runStatus(ctx context.Context, a *app, args []string) int {
	const cmd = "status"
	var cf clientFlags
	f := newFlags(cmd, "status [flags]", statusAbout)
	cf.register(f.FlagSet)
	format := f.String("format", "table", "output `format`: table or json")
	timeout := f.Duration("timeout", 10*time.Second, "how long to wait for the session to open")
	if _, err := f.parseArgs(args, 0, ""); err != nil {
		return f.fail(a, err)
	}
	if *format != "table" && *format != "json" {
		return a.usageError(cmd, fmt.Errorf("--format %q: want table or json", *format))
	}
	if *timeout <= 0 {
		return a.usageError(cmd, fmt.Errorf("--timeout %v: must be positive", *timeout))
	}

	opened := make(chan struct{})
	var once sync.Once
	n, code := cf.connect(ctx, a, cmd, simba.WithEventListener(func(_ context.Context, e simba.Event) {
		if e.Kind == simba.EventSessionOpened {
			once.Do(func() { close(opened) })
		}
	}))
	if n == nil {
		return code
	}
	defer n.close(a, cmd)

	t := time.NewTimer(*timeout)
	defer t.Stop()
	code = exitOK
	select {
	case <-opened:
	case <-ctx.Done():
		return interruptedCode(ctx)
	case <-t.C:
		code = exitUnavailable
	}
	snap := n.client.Snapshot()
	var err error
	if *format == "json" {
		err = writeStatusJSON(a.stdout, n.where, snap)
	} else {
		err = writeStatusTable(a.stdout, n.where, snap)
	}
	if err != nil {
		a.report(cmd, "write: %v", err)
		return exitFailure
	}
	if code != exitOK {
		a.report(cmd, "no session opened on %s within %v", n.where, *timeout)
	}
	return code
}

// statusView is the JSON form of a snapshot: durations in milliseconds.
type statusView struct {
	Backend string      `json:"backend"`
	Session sessionView `json:"session"`
	Leases  []leaseView `json:"leases"`
}

type sessionView struct {
	ID              simba.SessionID `json:"id"`
	Status          simba.Status    `json:"status"`
	RemainingMs     int64           `json:"remainingMs"`
	RenewIntervalMs int64           `json:"renewIntervalMs"`
	LeaseShortened  bool            `json:"leaseShortened"`
}

type leaseView struct {
	Name        string           `json:"name"`
	Kind        string           `json:"kind"`
	State       simba.LeaseState `json:"state"`
	Token       uint64           `json:"token,omitempty"`
	RemainingMs int64            `json:"remainingMs"`
}

func writeStatusJSON(w io.Writer, where string, s simba.Snapshot) error {
	v := statusView{
		Backend: where,
		Session: sessionView{
			ID:              s.Session.ID,
			Status:          s.Session.Status,
			RemainingMs:     s.Session.Remaining.Milliseconds(),
			RenewIntervalMs: s.Session.Renew.Milliseconds(),
			LeaseShortened:  s.Session.Shortened,
		},
		Leases: []leaseView{},
	}
	for _, l := range s.Leases {
		v.Leases = append(v.Leases, leaseView{l.Name, l.Kind, l.State, l.Token, l.Remaining.Milliseconds()})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeStatusTable(w io.Writer, where string, s simba.Snapshot) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	id := string(s.Session.ID)
	if id == "" {
		id = "(none)"
	}
	fmt.Fprintf(tw, "backend:\t%s\n", where)
	fmt.Fprintf(tw, "session:\t%s\n", id)
	fmt.Fprintf(tw, "status:\t%s\n", s.Session.Status)
	fmt.Fprintf(tw, "remaining:\t%v\n", s.Session.Remaining.Round(time.Millisecond))
	if s.Session.Renew > 0 {
		shortened := ""
		if s.Session.Shortened {
			shortened = " (the backend granted less than the lease asked for)"
		}
		fmt.Fprintf(tw, "renew:\tevery %v%s\n", s.Session.Renew.Round(time.Millisecond), shortened)
	}
	if len(s.Leases) == 0 {
		fmt.Fprintf(tw, "leases:\tnone on this client\n")
		return tw.Flush()
	}
	fmt.Fprintf(tw, "\nNAME\tKIND\tSTATE\tTOKEN\tREMAINING\n")
	for _, l := range s.Leases {
		token := "-"
		if l.Token > 0 {
			token = fmt.Sprint(l.Token)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", l.Name, l.Kind, l.State, token, l.Remaining.Round(time.Millisecond))
	}
	return tw.Flush()
}
