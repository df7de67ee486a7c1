package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	simba "github.com/simba-go/simba/core"
)

const statusAbout = `
Opens a client on the backend, waits until its session is live (at most
--timeout), prints the client's snapshot and closes the client. The snapshot
shows the session (id, identity, status, time left before its local deadline,
renew interval) and the elections and locks of the client; a fresh client has
none, so this checks that the backend is reachable and grants sessions, and
with which timing.

--holder NAME asks the backend who holds the lease NAME now, whichever node
it is: the identity of that node's session (the --identity of the simba that
holds it, HOST:PID by default), the session, the fencing token of its term
and when the term began, by the backend's clock. A lease nobody holds shows
as free. Repeat --holder, or give NAME,NAME,...; the names are checked before
the backend is contacted. The holders are read within --timeout.

--list lists the leases held now, by any node, whose names start with
--prefix (every lease without it), one page of at most --limit leases (100;
1 to 1000): the identity and session of each holder, the fencing token of
its term and its age, since the term began by the backend's clock. Pages
are in name order (on Redis each page is, but the pages follow the order of
the server's SCAN). When more follow, the last line is "next page: --after
CURSOR": the same command with that --after prints the next page. A page
reads a bounded part of the store, so it may hold fewer than --limit
leases, or none, and still have a next one; and a walk of every page is not
one snapshot: a lease taken or freed meanwhile may or may not show. The
page is read within --timeout.

With --holder or --list the question is about other nodes: the output
leaves out this command's own session, opened only to ask, and does not
wait for it.

--format json prints the snapshot document of docs/snapshot.schema.json
(version simba.snapshot/v1, the shape the metrics handler and the C and
Python snapshots have too): {"schema", "time", "session": {"id",
"identity", "status", "remainingMs", "renewIntervalMs", "leaseDurationMs",
"leaseShortened"}, "leases": [{"name", "kind", "state", "token",
"remainingMs", "waiters"}], "backend"}. Durations are whole milliseconds;
states are HOLDING, CONTENDING, COOLDOWN or IDLE; times are RFC 3339, UTC.

With --holder or --list, --format json prints instead the document of
docs/holders.schema.json (version simba.holders/v1), without the command's
own session: {"schema", "time", "backend", "holders": [{"name", "free",
"holder": {"session", "identity", "token", "since"}}], "held": [{"name",
"holder": {...}, "ageMs"}], "next"}. "holders" is there with --holder
only; "holder" is null for a free lease, and for one whose holder could
not be read, which has an "error" instead. "identity" and "since" of a
holder (and "ageMs") are left out when the backend does not record them.
"held" and "next" are there with --list only: "next" is the cursor of the
next page, "" on the last one; "held" is left out, and "listError" says
why, when the page could not be read.

Exit codes:
  0    the session is live; with --holder or --list: every holder asked
       for, and the page, was read
  1    simba itself failed
  2    bad usage: unknown flag or format, invalid lease name or identity, bad
       backend URL, --lease above the backend's maximum (24h on PostgreSQL
       and MySQL), an empty --table-prefix, --table-prefix on a backend
       without tables; or --holder on a backend that cannot tell who holds
       a lease (nothing is printed then); a bad --prefix, --limit or
       --after, or one without --list, or --list on a backend that cannot
       list leases or an --after it refuses (nothing is printed then either)
  69   the backend cannot be reached, no session opened within --timeout, or
       a holder or the page could not be read within --timeout (the rest is
       printed anyway)
  78   the backend is not set up: PostgreSQL or MySQL tables of --table-prefix
       missing or outdated (create them with --migrate, or apply the schema
       script), the URL's database missing, or the tables refused to its user
  129  stopped by SIGHUP before it printed anything
  130  stopped by SIGINT (Ctrl-C) before it printed anything
  131  stopped by SIGQUIT before it printed anything
  143  stopped by SIGTERM before it printed anything
`

// statusWaited, when set by a test, is called once status has waited for
// the session, before it takes the snapshot.
var statusWaited func(*simba.Client)

// runStatus is "simba status".
func runStatus(ctx context.Context, a *app, args []string) int {
	const cmd = "status"
	var cf clientFlags
	var names leaseNames
	var lf listFlags
	f := newFlags(cmd, "status [flags] [--holder NAME]... [--list [--prefix PREFIX] [--limit N] [--after CURSOR]]", statusAbout)
	cf.register(f.FlagSet)
	lf.register(f.FlagSet)
	format := f.String("format", "table", "output `format`: table or json")
	timeout := f.Duration("timeout", 10*time.Second, "how long to wait for the session to open and the holders and the page to be read")
	f.Var(&names, "holder", "also show who holds the lease `NAME` now, on any node; repeatable, or NAME,NAME,...")
	if _, err := f.parseArgs(args, 0, ""); err != nil {
		return f.fail(a, err)
	}
	if err := lf.check(); err != nil {
		return a.usageError(cmd, err)
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
	// A fresh store of this process: no lease of another simba shows.
	n.warnInProcessThat(a, cmd, "the leases another process holds do not show here")

	t := time.NewTimer(*timeout)
	defer t.Stop()
	// The holders are read while the session opens: reading needs none.
	hctx, cancel := context.WithTimeout(ctx, *timeout)
	holders := readHolders(hctx, n.client, names)
	listed := lf.read(hctx, n.client)
	cancel()
	for _, h := range holders {
		if errors.Is(h.err, simba.ErrNotSupported) {
			a.report(cmd, "--holder: the backend %s cannot tell who holds a lease (%v)", n.where, simba.ErrNotSupported)
			return exitUsage
		}
	}
	if ctx.Err() != nil {
		return interruptedCode(ctx)
	}
	if len(names) > 0 || lf.list {
		return writeOthers(a, cmd, *format, n, holders, listed)
	}
	select {
	case <-opened:
	case <-ctx.Done():
		return interruptedCode(ctx)
	case <-t.C:
	}
	if statusWaited != nil {
		statusWaited(n.client)
	}
	failure, why := n.watch.failure()
	// The code is that of the snapshot printed: a session that opened
	// after the timer fired, and before the snapshot, shows as live and
	// exits 0.
	snap := n.client.Snapshot()
	code = exitOK
	if snap.Session.Status != simba.StatusLive {
		code = exitUnavailable
	}
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
		n.close(a, cmd) // no warning of the client after the report
		a.report(cmd, "no session opened on %s within %v%s", n.where, *timeout, why)
		code = failure
	}
	return code
}

// leaseNames is the value of --holder: lease names, each checked as it is
// parsed, in the order given, without repeats.
type leaseNames []string

func (l *leaseNames) String() string { return strings.Join(*l, ",") }

// Set adds NAME or NAME,NAME,...; a name that simba.ValidateName refuses is
// a parse error, so bad usage.
func (l *leaseNames) Set(v string) error {
	for name := range strings.SplitSeq(v, ",") {
		if err := simba.ValidateName(name); err != nil {
			return err
		}
		if !slices.Contains(*l, name) {
			*l = append(*l, name)
		}
	}
	return nil
}

// holderRead is who holds one lease, as the backend told it.
type holderRead struct {
	name string
	h    simba.Holder
	held bool
	err  error
}

// readHolders reads the holders of names at once, each call bounded by ctx
// (and by the client's renew interval), and returns them in the order of
// names.
func readHolders(ctx context.Context, c *simba.Client, names []string) []holderRead {
	out := make([]holderRead, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			h, held, err := c.Holder(ctx, name)
			out[i] = holderRead{name: name, h: h, held: held, err: err}
		})
	}
	wg.Wait()
	return out
}

// statusView is the JSON form of a snapshot: core's snapshot document
// (docs/snapshot.schema.json) and the member the schema names for simba
// status, the backend. The holders asked for with --holder are in the
// holders document instead (othersView).
type statusView struct {
	simba.SnapshotDocument
	Backend string `json:"backend"`
}

// holderView is one lease of --holder: Holder is nil when the lease is
// free (Free) or its holder could not be read (Error).
type holderView struct {
	Name   string        `json:"name"`
	Free   bool          `json:"free"`
	Holder *simba.Holder `json:"holder"`
	Error  string        `json:"error,omitempty"`
}

func writeStatusJSON(w io.Writer, where string, s simba.Snapshot) error {
	v := statusView{SnapshotDocument: s.Document(), Backend: where}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// holderViews is the JSON form of the holders read for --holder.
func holderViews(holders []holderRead) []holderView {
	var out []holderView
	for _, r := range holders {
		hv := holderView{Name: r.name}
		switch {
		case r.err != nil:
			hv.Error = r.err.Error()
		case !r.held:
			hv.Free = true
		default:
			h := r.h
			if !h.Since.IsZero() {
				h.Since = h.Since.UTC()
			}
			hv.Holder = &h
		}
		out = append(out, hv)
	}
	return out
}

// sinceLayout shows when a holder's term began: UTC, to the millisecond.
const sinceLayout = "2006-01-02T15:04:05.000Z07:00"

func writeStatusTable(w io.Writer, where string, s simba.Snapshot) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	id := string(s.Session.ID)
	if id == "" {
		id = "(none)"
	}
	fmt.Fprintf(tw, "backend:\t%s\n", where)
	fmt.Fprintf(tw, "session:\t%s\n", id)
	if s.Session.Identity != "" {
		fmt.Fprintf(tw, "identity:\t%s\n", s.Session.Identity)
	}
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
	} else {
		fmt.Fprintf(tw, "\nNAME\tKIND\tSTATE\tTOKEN\tREMAINING\n")
		for _, l := range s.Leases {
			token := "-"
			if l.Token > 0 {
				token = fmt.Sprint(l.Token)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", l.Name, l.Kind, l.State, token, l.Remaining.Round(time.Millisecond))
		}
	}
	return tw.Flush()
}

// writeHolderTable writes the table of the holders read for --holder,
// nothing without them.
func writeHolderTable(w io.Writer, holders []holderRead) error {
	if len(holders) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nLEASE\tHELD BY\tSESSION\tTOKEN\tSINCE\n")
	for _, r := range holders {
		switch {
		case r.err != nil:
			fmt.Fprintf(tw, "%s\t(not read)\t-\t-\t-\n", r.name)
		case !r.held:
			fmt.Fprintf(tw, "%s\tfree\t-\t-\t-\n", r.name)
		default:
			identity, since := r.h.Identity, "-"
			if identity == "" {
				identity = "(unknown)"
			}
			if !r.h.Since.IsZero() {
				since = r.h.Since.UTC().Format(sinceLayout)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.name, identity, r.h.Session, r.h.Token, since)
		}
	}
	return tw.Flush()
}
