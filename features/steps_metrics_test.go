package features

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	simba "github.com/simba-go/simba/core"
	simbametrics "github.com/simba-go/simba/metrics"
)

// metricsOf is the collector of one node and the registry that holds it.
type metricsOf struct {
	col *simbametrics.Collector
	reg *prometheus.Registry
}

// connectedWithMetrics connects a node whose event listener feeds a
// collector, as simba.WithEventListener(col.Observe) would.
func (w *world) connectedWithMetrics(name string) error {
	col, err := simbametrics.New()
	if err != nil {
		return err
	}
	n, err := w.connect(name, connectOptions{onEvent: func(ctx context.Context, _ *node, e simba.Event) {
		col.Observe(ctx, e)
	}})
	if err != nil {
		return err
	}
	col.Attach(n.client)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(col); err != nil {
		return err
	}
	n.metrics = &metricsOf{col: col, reg: reg}
	return nil
}

// metricIs checks one metric of a node's scrape, at once or until it holds
// within a duration: the sum of the samples of the metric whose labels
// include the given ones (lease names are the scenario's). A metric with
// no such sample fails.
func (w *world) metricIs(phrase, name, metric, labels, want string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	mo := n.metrics
	if mo == nil {
		return fmt.Errorf("features: node %s was not connected with metrics", name)
	}
	mo.col.Attach(n.client) // the node's current client, after a reconnect too
	match, err := w.matchers(labels)
	if err != nil {
		return err
	}
	check := func() (float64, bool, error) {
		v, found, err := scrape(mo.reg, metric, match)
		switch {
		case err != nil:
			return v, false, err
		case !found:
			return v, false, fmt.Errorf("%s's scrape has no series %s%s", name, metric, labels)
		case want == "above zero":
			return v, v > 0, nil
		}
		x, _ := strconv.ParseFloat(want, 64)
		return v, v == x, nil
	}
	if phrase == "" {
		v, ok, err := check()
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("%s's %s%s = %v, want %s", name, metric, labels, v, want)
		}
		return nil
	}
	d, err := n.dur(phrase)
	if err != nil {
		return err
	}
	var last float64
	var lastErr error
	err = w.eventually(d, fmt.Sprintf("%s's %s%s is not %s", name, metric, labels, want), func() bool {
		v, ok, err := check()
		last, lastErr = v, err
		return ok
	})
	switch {
	case err != nil && lastErr != nil:
		return fmt.Errorf("%w: %w", err, lastErr)
	case err != nil:
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return nil
}

var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// matchers reads {a="x",b="y"}; a lease other than "*" is the scenario's
// name of it.
func (w *world) matchers(labels string) (map[string]string, error) {
	out := make(map[string]string)
	inner := strings.TrimSuffix(strings.TrimPrefix(labels, "{"), "}")
	if strings.TrimSpace(inner) == "" {
		return out, nil
	}
	for _, part := range strings.Split(inner, ",") {
		p := labelPair.FindStringSubmatch(strings.TrimSpace(part))
		if p == nil {
			return nil, fmt.Errorf("features: cannot read the label %q", part)
		}
		v := p[2]
		if p[1] == "lease" && v != simbametrics.OtherLeases {
			v = w.name(v)
		}
		out[p[1]] = v
	}
	return out, nil
}

// scrape serves reg through promhttp, as Prometheus scrapes it, parses the
// text and sums the samples of metric (name_count and name_sum read a
// histogram) whose labels include match.
func scrape(reg *prometheus.Registry, metric string, match map[string]string) (float64, bool, error) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return 0, false, fmt.Errorf("features: scrape: %d %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		return 0, false, fmt.Errorf("features: scrape: %w", err)
	}
	family, part := metric, ""
	if _, ok := families[metric]; !ok {
		for _, suffix := range []string{"_count", "_sum"} {
			if base, cut := strings.CutSuffix(metric, suffix); cut {
				family, part = base, suffix
			}
		}
	}
	mf, ok := families[family]
	if !ok {
		return 0, false, nil
	}
	sum, found := 0.0, false
	for _, s := range mf.GetMetric() {
		if !hasLabels(s, match) {
			continue
		}
		found = true
		switch {
		case part == "_count":
			sum += float64(s.GetHistogram().GetSampleCount())
		case part == "_sum":
			sum += s.GetHistogram().GetSampleSum()
		case mf.GetType() == dto.MetricType_COUNTER:
			sum += s.GetCounter().GetValue()
		case mf.GetType() == dto.MetricType_GAUGE:
			sum += s.GetGauge().GetValue()
		default:
			sum += s.GetUntyped().GetValue()
		}
	}
	if math.IsNaN(sum) {
		return 0, false, fmt.Errorf("features: %s is NaN", metric)
	}
	return sum, found, nil
}

func hasLabels(s *dto.Metric, match map[string]string) bool {
	have := make(map[string]string)
	for _, l := range s.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range match {
		if have[k] != v {
			return false
		}
	}
	return true
}
