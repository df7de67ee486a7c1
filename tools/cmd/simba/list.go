package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// defaultListLimit is the page size of simba status --list.
const defaultListLimit = 100

// listFlags are the flags of simba status --list.
type listFlags struct {
	list   bool
	prefix string
	limit  int
	after  string
	set    []string // the list flags given, for the check that --list is
}

func (l *listFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.list, "list", false, "list the leases held now under --prefix, on any node, one page at a time")
	fs.Func("prefix", "with --list: only the leases whose names start with `PREFIX` (up to "+
		fmt.Sprint(simba.MaxNameLength)+" bytes of [A-Za-z0-9._:-])", func(v string) error {
		if err := simba.ValidatePrefix(v); err != nil {
			return err
		}
		l.prefix, l.set = v, append(l.set, "--prefix")
		return nil
	})
	l.limit = defaultListLimit
	fs.Func("limit", fmt.Sprintf("with --list: at most `N` leases on the page, 1 to %d (default %d)", simba.MaxListLimit, defaultListLimit),
		func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%q is not a whole number", v)
			}
			if n < 1 || n > simba.MaxListLimit {
				return fmt.Errorf("%d: want 1 to %d", n, simba.MaxListLimit)
			}
			l.limit, l.set = n, append(l.set, "--limit")
			return nil
		})
	fs.Func("after", "with --list: the page after `CURSOR`, the cursor the page before ended with", func(v string) error {
		if err := simba.ValidateListQuery(simba.ListQuery{Cursor: v, Limit: 1}); err != nil {
			return err
		}
		l.after, l.set = v, append(l.set, "--after")
		return nil
	})
}

// check reports a list flag given without --list.
func (l *listFlags) check() error {
	if !l.list && len(l.set) > 0 {
		return fmt.Errorf("%s needs --list", l.set[0])
	}
	return nil
}

// listRead is one page of the listing, or why it could not be read.
type listRead struct {
	page simba.HolderPage
	err  error
}

// read reads the page the flags ask for; nil without --list.
func (l *listFlags) read(ctx context.Context, c *simba.Client) *listRead {
	if !l.list {
		return nil
	}
	p, err := c.ListHolders(ctx, simba.ListQuery{Prefix: l.prefix, Cursor: l.after, Limit: l.limit})
	return &listRead{page: p, err: err}
}

// listFailed reports a listing that failed and returns its exit code,
// exitOK for one that did not.
func (a *app) listFailed(cmd, where string, r *listRead) int {
	switch {
	case r == nil || r.err == nil:
		return exitOK
	case errors.Is(r.err, simba.ErrNotSupported):
		a.report(cmd, "--list: the backend %s cannot list the leases held (%v)", where, r.err)
		return exitUsage
	case errors.Is(r.err, simba.ErrInvalidArgument):
		return a.usageError(cmd, fmt.Errorf("--list: %w", r.err))
	case isNotSetUp(r.err):
		a.report(cmd, "backend %s is not set up: %v", where, r.err)
		return exitConfig
	}
	a.report(cmd, "leases held not listed on %s: %v", where, r.err)
	return exitUnavailable
}

// holdersSchema names the document simba status --format json prints with
// --holder or --list (docs/holders.schema.json).
const holdersSchema = "simba.holders/v1"

// othersView is the JSON form of simba status --holder or --list, the
// document of docs/holders.schema.json: no session of its own.
type othersView struct {
	Schema  string       `json:"schema"`
	Time    time.Time    `json:"time"`
	Backend string       `json:"backend"`
	Holders []holderView `json:"holders,omitempty"`
	Held    *[]heldView  `json:"held,omitempty"` // with --list: [] for an empty page
	Next    *string      `json:"next,omitempty"` // with --list: "" on the last page
	// ListError says why the page was not read; Held and Next are left
	// out then.
	ListError string `json:"listError,omitempty"`
}

// heldView is one lease of the listing.
type heldView struct {
	Name   string       `json:"name"`
	Holder simba.Holder `json:"holder"`
	AgeMs  *int64       `json:"ageMs,omitempty"` // nil when the backend does not record since when
}

func writeOthersJSON(w io.Writer, where string, holders []holderRead, l *listRead, now time.Time) error {
	v := othersView{Schema: holdersSchema, Time: now.UTC().Truncate(time.Millisecond), Backend: where, Holders: holderViews(holders)}
	switch {
	case l != nil && l.err != nil:
		v.ListError = l.err.Error()
	case l != nil:
		held := []heldView{}
		for _, h := range l.page.Leases {
			hv := heldView{Name: h.Name, Holder: h.Holder}
			if !h.Holder.Since.IsZero() {
				hv.Holder.Since = h.Holder.Since.UTC()
				age := max(now.Sub(h.Holder.Since), 0).Milliseconds()
				hv.AgeMs = &age
			}
			held = append(held, hv)
		}
		v.Held, v.Next = &held, &l.page.Next
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeOthersTable(w io.Writer, where string, holders []holderRead, l *listRead, now time.Time) error {
	if _, err := fmt.Fprintf(w, "backend:  %s\n", where); err != nil {
		return err
	}
	if err := writeHolderTable(w, holders); err != nil || l == nil {
		return err
	}
	if l.err != nil {
		_, err := fmt.Fprintf(w, "\nheld:     (not read)\n")
		return err
	}
	if len(l.page.Leases) == 0 {
		_, err := fmt.Fprintf(w, "\nheld:     none on this page\n")
		if err == nil && l.page.Next != "" {
			_, err = fmt.Fprintf(w, "next page: --after %s\n", l.page.Next)
		}
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nLEASE\tHELD BY\tSESSION\tTOKEN\tAGE\n")
	for _, h := range l.page.Leases {
		identity, age := h.Holder.Identity, "-"
		if identity == "" {
			identity = "(unknown)"
		}
		if !h.Holder.Since.IsZero() {
			age = roundAge(max(now.Sub(h.Holder.Since), 0)).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", h.Name, identity, h.Holder.Session, h.Holder.Token, age)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.page.Next != "" {
		_, err := fmt.Fprintf(w, "next page: --after %s\n", l.page.Next)
		return err
	}
	return nil
}

// roundAge rounds an age for reading: to the millisecond under a second,
// to the second under an hour, to the minute beyond.
func roundAge(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Hour:
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}

// writeOthers prints what --holder and --list read, without the
// command's own session, and returns the exit code. A backend that cannot
// list, a cursor it refuses and missing tables print nothing but the
// error; a holder or a page not read is reported after the rest, with
// exitUnavailable.
func writeOthers(a *app, cmd, format string, n *node, holders []holderRead, l *listRead) int {
	if l != nil && l.err != nil && (errors.Is(l.err, simba.ErrNotSupported) ||
		errors.Is(l.err, simba.ErrInvalidArgument) || isNotSetUp(l.err)) {
		n.close(a, cmd)
		return a.listFailed(cmd, n.where, l)
	}
	// What a backend's error says goes to standard output here, not
	// through a.report: mask the secrets of the URL in it as report does.
	for i := range holders {
		holders[i].err = backendkit.MaskError(holders[i].err, a.secrets)
	}
	if l != nil {
		l.err = backendkit.MaskError(l.err, a.secrets)
	}
	now := time.Now()
	var err error
	if format == "json" {
		err = writeOthersJSON(a.stdout, n.where, holders, l, now)
	} else {
		err = writeOthersTable(a.stdout, n.where, holders, l, now)
	}
	if err != nil {
		a.report(cmd, "write: %v", err)
		return exitFailure
	}
	n.close(a, cmd) // no warning of the client after the reports
	code := exitOK
	for _, h := range holders {
		if h.err != nil {
			a.report(cmd, "holder of %s not read on %s: %v", h.name, n.where, h.err)
			code = exitUnavailable
		}
	}
	if c := a.listFailed(cmd, n.where, l); c != exitOK {
		code = c
	}
	return code
}
