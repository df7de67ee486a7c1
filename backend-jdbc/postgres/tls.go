package simbapg

import (
	"crypto/tls"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// useTLS makes every connection attempt of cfg use TLS with c, its
// ServerName, when empty, being the host the attempt dials (as sslmode
// verify-full would). pgx makes a TLS attempt and a plain one per host for
// the default sslmode, prefer: with one TLS configuration the two are the
// same, so one attempt per host:port is kept, and a refused one is
// reported once.
func useTLS(cfg *pgconn.Config, c *tls.Config) {
	seen := map[string]bool{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))): true}
	cfg.TLSConfig = tlsFor(c, cfg.Host)
	kept := cfg.Fallbacks[:0]
	for _, fb := range cfg.Fallbacks {
		addr := net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port)))
		if seen[addr] {
			continue
		}
		seen[addr] = true
		fb.TLSConfig = tlsFor(c, fb.Host)
		kept = append(kept, fb)
	}
	cfg.Fallbacks = kept
}

// tlsFor is a copy of c for a connection to host, with host as its
// ServerName when c names none and verifies the server.
func tlsFor(c *tls.Config, host string) *tls.Config {
	c = c.Clone()
	if c.ServerName == "" && !c.InsecureSkipVerify && !strings.HasPrefix(host, "/") {
		c.ServerName = host
	}
	return c
}
