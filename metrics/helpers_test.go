package simbametrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	simbametrics "github.com/simba-go/simba/metrics"
)

// testConfig is a 3s lease renewed every second, no drift or margin, so
// that deadlines are easy to compute on the fake clock.
func testConfig() simba.Config {
	return simba.Config{LeaseDuration: 3 * time.Second, RenewInterval: time.Second, NoDrift: true, NoMargin: true}
}

// node is a client of a memory store with its collector, wired as the
// package documentation says, and a registry that holds the collector.
type node struct {
	conn   *memory.Conn
	client *simba.Client
	col    *simbametrics.Collector
	reg    *prometheus.Registry
}

// newNode connects a node whose sessions carry identity to srv; the
// client is closed at the end of the test.
func newNode(t *testing.T, srv *memory.Server, identity string, opts ...simbametrics.Option) *node {
	t.Helper()
	col, err := simbametrics.New(opts...)
	if err != nil {
		t.Fatalf("simbametrics.New: %v", err)
	}
	n := &node{conn: srv.Connect(), col: col, reg: prometheus.NewPedanticRegistry()}
	client, err := simba.New(n.conn,
		simba.WithConfig(testConfig()),
		simba.WithLogger(slog.New(slog.DiscardHandler)),
		simba.WithIdentity(identity),
		simba.WithEventListener(n.col.Observe))
	if err != nil {
		t.Fatalf("simba.New: %v", err)
	}
	n.client = client
	n.col.Attach(client)
	n.reg.MustRegister(n.col)
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	return n
}

// series returns every sample of the registry as "name{labels}" -> value;
// a histogram gives name_count and name_sum.
func series(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := func(suffix string) string { return mf.GetName() + suffix + labelString(m.GetLabel()) }
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key("_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key("_sum")] = m.GetHistogram().GetSampleSum()
			default:
				t.Fatalf("%s: unexpected type %v", mf.GetName(), mf.GetType())
			}
		}
	}
	return out
}

func labelString(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// want checks the values of the given series; a missing series fails.
func want(t *testing.T, g prometheus.Gatherer, wants map[string]float64) {
	t.Helper()
	got := series(t, g)
	for k, v := range wants {
		gv, ok := got[k]
		switch {
		case !ok:
			t.Errorf("no series %s; have:\n%s", k, keys(got))
		case gv != v:
			t.Errorf("%s = %v, want %v", k, gv, v)
		}
	}
}

// absent checks that no series of the registry starts with any prefix.
func absent(t *testing.T, g prometheus.Gatherer, prefixes ...string) {
	t.Helper()
	for k := range series(t, g) {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				t.Errorf("unexpected series %s", k)
			}
		}
	}
}

func keys(m map[string]float64) string {
	var ks []string
	for k, v := range m {
		ks = append(ks, fmt.Sprintf("  %s %v", k, v))
	}
	sort.Strings(ks)
	return strings.Join(ks, "\n")
}

// waitLive waits, on the fake clock, until the node's session is open and
// its listener has seen it.
func (n *node) waitLive(t *testing.T) {
	t.Helper()
	for range 100 {
		if n.client.Snapshot().Session.Status == simba.StatusLive {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the session did not open")
}

// lead starts the election name with a listener that does nothing and
// waits until this node leads it.
func (n *node) lead(t *testing.T, name string) *simba.Election {
	t.Helper()
	el := n.client.Election(name)
	if err := el.Start(simba.ListenerFuncs{}); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	for range 100 {
		if el.Term() != nil {
			return el
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not leader", name)
	return nil
}
