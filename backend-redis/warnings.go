package simbaredis

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Codes of the warnings a Backend records.
const (
	// WarnEvictionPolicy: the server's maxmemory-policy may evict Simba's
	// keys under memory pressure. allkeys-* policies can evict a lease hash
	// (its next token comes from the server's clock) and sessions; volatile-*
	// policies can evict a session before it expires, so another node may
	// win a lease while its holder still sees a valid term. Use noeviction
	// or a dedicated instance.
	WarnEvictionPolicy = "eviction-policy"

	// WarnContextTimeouts: the client given to New was built without
	// ContextTimeoutEnabled, so calls do not end at the engine's deadline.
	WarnContextTimeouts = "context-timeouts"

	// WarnWrongTypeKey: a keep-alive met a key under the prefix holding
	// another type than Simba writes there, and ignored it.
	WarnWrongTypeKey = "wrong-type-key"
)

// Warning is an operational problem a Backend detected that does not fail
// an operation but weakens a guarantee or the failover time. Each distinct
// warning is logged at level Warn, passed to Options.OnWarning and kept for
// Warnings, once per Backend.
type Warning struct {
	Code    string // one of the Warn* constants
	Message string // what was found and what it risks
}

// Warnings returns every distinct warning recorded so far, oldest first.
func (b *Backend) Warnings() []Warning {
	b.warnMu.Lock()
	defer b.warnMu.Unlock()
	return slices.Clone(b.warnings)
}

// warn records w unless it was recorded before.
func (b *Backend) warn(w Warning) {
	b.warnMu.Lock()
	if slices.Contains(b.warnings, w) {
		b.warnMu.Unlock()
		return
	}
	b.warnings = append(b.warnings, w)
	b.warnMu.Unlock()
	b.log.Warn("simbaredis: "+w.Message, "code", w.Code)
	if b.onWarning != nil {
		b.onWarning(w)
	}
}

// checkEvictionPolicy reads the server's maxmemory-policy once per Backend
// and warns when it can evict keys. A server that refuses CONFIG (managed
// Redis, restricted ACL user) counts as checked; a network failure leaves
// the check for the next OpenSession.
func (b *Backend) checkEvictionPolicy(ctx context.Context) {
	if b.policyKnown.Load() {
		return
	}
	b.policyMu.Lock()
	defer b.policyMu.Unlock()
	if b.policyKnown.Load() {
		return
	}
	cfg, err := b.client.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			b.log.Debug("simbaredis: cannot read maxmemory-policy; eviction risk not checked", "error", serverMessage(err))
			b.policyKnown.Store(true)
		}
		return
	}
	b.policyKnown.Store(true)
	if policy := cfg["maxmemory-policy"]; evicts(policy) {
		b.warn(Warning{Code: WarnEvictionPolicy, Message: "maxmemory-policy is " + policy +
			": under memory pressure Redis may evict Simba's keys, so" +
			" a session can vanish while its holder still sees a valid term; use noeviction or a dedicated instance"})
	}
}

// evicts reports whether a maxmemory-policy lets Redis evict keys.
func evicts(policy string) bool {
	return strings.HasPrefix(policy, "allkeys-") || strings.HasPrefix(policy, "volatile-")
}
