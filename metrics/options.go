package simbametrics

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// ErrInvalidOption is what New's error matches (errors.Is) when an option
// is not valid: a nil function, buckets out of order.
var ErrInvalidOption = errors.New("simbametrics: invalid option")

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

// Option configures a Collector. New reports an option that is not valid.
type Option func(*options) error

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
// each one is a set of series. A nil fn makes New fail.
func WithLeaseLabel(fn func(name string) string) Option {
	return func(o *options) error {
		if fn == nil {
			return fmt.Errorf("%w: WithLeaseLabel with a nil function", ErrInvalidOption)
		}
		o.lease = func(_, name string) string {
			v := fn(name)
			if v == "" || !utf8.ValidString(v) {
				return OtherLeases
			}
			return v
		}
		return nil
	}
}

// WithoutLeaseLabel removes the lease label from every metric: each
// per-lease metric has one series per kind (and reason), for the whole
// client.
func WithoutLeaseLabel() Option {
	return func(o *options) error {
		o.lease = nil
		return nil
	}
}

// WithKeepAliveBuckets sets the buckets of
// simba_keepalive_duration_seconds, in seconds: at least one, finite and
// strictly increasing, or New fails. Default DefaultKeepAliveBuckets.
func WithKeepAliveBuckets(buckets ...float64) Option {
	return bucketsOption("WithKeepAliveBuckets", buckets, func(o *options) *[]float64 { return &o.keepAliveBuckets })
}

// WithAcquireWaitBuckets sets the buckets of
// simba_lock_acquire_wait_seconds, in seconds: at least one, finite and
// strictly increasing, or New fails. Default DefaultAcquireWaitBuckets.
func WithAcquireWaitBuckets(buckets ...float64) Option {
	return bucketsOption("WithAcquireWaitBuckets", buckets, func(o *options) *[]float64 { return &o.waitBuckets })
}

// bucketsOption is the Option of that name: it checks buckets and sets
// the field of options that field returns to them.
func bucketsOption(option string, buckets []float64, field func(*options) *[]float64) Option {
	return func(o *options) error {
		if err := checkBuckets(option, buckets); err != nil {
			return err
		}
		*field(o) = buckets
		return nil
	}
}

// checkBuckets returns an error unless buckets is a non-empty, strictly
// increasing list of finite upper bounds.
func checkBuckets(option string, buckets []float64) error {
	if len(buckets) == 0 {
		return fmt.Errorf("%w: %s with no bucket", ErrInvalidOption, option)
	}
	for i, b := range buckets {
		if math.IsNaN(b) || math.IsInf(b, 0) {
			return fmt.Errorf("%w: %s: bucket %d is %v, want a finite bound", ErrInvalidOption, option, i, b)
		}
		if i > 0 && b <= buckets[i-1] {
			return fmt.Errorf("%w: %s: bucket %d (%v) is not above bucket %d (%v)", ErrInvalidOption, option, i, b, i-1, buckets[i-1])
		}
	}
	return nil
}
