package simbametrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	simbametrics "github.com/simba-go/simba/metrics"
)

// TestSnapshotHandlerDocument checks every field of the document, as
// README.md documents it, and the document against docs/snapshot.schema.json.
func TestSnapshotHandlerDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		a, b := newNode(t, srv, "node-a"), newNode(t, srv, "node-b")
		a.waitLive(t)
		b.waitLive(t)
		a.lead(t, "report")
		b.lead(t, "billing")
		if err := a.client.Election("billing").Start(simba.ListenerFuncs{}); err != nil {
			t.Fatal(err)
		}
		lt, err := a.client.Lock("invoice").Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 2)
		go func() {
			// Waits behind the term this client holds.
			if _, err := a.client.Lock("invoice").Acquire(ctx); err == nil {
				done <- errors.New("the second acquisition won")
				return
			}
			done <- nil
		}()
		go func() {
			done <- a.client.Group("jobs", 2).Run(ctx, func(ctx context.Context, _ int, _ *simba.Term) error {
				<-ctx.Done()
				return nil
			})
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()

		// The clock of the bubble stands still while this goroutine runs:
		// the snapshot below is the one the handler serves.
		s := a.client.Snapshot()
		rec := httptest.NewRecorder()
		simbametrics.SnapshotHandler(a.client).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/simba", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		var got map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, rec.Body)
		}
		leader := func(name, kind string, waiters float64) map[string]any {
			for _, l := range s.Leases {
				if l.Name == name {
					return map[string]any{"name": name, "kind": kind, "state": "HOLDING", "token": float64(l.Token),
						"remainingMs": float64(l.Remaining.Milliseconds()), "waiters": waiters}
				}
			}
			t.Fatalf("no lease %s", name)
			return nil
		}
		validSnapshot(t, rec.Body.Bytes())
		remaining := float64(s.Session.Remaining.Milliseconds())
		if remaining <= 2000 || remaining > 3000 {
			t.Errorf("remaining %vms: want a keep-alive within the last second of a 3s lease", remaining)
		}
		want := map[string]any{
			"schema": simba.SnapshotSchema,
			"time":   time.Now().UTC().Format(time.RFC3339Nano),
			"session": map[string]any{
				"id":              string(s.Session.ID),
				"identity":        "node-a",
				"status":          "LIVE",
				"remainingMs":     remaining,
				"renewIntervalMs": 1000.0,
				"leaseDurationMs": 3000.0,
				"leaseShortened":  false,
			},
			"leases": []any{
				map[string]any{"name": "billing", "kind": "election", "state": "CONTENDING", "token": 0.0,
					"remainingMs": 0.0, "waiters": 0.0},
				leader("invoice", "lock", 1),
				leader("jobs.0", "election", 0),
				leader("jobs.1", "election", 0),
				leader("report", "election", 0),
			},
			"groups": []any{
				map[string]any{"name": "jobs", "partitions": 2.0, "held": []any{0.0, 1.0}},
			},
		}
		if !reflect.DeepEqual(got, want) {
			gotJSON, _ := json.MarshalIndent(got, "", "  ")
			wantJSON, _ := json.MarshalIndent(want, "", "  ")
			t.Errorf("got\n%s\nwant\n%s", gotJSON, wantJSON)
		}

		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		_ = lt.Release(t.Context())
		if err := a.client.Election("billing").Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		rec = httptest.NewRecorder()
		simbametrics.SnapshotHandler(a.client).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/simba", nil))
		var after struct {
			Leases []struct {
				Name  string `json:"name"`
				State string `json:"state"`
			} `json:"leases"`
			Groups []any `json:"groups"`
		}
		validSnapshot(t, rec.Body.Bytes())
		if err := json.Unmarshal(rec.Body.Bytes(), &after); err != nil {
			t.Fatal(err)
		}
		if len(after.Leases) != 1 || after.Leases[0].Name != "report" || after.Groups == nil || len(after.Groups) != 0 {
			t.Errorf("after the group and the lock ended: %s", rec.Body)
		}
	})
}

// TestSnapshotHandlerHTTP serves the handler on a real server: GET, HEAD
// and a refused POST; a closed client still answers.
func TestSnapshotHandlerHTTP(t *testing.T) {
	client, err := simba.New(memory.New().Connect(), simba.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(simbametrics.SnapshotHandler(client))
	defer srv.Close()

	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("GET: %s %v %s", res.Status, res.Header, body)
	}
	validSnapshot(t, body) // a session still opening

	res, err = http.Head(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || len(body) != 0 || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("HEAD: %s %v %q", res.Status, res.Header, body)
	}

	res, err = http.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %s %v", res.Status, res.Header)
	}

	if err := client.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err = http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	_ = res.Body.Close()
	validSnapshot(t, body)
	var doc struct {
		Session struct {
			Status string `json:"status"`
		} `json:"session"`
		Leases []any `json:"leases"`
	}
	err = json.Unmarshal(body, &doc)
	if err != nil || doc.Session.Status != "CLOSED" || doc.Leases == nil {
		t.Errorf("after Close: %+v %v", doc, err)
	}
}

func TestSnapshotHandlerNilClientPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("SnapshotHandler(nil) did not panic")
		}
	}()
	simbametrics.SnapshotHandler(nil)
}
