package simbametrics

import (
	"encoding/json"
	"net/http"

	simba "github.com/simba-go/simba/core"
)

// snapshotJSON is the document SnapshotHandler serves: the snapshot's
// document of docs/snapshot.schema.json, encoded by core, and the groups,
// the one member the schema names for this handler.
type snapshotJSON struct {
	simba.SnapshotDocument
	Groups []groupJSON `json:"groups"`
}

type groupJSON struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Held       []int  `json:"held"`
}

// snapshotOf builds the document of client's snapshot, taken now.
func snapshotOf(client *simba.Client) snapshotJSON {
	s := client.Snapshot()
	doc := snapshotJSON{SnapshotDocument: s.Document(), Groups: []groupJSON{}}
	for _, g := range groupShares(s) {
		doc.Groups = append(doc.Groups, groupJSON{Name: g.name, Partitions: g.partitions, Held: g.held})
	}
	return doc
}

// SnapshotHandler returns an http.Handler that answers GET and HEAD with
// the snapshot of client, taken at each request, as a JSON document:
// the session, every election and lock of the client, and the share of
// each group it runs, in the shape of docs/snapshot.schema.json (version
// simba.SnapshotSchema; README.md lists the fields). Other methods get
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
