package simbametrics

import "unicode/utf8"

// OtherLeases is the lease label value shared by every lease whose name is
// not kept as a label value: by default every lock, and with
// [WithLeaseLabel] every name the function maps to "". No lease name can
// take this value: "*" is not allowed in lease names.
const OtherLeases = "*"

// The kind label values, as simba.LeaseSnapshot.Kind spells them.
const (
	KindElection = "election"
	KindLock     = "lock"
)

// Option configures a Collector.
type Option func(*options)

type options struct {
	lease            func(kind, name string) string // nil: no lease label
	keepAliveBuckets []float64
	waitBuckets      []float64
}

// Default histogram buckets, in seconds.
var (
	// DefaultKeepAliveBuckets spans a local call (1ms) to a call that
	// takes the whole default renew interval (5s).
	DefaultKeepAliveBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	// DefaultAcquireWaitBuckets spans an uncontended acquisition (1ms) to
	// a wait of five minutes.
	DefaultAcquireWaitBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 120, 300}
)

// defaultLeaseLabel keeps election names and gives every lock OtherLeases.
func defaultLeaseLabel(kind, name string) string {
	if kind == KindElection {
		return name
	}
	return OtherLeases
}

// WithLeaseLabel sets the lease label value of each lease name, for
// elections and locks alike; it replaces the default, which keeps election
// names and gives every lock [OtherLeases]. A name mapped to "" (or to a
// value that is not valid UTF-8) gets OtherLeases. Leases that map to one
// value share their series: counters add up, and
// simba_term_remaining_seconds shows the least time left among them.
//
// fn runs on the event listener and at every scrape, so it must be fast
// and safe for concurrent use. Keep the number of values it returns small:
// each one is a set of series. WithLeaseLabel panics on a nil fn.
func WithLeaseLabel(fn func(name string) string) Option {
	if fn == nil {
		panic("simbametrics: WithLeaseLabel with a nil function")
	}
	return func(o *options) {
		o.lease = func(_, name string) string {
			v := fn(name)
			if v == "" || !utf8.ValidString(v) {
				return OtherLeases
			}
			return v
		}
	}
}

// WithoutLeaseLabel removes the lease label from every metric: each
// per-lease metric has one series per kind (and reason), for the whole
// client.
func WithoutLeaseLabel() Option {
	return func(o *options) { o.lease = nil }
}

// WithKeepAliveBuckets sets the buckets of
// simba_keepalive_duration_seconds, in seconds, in increasing order.
// Default DefaultKeepAliveBuckets.
func WithKeepAliveBuckets(buckets ...float64) Option {
	return func(o *options) { o.keepAliveBuckets = buckets }
}

// WithAcquireWaitBuckets sets the buckets of
// simba_lock_acquire_wait_seconds, in seconds, in increasing order.
// Default DefaultAcquireWaitBuckets.
func WithAcquireWaitBuckets(buckets ...float64) Option {
	return func(o *options) { o.waitBuckets = buckets }
}
