package simbaredis

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/simba-go/simba/core/backendkit"
)

// The URL schemes of Open beyond go-redis's redis and rediss: a set of
// sentinels that name the primary, or the nodes of a cluster, with TLS
// for the rediss+ forms.
const (
	schemeSentinel    = "redis+sentinel"
	schemeSentinelTLS = "rediss+sentinel"
	schemeCluster     = "redis+cluster"
	schemeClusterTLS  = "rediss+cluster"
)

// DefaultSentinelPort and DefaultClusterPort are the ports of a host of a
// redis+sentinel or redis+cluster URL that names none.
const (
	DefaultSentinelPort = 26379
	DefaultClusterPort  = 6379
)

// DefaultClusterKeyPrefix is the key prefix of a Backend that Open made
// from a redis+cluster URL when Options.KeyPrefix is empty: the default
// prefix with a hash tag, which a cluster needs.
const DefaultClusterKeyPrefix = "{simba}:"

// Query parameters of the sentinel form that go-redis's failover URL does
// not have: the sentinels' own credentials (the user information of the
// URL is the primary's).
const (
	paramSentinelUsername = "sentinel_username"
	paramSentinelPassword = "sentinel_password"
)

// target is what a URL tells Open to connect to: exactly one of the
// go-redis option sets, a description of the URL that is safe to print,
// the credentials it holds and the Options its Simba parameters set.
type target struct {
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
	where    string
	secrets  []string
	own      Options
}

// parseURL turns rawURL into what Open connects to: client options, a
// description of the server that is safe to print (the parsed URL with
// its credentials masked), the credentials it holds, and the Options its
// Simba parameters set. A host list is not a URL's host: a Sentinel or
// Cluster URL is checked as one URL with a placeholder in its place, so
// that a password whose unencoded characters moved part of it is refused
// before any part of the URL is quoted, and its hosts are split here.
func parseURL(rawURL string) (target, error) {
	var t target
	if err := backendkit.CheckBlank(rawURL); err != nil {
		return t, badURL(" %w: want %s", err, singleForm)
	}
	scheme, afterColon, found := strings.Cut(rawURL, ":")
	scheme = strings.ToLower(scheme)
	switch {
	case scheme == "redis", scheme == "rediss", scheme == "unix":
	case scheme == schemeSentinel, scheme == schemeSentinelTLS, scheme == schemeCluster, scheme == schemeClusterTLS:
		if !strings.HasPrefix(afterColon, "//") {
			return t, badURL(`: no "//" after "%s:"`, scheme)
		}
	case !found || !strings.HasPrefix(afterColon, "//") || !backendkit.ValidScheme(scheme):
		return t, badURL(" has no scheme: want %s", singleForm)
	default:
		return t, badURL(" scheme %q: want redis://, rediss://, redis+sentinel://, "+
			"rediss+sentinel://, redis+cluster://, rediss+cluster:// or unix://", scheme)
	}
	topology := strings.Contains(scheme, "+") // only the Sentinel and Cluster schemes come this far
	parsed, hosts := rawURL, ""
	if topology {
		rest := rawURL[len(scheme)+len("://"):]
		end := strings.IndexAny(rest+"/", "/?#")         // len(rest) when the host list ends the URL
		at := strings.LastIndexByte(rest[:end], '@') + 1 // 0 without user information
		hosts, parsed = rest[at:end], scheme+"://"+rest[:at]+"hosts"+rest[end:]
	}
	u, err := backendkit.ParseURL(parsed)
	if err != nil {
		return t, badURL(": %w; %s", err, urlHint)
	}
	if topology {
		u.Host = hosts
	}
	t.where, t.secrets = backendkit.RedactURL(u), backendkit.URLSecrets(u)
	own, query, err := simbaParams(u.RawQuery)
	if err != nil {
		return t, badURL(" %s: %w", t.where, err)
	}
	t.own = own
	if topology {
		return t, t.parseTopology(u, scheme, query)
	}
	if u.Scheme != "unix" {
		if _, _, err := backendkit.SplitAddress(u.Host, false); err != nil {
			return t, badURL(" %s: %w", t.where, err)
		}
	}
	if _, err := url.ParseQuery(query); err != nil {
		// go-redis would skip the pairs it cannot decode.
		return t, badURL(" %s: a query that is not valid", t.where)
	}
	if query != u.RawQuery {
		u.RawQuery, u.ForceQuery = query, false
		rawURL = u.String()
	}
	if t.single, err = redis.ParseURL(rawURL); err != nil {
		return t, badURL(" %s: %w", t.where, err)
	}
	return t, nil
}

// singleForm is the form of a URL of one Redis server, for messages.
const singleForm = "redis://[user:password@]host[:port][/db][?options]"

// badURL is the error of a URL Open cannot use: "redis URL" followed by
// format, matching ErrInvalidOptions and simba.ErrInvalidURL.
func badURL(format string, args ...any) error {
	return invalidURL(fmt.Errorf("%w: redis URL"+format, append([]any{ErrInvalidOptions}, args...)...))
}

// parseTopology reads a sentinel or cluster URL u of scheme, whose Host is
// the comma-separated host list, into t:
//
//	redis+sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[/db][?options]
//	redis+cluster://[user:password@]host[:port][,host[:port]...][?options]
//
// and the rediss+ forms for TLS. The user information authenticates the
// Redis servers that hold the data; sentinel_username and
// sentinel_password authenticate the sentinels. The other options (the
// raw query, without Simba's own) are those of go-redis's
// ParseFailoverURL and ParseClusterURL, except the ones the URL's own
// parts give (addr, master_name, db, username, password).
func (t *target) parseTopology(u *url.URL, scheme, rawQuery string) error {
	sentinel := strings.HasSuffix(scheme, "sentinel")
	bad := func(format string, args ...any) error {
		return badURL(" %s: %s; want %s", t.where, fmt.Sprintf(format, args...), backendkit.URLForm(scheme))
	}
	port := DefaultClusterPort
	if sentinel {
		port = DefaultSentinelPort
	}
	hosts, err := splitHosts(u.Host, port)
	if err != nil {
		return bad("%v", err)
	}
	path := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
	db := 0 // path: MASTER[/db] for a sentinel URL, nothing for a cluster
	switch {
	case !sentinel && len(path) > 0:
		return bad("a path: a cluster has no database and no master name")
	case sentinel && len(path) == 0:
		return bad("no master name")
	case len(path) > 2:
		return bad("a path of %d parts", len(path))
	case len(path) == 2:
		if db, err = strconv.Atoi(path[1]); err != nil || db < 0 {
			return bad("database %q is not a number", path[1])
		}
	}
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return bad("a query that is not valid")
	}
	for _, k := range []string{"addr", "master_name", "db", "username", "password"} {
		if query.Has(k) {
			return bad("the parameter %s: the URL's own parts give it", k)
		}
	}
	sentinelUser, sentinelPass := query.Get(paramSentinelUsername), query.Get(paramSentinelPassword)
	if !sentinel && (query.Has(paramSentinelUsername) || query.Has(paramSentinelPassword)) {
		return bad("a sentinel parameter in a cluster URL")
	}
	query.Del(paramSentinelUsername)
	query.Del(paramSentinelPassword)
	for _, h := range hosts[1:] {
		query.Add("addr", h)
	}
	base, _, _ := strings.Cut(scheme, "+") // redis or rediss
	user := u.User.Username()
	pass, _ := u.User.Password()
	if sentinel {
		query.Set("master_name", path[0])
		fo, err := redis.ParseFailoverURL(base + "://" + hosts[0] + "/" + strconv.Itoa(db) + "?" + query.Encode())
		if err != nil {
			return bad("%s", errText(err))
		}
		fo.Username, fo.Password = user, pass
		fo.SentinelUsername, fo.SentinelPassword = sentinelUser, sentinelPass
		fo.TLSConfig = anyServerName(fo.TLSConfig)
		t.failover = fo
		return nil
	}
	co, err := redis.ParseClusterURL(base + "://" + hosts[0] + "?" + query.Encode())
	if err != nil {
		return bad("%s", errText(err))
	}
	co.Username, co.Password = user, pass
	co.TLSConfig = anyServerName(co.TLSConfig)
	t.cluster = co
	return nil
}

// newClient makes the go-redis client of t, with the TLS settings and
// credentials of opts in place of the URL's when set, and calls bounded
// by their ctx.
func (t target) newClient(opts Options) redis.UniversalClient {
	switch {
	case t.failover != nil:
		o := t.failover
		opts.override(&o.TLSConfig, &o.Username, &o.Password)
		o.SentinelUsername = cmp.Or(opts.SentinelUsername, o.SentinelUsername)
		o.SentinelPassword = cmp.Or(opts.SentinelPassword, o.SentinelPassword)
		o.ContextTimeoutEnabled = true
		return redis.NewFailoverClient(o)
	case t.cluster != nil:
		o := t.cluster
		opts.override(&o.TLSConfig, &o.Username, &o.Password)
		o.ContextTimeoutEnabled = true
		return redis.NewClusterClient(o)
	}
	o := t.single
	opts.override(&o.TLSConfig, &o.Username, &o.Password)
	o.ContextTimeoutEnabled = true
	return redis.NewClient(o)
}

// override puts the TLS settings and credentials of opts, where set, in
// place of a client's options parsed from the URL.
func (o Options) override(cfg **tls.Config, username, password *string) {
	*cfg = cmp.Or(o.TLSConfig, *cfg)
	*username = cmp.Or(o.Username, *username)
	*password = cmp.Or(o.Password, *password)
}

// splitHosts splits a comma-separated host list into host:port
// addresses, with port for a host that names none.
func splitHosts(list string, port int) ([]string, error) {
	if list == "" {
		return nil, errors.New("no host")
	}
	var out []string
	parts := strings.Split(list, ",")
	for i, h := range parts {
		which := fmt.Sprintf("host %d of %d", i+1, len(parts))
		if h == "" {
			return nil, fmt.Errorf("%s is empty: no host", which)
		}
		host, p, err := backendkit.SplitAddress(h, false)
		if err != nil {
			return nil, fmt.Errorf("%s (%q): %w", which, h, err)
		}
		out = append(out, net.JoinHostPort(host, cmp.Or(p, strconv.Itoa(port))))
	}
	return out, nil
}

// anyServerName returns c for servers of several names: go-redis's URL
// parsers set ServerName to the first host, which every other sentinel,
// node or primary would fail; left empty, the TLS dial checks each
// server's certificate against the host it dials.
func anyServerName(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	c = c.Clone()
	c.ServerName = ""
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// errText is the text of a go-redis parse error without its "redis: "
// prefix.
func errText(err error) string {
	return strings.TrimPrefix(err.Error(), "redis: ")
}

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
