package simbaredis

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The query parameters Open takes for itself, before go-redis reads the
// rest of the URL (which refuses any parameter it does not know).
const (
	paramMinReplicas    = "min_replicas"    // Options.MinReplicas
	paramReplicaTimeout = "replica_timeout" // Options.ReplicaTimeout, a Go duration
)

// simbaParams reads Simba's own parameters of a raw URL query into
// Options and returns the query without them, the other pairs as written.
// Each may appear once.
func simbaParams(rawQuery string) (Options, string, error) {
	var o Options
	var kept []string
	seen := map[string]bool{}
	for pair := range strings.SplitSeq(rawQuery, "&") {
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, kerr := url.QueryUnescape(rawKey)
		if kerr != nil || (key != paramMinReplicas && key != paramReplicaTimeout) {
			if pair != "" {
				kept = append(kept, pair)
			}
			continue
		}
		if seen[key] {
			return o, "", fmt.Errorf("%s given twice", key)
		}
		seen[key] = true
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return o, "", fmt.Errorf("%s: not a valid query value", key)
		}
		switch key {
		case paramMinReplicas:
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return o, "", fmt.Errorf("%s=%q: want a number of replicas, 0 or more", key, value)
			}
			o.MinReplicas = n
		case paramReplicaTimeout:
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return o, "", fmt.Errorf("%s=%q: want a positive duration such as 50ms", key, value)
			}
			o.ReplicaTimeout = d
		}
	}
	return o, strings.Join(kept, "&"), nil
}
