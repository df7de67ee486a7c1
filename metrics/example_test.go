package simbametrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	simbametrics "github.com/simba-go/simba/metrics"
)

// The wiring: the collector listens to the client's events, reads the
// client's snapshot at each scrape, and is registered with a registry that
// promhttp serves.
func Example() {
	col, err := simbametrics.New()
	if err != nil {
		log.Fatal(err)
	}
	client, err := simba.New(memory.New().Connect(), simba.WithEventListener(col.Observe))
	if err != nil {
		log.Fatal(err)
	}
	col.Attach(client)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/simba", simbametrics.SnapshotHandler(client))
	// A real service serves mux: http.ListenAndServe(":9464", mux).

	ctx := context.Background()
	lt, err := client.Lock("invoice").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_ = lt.Release(ctx)
	// Close waits until the listeners got every event.
	if err := client.Close(ctx); err != nil {
		log.Fatal(err)
	}
	printSeries(reg, "simba_session_status", "simba_sessions_ended_total", "simba_terms_won_total", "simba_terms_ended_total")
	// Output:
	// simba_session_status{status="CLOSED"} 1
	// simba_sessions_ended_total{reason="CLOSED"} 1
	// simba_terms_ended_total{kind="lock",lease="*",reason="STOPPED"} 1
	// simba_terms_won_total{kind="lock",lease="*"} 1
}

// Locks named after data share one label value by default. A function of
// your own can keep the part of the name that is a fixed set.
func ExampleWithLeaseLabel() {
	col, err := simbametrics.New(simbametrics.WithLeaseLabel(func(name string) string {
		// "tenant-42.invoice" -> "invoice"; a name without a dot -> "*".
		_, job, _ := strings.Cut(name, ".")
		return job
	}))
	if err != nil {
		log.Fatal(err)
	}
	client, err := simba.New(memory.New().Connect(), simba.WithEventListener(col.Observe))
	if err != nil {
		log.Fatal(err)
	}
	col.Attach(client)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)

	ctx := context.Background()
	for _, tenant := range []string{"tenant-42", "tenant-7"} {
		lt, err := client.Lock(tenant + ".invoice").Acquire(ctx)
		if err != nil {
			log.Fatal(err)
		}
		_ = lt.Release(ctx)
	}
	_ = client.Close(ctx)
	printSeries(reg, "simba_terms_won_total")
	// Output:
	// simba_terms_won_total{kind="lock",lease="invoice"} 2
}

func ExampleSnapshotHandler() {
	client, err := simba.New(memory.New().Connect(), simba.WithIdentity("billing-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = client.Close(context.Background()) }()
	lt, err := client.Lock("invoice").Acquire(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = lt.Release(context.Background()) }()

	srv := httptest.NewServer(simbametrics.SnapshotHandler(client))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var doc struct {
		Session struct {
			Identity string `json:"identity"`
			Status   string `json:"status"`
		} `json:"session"`
		Leases []struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			State string `json:"state"`
		} `json:"leases"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		log.Fatal(err)
	}
	fmt.Println(doc.Session.Identity, doc.Session.Status)
	for _, l := range doc.Leases {
		fmt.Println(l.Name, l.Kind, l.State)
	}
	// Output:
	// billing-1 LIVE
	// invoice lock HOLDING
}

func ExamplePartitionOf() {
	for _, name := range []string{"jobs.3", "jobs", "jobs.03"} {
		group, partition, ok := simbametrics.PartitionOf(name)
		fmt.Printf("%s: %q %d %v\n", name, group, partition, ok)
	}
	// Output:
	// jobs.3: "jobs" 3 true
	// jobs: "" 0 false
	// jobs.03: "" 0 false
}

// printSeries prints the series of the named metrics, sorted.
func printSeries(g prometheus.Gatherer, names ...string) {
	mfs, err := g.Gather()
	if err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		for _, name := range names {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				if v != 0 {
					lines = append(lines, fmt.Sprintf("%s%s %v", name, labelString(m.GetLabel()), v))
				}
			}
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
}
