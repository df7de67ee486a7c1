package simbaredis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

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

// parseTopologyURL parses a sentinel or cluster URL:
//
//	redis+sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[/db][?options]
//	redis+cluster://[user:password@]host[:port][,host[:port]...][?options]
//
// and the rediss+ forms for TLS. The user information authenticates the
// Redis servers that hold the data; sentinel_username and
// sentinel_password authenticate the sentinels. The other options are
// those of go-redis's ParseFailoverURL and ParseClusterURL, except the
// ones the URL's own parts give (addr, master_name, db, username,
// password). Host lists are split here: url.Parse takes one host.
func parseTopologyURL(rawURL, scheme string) (target, error) {
	var t target
	form := "redis+sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[/db][?options]"
	if strings.HasSuffix(scheme, "cluster") {
		form = "redis+cluster://[user:password@]host[:port][,host[:port]...][?options]"
	}
	rest := rawURL[len(scheme)+len("://"):]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	userinfo, hostList := "", authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, hostList = authority[:at+1], authority[at+1:]
	}
	// The rest is checked as one URL would be, with a placeholder host:
	// a password whose unencoded characters moved part of it is refused
	// before any part of the URL is quoted.
	u, err := parseRedisURL(scheme + "://" + userinfo + "hosts" + rest[end:])
	if err != nil {
		return t, err
	}
	u.Host = hostList
	t.where, t.secrets = backendkit.RedactURL(u), backendkit.URLSecrets(u)
	bad := func(format string, args ...any) error {
		return invalidURL(fmt.Errorf("%w: redis URL %s: %s; want %s", ErrInvalidOptions, t.where, fmt.Sprintf(format, args...), form))
	}

	port := DefaultClusterPort
	if strings.HasSuffix(scheme, "sentinel") {
		port = DefaultSentinelPort
	}
	hosts, err := splitHosts(hostList, port)
	if err != nil {
		return t, bad("%v", err)
	}

	var path []string
	for p := range strings.SplitSeq(strings.Trim(u.Path, "/"), "/") {
		if p != "" {
			path = append(path, p)
		}
	}
	master, db := "", 0
	if strings.HasSuffix(scheme, "sentinel") {
		if len(path) == 0 {
			return t, bad("no master name")
		}
		if len(path) > 2 {
			return t, bad("a path of %d parts", len(path))
		}
		master = path[0]
		if len(path) == 2 {
			if db, err = strconv.Atoi(path[1]); err != nil || db < 0 {
				return t, bad("database %q is not a number", path[1])
			}
		}
	} else if len(path) > 0 {
		return t, bad("a path: a cluster has no database and no master name")
	}

	own, rawQuery, err := simbaParams(u.RawQuery)
	if err != nil {
		return t, bad("%v", err)
	}
	t.own = own
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return t, bad("a query that is not valid")
	}
	for _, k := range []string{"addr", "master_name", "db", "username", "password"} {
		if query.Has(k) {
			return t, bad("the parameter %s: the URL's own parts give it", k)
		}
	}
	sentinelUser, sentinelPass := query.Get(paramSentinelUsername), query.Get(paramSentinelPassword)
	if strings.HasSuffix(scheme, "cluster") && (query.Has(paramSentinelUsername) || query.Has(paramSentinelPassword)) {
		return t, bad("a sentinel parameter in a cluster URL")
	}
	query.Del(paramSentinelUsername)
	query.Del(paramSentinelPassword)
	for _, h := range hosts[1:] {
		query.Add("addr", h)
	}
	base := "redis"
	if strings.HasPrefix(scheme, "rediss") {
		base = "rediss"
	}
	user, pass := "", ""
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}

	if strings.HasSuffix(scheme, "sentinel") {
		query.Set("master_name", master)
		fo, err := redis.ParseFailoverURL(base + "://" + hosts[0] + "/" + strconv.Itoa(db) + "?" + query.Encode())
		if err != nil {
			return t, bad("%s", errText(err))
		}
		fo.Username, fo.Password = user, pass
		fo.SentinelUsername, fo.SentinelPassword = sentinelUser, sentinelPass
		fo.TLSConfig = anyServerName(fo.TLSConfig)
		t.failover = fo
		return t, nil
	}
	co, err := redis.ParseClusterURL(base + "://" + hosts[0] + "?" + query.Encode())
	if err != nil {
		return t, bad("%s", errText(err))
	}
	co.Username, co.Password = user, pass
	co.TLSConfig = anyServerName(co.TLSConfig)
	t.cluster = co
	return t, nil
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
		if p == "" {
			p = strconv.Itoa(port)
		}
		out = append(out, net.JoinHostPort(host, p))
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
