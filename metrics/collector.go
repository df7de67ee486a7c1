package simbametrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	simba "github.com/simba-go/simba/core"
)

// The session statuses, in the order simba_session_status lists them.
var statuses = []simba.Status{simba.StatusOpening, simba.StatusLive, simba.StatusSuspended, simba.StatusClosed}

// The reasons a term ends, initialised at zero for every lease label value
// as soon as a term of it is won, so that the first end of each reason
// shows as an increase. A lock is never stepped down from.
var (
	electionReasons = []simba.RevokeReason{simba.Stopped, simba.SteppedDown, simba.DeadlinePassed, simba.SessionExpired, simba.TakenOver}
	lockReasons     = []simba.RevokeReason{simba.Stopped, simba.DeadlinePassed, simba.SessionExpired, simba.TakenOver}
)

// The reason label values of simba_sessions_ended_total.
const (
	endDeadlinePassed = "DEADLINE_PASSED"
	endSessionExpired = "SESSION_EXPIRED"
	endClosed         = "CLOSED"
)

// Collector is a prometheus.Collector of one Simba client's metrics; see
// the package documentation for the wiring and README.md for the list.
// Observe must be registered as the client's event listener, and Attach
// given the client. A Collector is safe for concurrent use: events,
// scrapes and Attach may come from any goroutine.
type Collector struct {
	lease  func(kind, name string) string // nil: no lease label
	client atomic.Pointer[simba.Client]

	// Driven by events.
	sessionsOpened    prometheus.Counter
	sessionsEnded     *prometheus.CounterVec // reason
	suspensions       prometheus.Counter
	keepAlive         prometheus.Histogram
	keepAliveFailures prometheus.Counter
	backendErrors     prometheus.Counter
	termsWon          *prometheus.CounterVec   // kind, [lease]
	termsEnded        *prometheus.CounterVec   // kind, [lease], reason
	acquireWait       *prometheus.HistogramVec // [lease]
	workFailures      *prometheus.CounterVec   // [lease]
	workPanics        *prometheus.CounterVec   // [lease]
	listenerPanics    *prometheus.CounterVec   // [lease]
	backendWarnings   *prometheus.CounterVec   // code
	fromEvents        []prometheus.Collector

	// Computed at scrape.
	statusDesc        *prometheus.Desc
	statusChangeDesc  *prometheus.Desc
	remainingDesc     *prometheus.Desc
	renewDesc         *prometheus.Desc
	leaseDesc         *prometheus.Desc
	termRemainingDesc *prometheus.Desc
	partitionsDesc    *prometheus.Desc
	droppedDesc       *prometheus.Desc

	mu          sync.Mutex
	status      simba.Status
	statusSince time.Time
}

// New returns a Collector. Register its Observe method as the client's
// event listener (simba.WithEventListener), give it the client with
// Attach, and register it with a prometheus.Registerer. The error, which
// matches ErrInvalidOption, names the first option that is not valid.
func New(opts ...Option) (*Collector, error) {
	o := options{
		lease:            defaultLeaseLabel,
		keepAliveBuckets: DefaultKeepAliveBuckets,
		waitBuckets:      DefaultAcquireWaitBuckets,
	}
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: option %d is nil", ErrInvalidOption, i)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	var lease []string
	if o.lease != nil {
		lease = []string{"lease"}
	}
	kindLease := append([]string{"kind"}, lease...)
	c := &Collector{
		lease:       o.lease,
		status:      simba.StatusOpening,
		statusSince: time.Now(),

		sessionsOpened: counter("simba_sessions_opened_total",
			"Sessions the client opened on the backend."),
		sessionsEnded: counterVec("simba_sessions_ended_total",
			"Sessions that ended, by reason: DEADLINE_PASSED (no keep-alive succeeded in time), SESSION_EXPIRED (the backend said so), CLOSED (the client was closed).", []string{"reason"}),
		suspensions: counter("simba_session_suspensions_total",
			"Times the session went from LIVE to SUSPENDED: a keep-alive failed."),
		keepAlive: prometheus.NewHistogram(histogramOpts("simba_keepalive_duration_seconds",
			"Round trip of the session's keep-alive calls, failed calls included.", o.keepAliveBuckets)),
		keepAliveFailures: counter("simba_keepalive_failures_total",
			"Keep-alive calls that failed."),
		backendErrors: counter("simba_backend_errors_total",
			"Backend calls other than keep-alives that failed: opening a session, attempts at a lease, releases at a stop, joining a group."),
		termsWon: counterVec("simba_terms_won_total",
			"Terms won, by kind (election or lock) and lease.", kindLease),
		termsEnded: counterVec("simba_terms_ended_total",
			"Terms ended, by kind, lease and reason (STOPPED, STEPPED_DOWN, DEADLINE_PASSED, SESSION_EXPIRED, TAKEN_OVER).", append(slices.Clone(kindLease), "reason")),
		acquireWait: prometheus.NewHistogramVec(histogramOpts("simba_lock_acquire_wait_seconds",
			"How long each Acquire or TryAcquire that won a lock term waited for it.", o.waitBuckets), lease),
		workFailures: counterVec("simba_leader_work_failures_total",
			"Leader work that failed while its term lasted: returned an error or panicked (panics are also in simba_leader_work_panics_total).", lease),
		workPanics: counterVec("simba_leader_work_panics_total",
			"Leader work that panicked while its term lasted.", lease),
		listenerPanics: counterVec("simba_listener_panics_total",
			"Election listener callbacks (OnElected, OnRevoked) that panicked.", lease),
		backendWarnings: counterVec("simba_backend_warnings_total",
			"Setup warnings the backend reported as sessions opened, by code (each backend's README lists its codes): once per session and code.", []string{"code"}),

		statusDesc: prometheus.NewDesc("simba_session_status",
			"The session status: 1 for the current one (OPENING, LIVE, SUSPENDED or CLOSED), 0 for the others.", []string{"status"}, nil),
		statusChangeDesc: prometheus.NewDesc("simba_session_status_change_timestamp_seconds",
			"Unix time of the last change of simba_session_status.", nil, nil),
		remainingDesc: prometheus.NewDesc("simba_session_remaining_seconds",
			"Time left before the session's local deadline; 0 without a session.", nil, nil),
		renewDesc: prometheus.NewDesc("simba_session_renew_interval_seconds",
			"The keep-alive period in effect: the configured renew interval, or less when the backend granted a shorter lease.", nil, nil),
		leaseDesc: prometheus.NewDesc("simba_session_lease_duration_seconds",
			"The lease duration the client asks for.", nil, nil),
		termRemainingDesc: prometheus.NewDesc("simba_term_remaining_seconds",
			"Time left in each held term, by kind and lease; the least among the terms that share a lease label value.", kindLease, nil),
		partitionsDesc: prometheus.NewDesc("simba_group_partitions_held",
			"Partitions of each group this client holds; groups are read from election names \"group.i\".", []string{"group"}, nil),
		droppedDesc: prometheus.NewDesc("simba_events_dropped_total",
			"Events the client dropped, the oldest first, for event listeners that fell behind by their buffer (simba.WithEventBuffer), every listener counted; read from the attached client.", nil, nil),
	}
	c.fromEvents = []prometheus.Collector{
		c.sessionsOpened, c.sessionsEnded, c.suspensions, c.keepAlive, c.keepAliveFailures, c.backendErrors,
		c.termsWon, c.termsEnded, c.acquireWait, c.workFailures, c.workPanics, c.listenerPanics,
		c.backendWarnings,
	}
	for _, r := range []string{endDeadlinePassed, endSessionExpired, endClosed} {
		c.sessionsEnded.WithLabelValues(r)
	}
	return c, nil
}

// counter and counterVec return a new counter of that name and help text,
// histogramOpts the options of a histogram with a copy of buckets.
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels []string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Name: name, Help: help, Buckets: slices.Clone(buckets)}
}

// Attach makes the Collector read the snapshot of client at every scrape;
// nil detaches it. Attach again after replacing the client: counters go on
// from where they were. Call it with the client whose events Observe gets.
func (c *Collector) Attach(client *simba.Client) { c.client.Store(client) }

// Observe counts one event of the client. Register it with
// simba.WithEventListener when building the client; it returns at once
// and never calls the backend.
func (c *Collector) Observe(_ context.Context, e simba.Event) {
	switch e.Kind {
	case simba.EventSessionOpened:
		c.sessionsOpened.Inc()
		c.setStatus(simba.StatusLive, e.Time)
	case simba.EventSessionSuspended:
		c.suspensions.Inc()
		c.setStatus(simba.StatusSuspended, e.Time)
	case simba.EventSessionRestored:
		c.setStatus(simba.StatusLive, e.Time)
	case simba.EventSessionDeadlinePassed:
		c.sessionsEnded.WithLabelValues(endDeadlinePassed).Inc()
		c.setStatus(simba.StatusOpening, e.Time)
	case simba.EventSessionExpired:
		c.sessionsEnded.WithLabelValues(endSessionExpired).Inc()
		c.setStatus(simba.StatusOpening, e.Time)
	case simba.EventSessionClosed:
		if e.Session != "" {
			c.sessionsEnded.WithLabelValues(endClosed).Inc()
		}
		c.setStatus(simba.StatusClosed, e.Time)
	case simba.EventKeepAlive:
		c.keepAlive.Observe(e.Latency.Seconds())
		if e.Err != nil {
			c.keepAliveFailures.Inc()
		}
	case simba.EventBackendError:
		c.backendErrors.Inc()
	case simba.EventElected:
		c.elected(e)
	case simba.EventRevoked:
		kind := kindOf(e)
		c.termsEnded.WithLabelValues(c.labels(kind, e.Name, e.Reason.String())...).Inc()
	case simba.EventWorkFailed:
		lv := c.labels(KindElection, e.Name)[1:]
		c.workFailures.WithLabelValues(lv...).Inc()
		var we *simba.WorkError
		if errors.As(e.Err, &we) && we.Panic != nil {
			c.workPanics.WithLabelValues(lv...).Inc()
		}
	case simba.EventListenerPanicked:
		c.listenerPanics.WithLabelValues(c.labels(KindElection, e.Name)[1:]...).Inc()
	case simba.EventBackendWarning:
		c.backendWarnings.WithLabelValues(e.Warning.Code).Inc()
	}
}

// elected counts a won term and initialises, at zero, the series its end
// and its failures will count in.
func (c *Collector) elected(e simba.Event) {
	kind := kindOf(e)
	lv := c.labels(kind, e.Name)
	c.termsWon.WithLabelValues(lv...).Inc()
	reasons := electionReasons
	if kind == KindLock {
		reasons = lockReasons
	}
	for _, r := range reasons {
		c.termsEnded.WithLabelValues(append(slices.Clone(lv), r.String())...)
	}
	if kind == KindLock {
		c.acquireWait.WithLabelValues(lv[1:]...).Observe(e.Waited.Seconds())
		return
	}
	c.workFailures.WithLabelValues(lv[1:]...)
	c.workPanics.WithLabelValues(lv[1:]...)
	c.listenerPanics.WithLabelValues(lv[1:]...)
}

// kindOf returns the kind label value of an Elected or Revoked event.
func kindOf(e simba.Event) string {
	if e.Lock {
		return KindLock
	}
	return KindElection
}

// labels returns the label values kind, lease (unless the label is off)
// and extra.
func (c *Collector) labels(kind, name string, extra ...string) []string {
	lv := make([]string, 0, 2+len(extra))
	lv = append(lv, kind)
	if c.lease != nil {
		lv = append(lv, c.lease(kind, name))
	}
	return append(lv, extra...)
}

func (c *Collector) setStatus(s simba.Status, at time.Time) {
	if at.IsZero() {
		at = time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status != s {
		c.status, c.statusSince = s, at
	}
}

// Describe sends the descriptors of every metric the Collector may report.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.fromEvents {
		m.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{c.statusDesc, c.statusChangeDesc, c.remainingDesc, c.renewDesc,
		c.leaseDesc, c.termRemainingDesc, c.partitionsDesc, c.droppedDesc} {
		ch <- d
	}
}

// Collect sends the current value of every metric: the counters and
// histograms as the events left them, the session status, and, when a
// client is attached, the gauges read from its snapshot now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.fromEvents {
		m.Collect(ch)
	}
	c.mu.Lock()
	status, since := c.status, c.statusSince
	c.mu.Unlock()
	for _, s := range statuses {
		v := 0.0
		if s == status {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.statusDesc, prometheus.GaugeValue, v, s.String())
	}
	ch <- prometheus.MustNewConstMetric(c.statusChangeDesc, prometheus.GaugeValue, float64(since.UnixNano())/1e9)

	client := c.client.Load()
	if client == nil {
		return
	}
	snap, cfg := client.Snapshot(), client.Config()
	renew := snap.Session.Renew
	if renew <= 0 {
		renew = cfg.RenewInterval
	}
	ch <- prometheus.MustNewConstMetric(c.remainingDesc, prometheus.GaugeValue, snap.Session.Remaining.Seconds())
	ch <- prometheus.MustNewConstMetric(c.renewDesc, prometheus.GaugeValue, renew.Seconds())
	ch <- prometheus.MustNewConstMetric(c.leaseDesc, prometheus.GaugeValue, cfg.LeaseDuration.Seconds())
	ch <- prometheus.MustNewConstMetric(c.droppedDesc, prometheus.CounterValue, float64(client.EventsDropped()))

	type termKey struct{ kind, lease string }
	var keys []termKey
	least := make(map[termKey]time.Duration)
	for _, l := range snap.Leases {
		if l.State != simba.StateHolding {
			continue
		}
		k := termKey{kind: l.Kind}
		if c.lease != nil {
			k.lease = c.lease(l.Kind, l.Name)
		}
		if r, seen := least[k]; !seen || l.Remaining < r {
			if !seen {
				keys = append(keys, k)
			}
			least[k] = l.Remaining
		}
	}
	for _, k := range keys {
		lv := []string{k.kind}
		if c.lease != nil {
			lv = append(lv, k.lease)
		}
		ch <- prometheus.MustNewConstMetric(c.termRemainingDesc, prometheus.GaugeValue, least[k].Seconds(), lv...)
	}
	for _, g := range groupShares(snap) {
		ch <- prometheus.MustNewConstMetric(c.partitionsDesc, prometheus.GaugeValue, float64(len(g.held)), g.name)
	}
}
