package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestTopologyURLs: the Sentinel and Cluster forms give go-redis the
// sentinels or nodes of their host list (with the default port where a
// host names none), the master and database of the path, the primary's
// credentials from the user information and the sentinels' from their
// parameters, TLS for the rediss+ forms (checking each server's own
// name), and Simba's own parameters.
func TestTopologyURLs(t *testing.T) {
	t.Run("sentinel", func(t *testing.T) {
		tg, err := parseURL("redis+sentinel://app:pw%40x@s1:26380,s2,[::1]:26381/mymaster/3?sentinel_username=sen&sentinel_password=spw&dial_timeout=2s&min_replicas=1")
		if err != nil {
			t.Fatal(err)
		}
		o := tg.failover
		switch {
		case o == nil:
			t.Fatal("no failover options")
		case !slices.Equal(o.SentinelAddrs, []string{"s1:26380", "s2:26379", "[::1]:26381"}):
			t.Errorf("sentinels %v", o.SentinelAddrs)
		case o.MasterName != "mymaster" || o.DB != 3:
			t.Errorf("master %q db %d", o.MasterName, o.DB)
		case o.Username != "app" || o.Password != "pw@x" || o.SentinelUsername != "sen" || o.SentinelPassword != "spw":
			t.Errorf("credentials %q %q, sentinels' %q %q", o.Username, o.Password, o.SentinelUsername, o.SentinelPassword)
		case o.DialTimeout != 2*time.Second || o.TLSConfig != nil:
			t.Errorf("dial timeout %v, TLS %v", o.DialTimeout, o.TLSConfig)
		case tg.own.MinReplicas != 1:
			t.Errorf("Simba's options %+v", tg.own)
		}
		tg, err = parseURL("REDISS+SENTINEL://s1/m")
		if err != nil {
			t.Fatal(err)
		}
		if c := tg.failover.TLSConfig; c == nil || c.ServerName != "" || c.InsecureSkipVerify || tg.failover.DB != 0 {
			t.Errorf("rediss+sentinel: TLS %+v, db %d; want TLS checking each server's name", c, tg.failover.DB)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		tg, err := parseURL("redis+cluster://app:pw@n1:7000,n2,n3:7002/?read_timeout=1s")
		if err != nil {
			t.Fatal(err)
		}
		o := tg.cluster
		switch {
		case o == nil:
			t.Fatal("no cluster options")
		case !slices.Equal(o.Addrs, []string{"n1:7000", "n2:6379", "n3:7002"}):
			t.Errorf("nodes %v", o.Addrs)
		case o.Username != "app" || o.Password != "pw" || o.ReadTimeout != time.Second || o.TLSConfig != nil:
			t.Errorf("options %+v", o)
		}
		tg, err = parseURL("rediss+cluster://n1:7000,n2:7001")
		if err != nil {
			t.Fatal(err)
		}
		if c := tg.cluster.TLSConfig; c == nil || c.ServerName != "" {
			t.Errorf("rediss+cluster: TLS %+v; want TLS checking each node's name", c)
		}
	})
}

// TestTopologyURLsRefused: a Sentinel or Cluster URL that cannot be used
// as written fails Open and simba.OpenBackend at once, before any dial,
// with an error matching ErrInvalidOptions and simba.ErrInvalidURL that
// says what is wrong and shows no credential.
func TestTopologyURLsRefused(t *testing.T) {
	const s = backendtest.Secret
	for _, tt := range []struct{ url, says string }{
		{"redis+sentinel://:" + s + "@/mymaster", "no host"},
		{"redis+sentinel://u:" + s + "@", "no host"},
		{"redis+sentinel://:" + s + "@s1,,s2/m", "host 2 of 3 is empty"},
		{"redis+sentinel://:" + s + "@s1,/m", "host 2 of 2 is empty"},
		{"redis+sentinel://:" + s + "@s1:abc/m", `port "abc"`},
		{"redis+sentinel://:" + s + "@s1:1,s2:99999/m", `host 2 of 2 ("s2:99999"): port "99999"`},
		{"redis+sentinel://:" + s + "@s1:0/m", `port "0"`},
		{"redis+sentinel://:" + s + "@:26379/m", "no host before \":26379\""},
		{"redis+sentinel://:" + s + "@::1:26379/m", "in brackets"},
		{"redis+sentinel://:" + s + "@[::1/m", "no ']' after the IPv6 address"},
		{"redis+sentinel://:" + s + "@s1:26379", "no master name"},
		{"redis+sentinel://:" + s + "@s1:26379/", "no master name"},
		{"redis+sentinel://:" + s + "@s1/m/x", `database "x"`},
		{"redis+sentinel://:" + s + "@s1/m/-1", `database "-1"`},
		{"redis+sentinel://:" + s + "@s1/m/0/x", "a path of 3 parts"},
		{"redis+sentinel://:" + s + "@s1/m?bogus=1", "unexpected option: bogus"},
		{"redis+sentinel://:" + s + "@s1/m?master_name=other", "the parameter master_name"},
		{"redis+sentinel://s1/m?password=" + s, "the parameter password"},
		{"redis+sentinel://s1/m?addr=s2:1", "the parameter addr"},
		{"redis+sentinel://:" + s + "@s1/m?db=2", "the parameter db"},
		{"redis+sentinel://:" + s + "@s1/m?dial_timeout=soon", "dial_timeout"},
		{"redis+sentinel://:" + s + "@s1/m?min_replicas=x", "min_replicas"},
		{"redis+sentinel://:" + s + "@s1/m?replica_timeout=5ms", "ReplicaTimeout 5ms without MinReplicas"},
		{"redis+cluster://:" + s + "@", "no host"},
		{"redis+cluster://:" + s + "@n1:7000,n2:x", `port "x"`},
		{"redis+cluster://:" + s + "@n1:7000/0", "a cluster has no database"},
		{"redis+cluster://:" + s + "@n1?sentinel_password=" + s, "a sentinel parameter in a cluster URL"},
		{"redis+cluster://:" + s + "@n1?bogus=1", "unexpected option: bogus"},
		{"rediss+cluster://:" + s + "@n1?username=x", "the parameter username"},
		{"redis+cluster://u:" + s + "#frag@n1", "cannot tell its user information"},
		{"redis+sentinel://u:" + s + "/x@s1/m", "cannot tell its user information"},
		{"redis+cluster://u:%zz@n1", "a '%' not followed by two hexadecimal digits"},
	} {
		start := time.Now()
		_, err := Open(context.Background(), tt.url, Options{Logger: quiet})
		if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, simba.ErrInvalidURL) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Open(%q) = %v; want ErrInvalidOptions and simba.ErrInvalidURL saying %q", tt.url, err, tt.says)
		}
		if time.Since(start) > 100*time.Millisecond {
			t.Errorf("Open(%q) took %v: it should fail before any dial", tt.url, time.Since(start))
		}
		backendtest.NoSecret(t, fmt.Sprintf("Open(%q)", tt.url), err, s)
		_, err = simba.OpenBackend(context.Background(), tt.url)
		if !errors.Is(err, simba.ErrInvalidURL) {
			t.Errorf("simba.OpenBackend(%q) = %v; want simba.ErrInvalidURL", tt.url, err)
		}
		backendtest.NoSecret(t, fmt.Sprintf("simba.OpenBackend(%q)", tt.url), err, s)
	}
}

// TestTopologyURLsHideCredentials: the primary's password in the user
// information, the sentinels' in sentinel_password, or either in Options,
// shows nowhere when a Sentinel or Cluster URL cannot connect: not in the
// error of Open or simba.OpenBackend, in any fmt verb, nor in the log. The
// URL the error describes keeps its hosts and masks the credentials.
func TestTopologyURLsHideCredentials(t *testing.T) {
	serverURL(t)
	const s = backendtest.Secret
	for _, tt := range []struct {
		url      string
		pass     bool // the secret is in Options.Password
		sentinel bool // the secret is in Options.SentinelPassword
		want     string
	}{
		{url: "redis+sentinel://app:" + s + "@127.0.0.1:1,127.0.0.1:2/mymaster", want: "redis+sentinel://app:xxxxx@127.0.0.1:1,127.0.0.1:2/mymaster"},
		{url: "redis+sentinel://127.0.0.1:1/mymaster/2?sentinel_password=" + s, want: "redis+sentinel://127.0.0.1:1/mymaster/2?sentinel_password=xxxxx"},
		{url: "rediss+sentinel://u:" + s + "@127.0.0.1:1/m?sentinel_username=x&sentinel_password=" + s, want: "rediss+sentinel://u:xxxxx@127.0.0.1:1/m?sentinel_username=x&sentinel_password=xxxxx"},
		{url: "redis+sentinel://app@127.0.0.1:1/mymaster", pass: true, want: "redis+sentinel://app@127.0.0.1:1/mymaster"},
		{url: "redis+sentinel://127.0.0.1:1/mymaster", sentinel: true, want: "redis+sentinel://127.0.0.1:1/mymaster"},
		{url: "redis://127.0.0.1:1/0", sentinel: true, want: "Options.SentinelUsername or SentinelPassword with the URL redis://127.0.0.1:1/0, which names no sentinels"},
		{url: "redis+cluster://app:" + s + "@127.0.0.1:1,127.0.0.1:2", want: "redis+cluster://app:xxxxx@127.0.0.1:1,127.0.0.1:2"},
		{url: "rediss+cluster://:" + s + "@127.0.0.1:1?min_replicas=1", want: "rediss+cluster://:xxxxx@127.0.0.1:1?min_replicas=1"},
		{url: "redis+cluster://app@127.0.0.1:1", pass: true, want: "redis+cluster://app@127.0.0.1:1"},
	} {
		t.Run(tt.url, func(t *testing.T) {
			var logs backendtest.LogBuffer
			opts := Options{Logger: logs.Logger()}
			if tt.pass {
				opts.Password = s
			}
			if tt.sentinel {
				opts.SentinelPassword = s
			}
			var err error
			backendtest.OpenFailsHiding(t, fmt.Sprintf("Open(%q)", tt.url), 2*time.Second, func(ctx context.Context) (io.Closer, error) {
				ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				b, e := Open(ctx, tt.url, opts)
				err = e
				return b, e
			}, s)
			if err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open(%q) = %v; want it to describe the URL as %s", tt.url, err, tt.want)
			}
			if !tt.pass && !tt.sentinel {
				backendtest.OpenFailsHiding(t, fmt.Sprintf("simba.OpenBackend(%q)", tt.url), 2*time.Second, func(ctx context.Context) (io.Closer, error) {
					ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					defer cancel()
					return simba.OpenBackend(ctx, tt.url)
				}, s)
			}
			time.Sleep(20 * time.Millisecond) // go-redis reports some dial failures after Open returned
			backendtest.NoSecretIn(t, fmt.Sprintf("Open(%q): the log", tt.url), logs.String(), s)
		})
	}
}
