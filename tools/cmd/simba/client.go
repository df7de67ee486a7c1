package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// backendEnv is the variable read when --backend is not given.
const backendEnv = "SIMBA_BACKEND"

// clientFlags are the flags of the commands that open a client.
type clientFlags struct {
	backend        string
	backendSet     bool // --backend given, "" included
	lease          time.Duration
	connectTimeout time.Duration
	migrate        bool
	tablePrefix    string // SQL: "" for the backends' default, simba_
	tablePrefixSet bool   // --table-prefix given, "" included
	verbose        bool
	identity       string // "" for the client's default, HOST:PID
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.Func("backend", "backend `URL` (default $"+backendEnv+")", func(v string) error {
		c.backend, c.backendSet = v, true
		return nil
	})
	fs.DurationVar(&c.lease, "lease", simba.DefaultLeaseDuration,
		"session lease: how long the backend keeps this node's leases after its last keep-alive")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 10*time.Second, "how long connecting to the backend may take")
	fs.BoolVar(&c.migrate, "migrate", false, "PostgreSQL and MySQL: create the tables when they are missing")
	fs.Func("table-prefix", "PostgreSQL and MySQL: `PREFIX` of the table names, "+
		"the TablePrefix of the applications sharing them (default simba_; an empty PREFIX is bad usage)", func(v string) error {
		c.tablePrefix, c.tablePrefixSet = v, true
		return nil
	})
	fs.BoolVar(&c.verbose, "verbose", false, "log the client's debug records on stderr")
	fs.Func("identity", "identity `ID` of this node's session, which other nodes see as the holder of its leases "+
		"(simba status --holder): 1 to "+fmt.Sprint(simba.MaxIdentity)+" bytes of printable UTF-8 (default: HOST:PID)",
		func(id string) error {
			// The rule of simba.WithIdentity, checked while the flags are
			// parsed: a bad identity is bad usage, reported before the
			// backend is contacted.
			if err := backendkit.CheckIdentity(id); err != nil {
				return err
			}
			c.identity = id
			return nil
		})
}

// node is an open client and the backend under it.
type node struct {
	client    *simba.Client
	backend   simba.OpenedBackend
	where     string // the backend URL, password redacted
	inProcess bool   // memory://: no other process shares the store
	watch     *sessionWatch
	closed    bool
}

// warnInProcess warns, for lock and leader, that a memory:// store
// excludes nothing outside this process: two simba processes given the
// same memory:// URL each have a store of their own, and both hold name.
func (n *node) warnInProcess(a *app, cmd, name string) {
	n.warnInProcessThat(a, cmd, "can hold "+name+" at the same time")
}

// warnInProcessThat warns that a memory:// store is this process's own,
// then says what follows from it.
func (n *node) warnInProcessThat(a *app, cmd, consequence string) {
	if n.inProcess {
		a.report(cmd, "warning: %s is a store in this process only: a simba in another process does not see it, "+
			"and %s", n.where, consequence)
	}
}

// connect opens the backend and a client on it. On failure it has printed
// the error and returns the exit code: exitUsage for a missing or bad URL,
// lease or table prefix (a lease above the backend's maximum and an empty
// --table-prefix included), exitConfig for tables that are missing or
// outdated, exitUnavailable for a backend that cannot be reached.
func (c *clientFlags) connect(ctx context.Context, a *app, cmd string, opts ...simba.Option) (*node, int) {
	rawURL := c.backend
	if c.backendSet && rawURL == "" {
		// --backend "$URL" of an unset variable: not $SIMBA_BACKEND.
		return nil, a.usageError(cmd, errors.New("--backend is empty: give a backend URL"))
	}
	if !c.backendSet {
		rawURL = a.getenv(backendEnv)
	}
	if rawURL == "" {
		return nil, a.usageError(cmd, errors.New("no backend: give --backend URL or set "+backendEnv+
			" (memory:// for a trial in this process only)"))
	}
	if c.tablePrefixSet && c.tablePrefix == "" {
		// --table-prefix "$PREFIX" of an unset variable: not the default
		// prefix, whose tables may be another application's.
		return nil, a.usageError(cmd, errors.New("--table-prefix is empty: give a table prefix, or leave the flag out for simba_"))
	}
	u := parseBackendURL(rawURL)
	// From here on no line simba prints, a driver's message or a log
	// record included, shows the URL's credentials.
	a.secrets = u.secretStrings()
	if c.lease <= 0 {
		return nil, a.usageError(cmd, fmt.Errorf("--lease %v: must be positive", c.lease))
	}
	cfg := simba.Config{LeaseDuration: c.lease}
	if err := cfg.Validate(); err != nil {
		return nil, a.usageError(cmd, fmt.Errorf("--lease %v: %w", c.lease, err))
	}
	if c.connectTimeout <= 0 {
		return nil, a.usageError(cmd, fmt.Errorf("--connect-timeout %v: must be positive", c.connectTimeout))
	}
	level := slog.LevelWarn
	if c.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(scrubWriter{a.stderr, a.secrets}, &slog.HandlerOptions{Level: level}))
	// The backends that simba.OpenBackend opens log to slog.Default, and
	// so do the libraries under them: simba's logger is the process's
	// default, so that their records too are filtered by --verbose and
	// scrubbed of the URL's credentials. One simba process opens one
	// backend.
	slog.SetDefault(logger)

	where := u.redactedString()
	octx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	b, err := openBackend(octx, rawURL, backendOptions{migrate: c.migrate, tablePrefix: c.tablePrefix, logger: logger})
	timedOut := errors.Is(octx.Err(), context.DeadlineExceeded)
	cancel()
	var bad *badURLError
	switch {
	case errors.As(err, &bad):
		return nil, a.usageError(cmd, err)
	case err != nil && ctx.Err() != nil:
		return nil, interruptedCode(ctx)
	case isNotSetUp(err):
		a.report(cmd, "backend %s is not set up: %v", where, err)
		return nil, exitConfig
	case err != nil && timedOut:
		// Every backend waits for the context on a server that does not
		// answer: --connect-timeout is the bound, whatever the driver's.
		a.report(cmd, "backend %s unavailable: no answer within --connect-timeout %v: %v", where, c.connectTimeout, err)
		return nil, exitUnavailable
	case err != nil:
		a.report(cmd, "backend %s unavailable: %v", where, err)
		return nil, exitUnavailable
	}
	watch := &sessionWatch{}
	base := []simba.Option{simba.WithConfig(cfg), simba.WithLogger(logger), simba.WithEventListener(watch.listen)}
	if c.identity != "" {
		base = append(base, simba.WithIdentity(c.identity))
	}
	client, err := simba.New(b, append(base, opts...)...)
	if err != nil {
		_ = b.Close()
		switch {
		case errors.Is(err, simba.ErrInvalidConfig):
			// A lease above the backend's maximum: known once it is open.
			return nil, a.usageError(cmd, fmt.Errorf("--lease %v: %w", c.lease, err))
		case errors.Is(err, simba.ErrInvalidArgument):
			return nil, a.usageError(cmd, err)
		}
		a.report(cmd, "%v", err)
		return nil, exitFailure
	}
	inProcess := strings.EqualFold(u.scheme, "memory")
	return &node{client: client, backend: b, where: where, inProcess: inProcess, watch: watch}, exitOK
}

// sessionWatch keeps the last error of the client's attempts to open its
// session, which the client retries until it succeeds: a command that gave
// up waiting says why, and exits with exitConfig when the backend refused
// the session for its setup (tables missing, privileges refused).
type sessionWatch struct {
	mu   sync.Mutex
	last error
}

func (w *sessionWatch) listen(_ context.Context, e simba.Event) {
	if e.Kind == simba.EventBackendError && e.Name == "" {
		w.mu.Lock()
		w.last = e.Err
		w.mu.Unlock()
	}
}

// failure returns the exit code of a command that saw no session open,
// exitConfig or exitUnavailable, and the last error of the attempts, as
// ": ERROR", "" when none failed.
func (w *sessionWatch) failure() (code int, why string) {
	w.mu.Lock()
	err := w.last
	w.mu.Unlock()
	switch {
	case err == nil:
		return exitUnavailable, ""
	case isNotPermitted(err):
		return exitConfig, fmt.Sprintf(": %v: %s", err, grantHint)
	case isNotSetUp(err):
		return exitConfig, fmt.Sprintf(": %v", err)
	}
	return exitUnavailable, fmt.Sprintf(": %v", err)
}

// close closes the client, which frees every lease of the node at once,
// then the backend. It waits at most one lease duration for the client.
// Only the first call closes: a command closes the node before its last
// word, so that no log line of the client follows it, and defers a close
// for the other paths.
func (n *node) close(a *app, cmd string) {
	if n.closed {
		return
	}
	n.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), n.client.Config().LeaseDuration)
	defer cancel()
	if err := n.client.Close(ctx); err != nil {
		a.report(cmd, "closing the client: %v", err)
	}
	if err := n.backend.Close(); err != nil {
		a.report(cmd, "closing the backend: %v", err)
	}
}
