package simbametrics

import (
	"encoding/json"
	"net/http"
	"time"

	simba "github.com/simba-go/simba/core"
)

// snapshotJSON is the document SnapshotHandler serves. README.md lists
// its fields; their names and meanings are stable.
type snapshotJSON struct {
	Time    time.Time   `json:"time"`
	Session sessionJSON `json:"session"`
	Leases  []leaseJSON `json:"leases"`
	Groups  []groupJSON `json:"groups"`
}

type sessionJSON struct {
	ID                   string  `json:"id"`
	Identity             string  `json:"identity"`
	Status               string  `json:"status"`
	RemainingSeconds     float64 `json:"remainingSeconds"`
	RenewIntervalSeconds float64 `json:"renewIntervalSeconds"`
	LeaseDurationSeconds float64 `json:"leaseDurationSeconds"`
	LeaseShortened       bool    `json:"leaseShortened"`
}

type leaseJSON struct {
	Name             string  `json:"name"`
	Kind             string  `json:"kind"`
	State            string  `json:"state"`
	Token            uint64  `json:"token"`
	RemainingSeconds float64 `json:"remainingSeconds"`
	Waiters          int     `json:"waiters"`
}

type groupJSON struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Held       []int  `json:"held"`
}

// snapshotOf builds the document of client's snapshot, taken now.
func snapshotOf(client *simba.Client) snapshotJSON {
	now := time.Now()
	s, cfg := client.Snapshot(), client.Config()
	renew := s.Session.Renew
	if renew <= 0 {
		renew = cfg.RenewInterval
	}
	doc := snapshotJSON{
		Time: now.UTC(),
		Session: sessionJSON{
			ID:                   string(s.Session.ID),
			Identity:             s.Session.Identity,
			Status:               s.Session.Status.String(),
			RemainingSeconds:     s.Session.Remaining.Seconds(),
			RenewIntervalSeconds: renew.Seconds(),
			LeaseDurationSeconds: cfg.LeaseDuration.Seconds(),
			LeaseShortened:       s.Session.Shortened,
		},
		Leases: make([]leaseJSON, 0, len(s.Leases)),
		Groups: []groupJSON{},
	}
	for _, l := range s.Leases {
		doc.Leases = append(doc.Leases, leaseJSON{
			Name:             l.Name,
			Kind:             l.Kind,
			State:            string(l.State),
			Token:            l.Token,
			RemainingSeconds: l.Remaining.Seconds(),
			Waiters:          l.Waiters,
		})
	}
	for _, g := range groupShares(s) {
		doc.Groups = append(doc.Groups, groupJSON{Name: g.name, Partitions: g.partitions, Held: g.held})
	}
	return doc
}

// SnapshotHandler returns an http.Handler that answers GET and HEAD with
// the snapshot of client, taken at each request, as a JSON document:
// the session, every election and lock of the client, and the share of
// each group it runs (see README.md for the fields). Other methods get
// 405 Method Not Allowed. The document names leases and the session's
// identity: serve it where the metrics are served, not to the public.
// SnapshotHandler panics on a nil client.
func SnapshotHandler(client *simba.Client) http.Handler {
	if client == nil {
		panic("simbametrics: SnapshotHandler with a nil client")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := json.MarshalIndent(snapshotOf(client), "", "  ")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		body = append(body, '\n')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}
