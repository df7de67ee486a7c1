package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
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

	// WarnReplicasWithoutWait: the primary has connected replicas
	// (INFO replication, connected_slaves) and Options.MinReplicas is 0.
	// Replication is asynchronous: a failover can lose the latest
	// acquires and keep-alives, so a session can end early on the new
	// primary while its node still sees a valid term, and another node
	// win the lease. Set MinReplicas (min_replicas=1 in the URL), or accept
	// it; the fencing token still protects (ADR 0020, ADR 0021).
	WarnReplicasWithoutWait = "replicas-without-wait"
)

// Warning is an operational problem a Backend detected that does not fail
// an operation but weakens a guarantee or the failover time: simba.Warning,
// the type the engine takes in SessionGrant.Warnings. Each distinct warning
// is passed to Options.OnWarning and kept for Warnings, once per Backend.
// The set-up warnings (every code but WarnWrongTypeKey, which a keep-alive
// finds) are also put in the SessionGrant of every OpenSession, and the
// engine logs them at level Warn and publishes them once per session
// (simba.EventBackendWarning); the Backend itself logs them at Debug, and
// WarnWrongTypeKey at Warn.
type Warning = simba.Warning

// Warnings returns every distinct warning recorded so far, oldest first.
func (b *Backend) Warnings() []Warning {
	b.warnMu.Lock()
	defer b.warnMu.Unlock()
	return slices.Clone(b.warnings)
}

// setupWarnings returns the warnings recorded so far about the server's
// or the client's set-up, for a SessionGrant, or nil.
func (b *Backend) setupWarnings() []Warning {
	b.warnMu.Lock()
	defer b.warnMu.Unlock()
	return slices.DeleteFunc(slices.Clone(b.warnings), func(w Warning) bool { return !setupWarning(w) })
}

// setupWarning reports whether w is about the set-up of the server or the
// client, which every SessionGrant carries: every warning but one a
// keep-alive finds in the key space.
func setupWarning(w Warning) bool { return w.Code != WarnWrongTypeKey }

// warn records w unless it was recorded before, and logs it: a set-up
// warning at level Debug, since every SessionGrant carries it and the
// engine logs it at Warn for each session (one line, not two); any other
// at Warn.
func (b *Backend) warn(w Warning) {
	b.warnMu.Lock()
	if slices.Contains(b.warnings, w) {
		b.warnMu.Unlock()
		return
	}
	b.warnings = append(b.warnings, w)
	b.warnMu.Unlock()
	level := slog.LevelWarn
	if setupWarning(w) {
		level = slog.LevelDebug
	}
	b.log.Log(context.Background(), level, "simbaredis: "+w.Message, "code", w.Code)
	if b.onWarning != nil {
		b.onWarning(w)
	}
}

// checkServer reads, once per Backend, what of the server's set-up
// weakens a guarantee: its maxmemory-policy (WarnEvictionPolicy) and, when
// Options.MinReplicas is 0, whether it has replicas
// (WarnReplicasWithoutWait), in one round trip. A server that refuses a
// command (CONFIG or INFO: managed Redis, a restricted ACL user) counts
// as checked for it; a network failure leaves the checks for the next
// OpenSession. On a Cluster it asks the primary of the prefix's slot, the
// one that holds Simba's keys; through Sentinel, the primary the
// sentinels name.
func (b *Backend) checkServer(ctx context.Context) {
	if b.serverChecked.Load() {
		return
	}
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.serverChecked.Load() {
		return
	}
	node, err := b.keyNode(ctx)
	if err != nil {
		return
	}
	pipe := node.Pipeline()
	policy := pipe.ConfigGet(ctx, "maxmemory-policy")
	var info *redis.StringCmd
	if b.batch.replicas == 0 {
		info = pipe.Info(ctx, "replication")
	}
	_, _ = pipe.Exec(ctx) // each reply is read below
	// Both checks run (and warn), whatever the first one found.
	checked := b.checkEvictionPolicy(policy)
	b.serverChecked.Store((info == nil || b.checkReplicas(info)) && checked)
}

// checkEvictionPolicy warns when the maxmemory-policy the server
// reported can evict keys (allkeys-* and volatile-*), and reports whether
// the policy was checked.
func (b *Backend) checkEvictionPolicy(cmd *redis.MapStringStringCmd) bool {
	cfg, err := cmd.Result()
	if err != nil {
		return b.refused(err, "cannot read maxmemory-policy; eviction risk not checked")
	}
	if policy := cfg["maxmemory-policy"]; strings.HasPrefix(policy, "allkeys-") || strings.HasPrefix(policy, "volatile-") {
		b.warn(Warning{Code: WarnEvictionPolicy, Message: "maxmemory-policy is " + policy +
			": under memory pressure Redis may evict Simba's keys, so" +
			" a session can vanish while its holder still sees a valid term; use noeviction or a dedicated instance"})
	}
	return true
}

// checkReplicas warns when the server's INFO replication reports
// connected replicas, and reports whether it was checked.
func (b *Backend) checkReplicas(cmd *redis.StringCmd) bool {
	info, err := cmd.Result()
	if err != nil {
		return b.refused(err, "cannot read INFO replication; replicas not looked for")
	}
	if n := connectedReplicas(info); n > 0 {
		b.warn(Warning{Code: WarnReplicasWithoutWait, Message: fmt.Sprintf("the Redis primary has %d connected replica(s) and"+
			" Options.MinReplicas is 0: replication is asynchronous, so a failover can lose the latest acquires and"+
			" keep-alives and let another node win a lease whose holder still sees a valid term;"+
			" set MinReplicas (min_replicas=1 in the URL) to wait for replicas", n)})
	}
	return true
}

// refused reports whether err, the failure of a set-up command, is the
// server's refusal, which settles its check (logged as unchecked, what),
// rather than a network failure, which leaves it for later.
func (b *Backend) refused(err error, what string) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		b.log.Debug("simbaredis: "+what, "error", serverMessage(err))
		return true
	}
	return false
}

// connectedReplicas reads connected_slaves from the text of INFO
// replication; 0 when it is missing or not a number.
func connectedReplicas(info string) int {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
