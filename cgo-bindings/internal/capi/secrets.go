package capi

import (
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/simba-go/simba/core/backendkit"
)

// The C API masks the credentials of every backend URL it was given in
// every message it returns, whatever the backend's driver quotes: the
// password of the userinfo (user:password@, also in a MySQL DSN's
// user:password@tcp(...)) and the value of every query parameter that
// names a credential (backendkit.IsCredentialParam: password=,
// sentinel_password=, pwd=, auth_token=, ...), raw and percent-decoded,
// when backendkit.Maskable takes it for a secret: a short or numeric value
// would mask addresses and ports. The backends mask them too; this is the
// last line.

var secrets = struct {
	sync.Mutex
	list []string
}{}

// urlSecrets returns the credentials raw carries, whether or not
// backendkit.Maskable would look for them.
func urlSecrets(raw string) []string {
	var found []string
	add := func(s string) {
		if s == "" {
			return
		}
		found = append(found, s)
		for _, unescape := range []func(string) (string, error){url.QueryUnescape, url.PathUnescape} {
			if d, err := unescape(s); err == nil && d != "" && !slices.Contains(found, d) {
				found = append(found, d)
			}
		}
	}
	rest := raw
	if _, after, ok := strings.Cut(rest, "://"); ok {
		rest = after
	}
	query := ""
	if before, after, ok := strings.Cut(rest, "?"); ok {
		rest, query = before, after
	}
	// The userinfo ends at the last @ before the path; a DSN's host may hold
	// a slash-free tcp(...) address.
	authority := rest
	if i := strings.Index(authority, "/"); i >= 0 && !strings.Contains(authority[:i], "(") {
		authority = authority[:i]
	} else if i := strings.LastIndex(authority, ")/"); i >= 0 {
		authority = authority[:i+1]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if _, pw, ok := strings.Cut(authority[:at], ":"); ok {
			add(pw)
		}
	}
	for _, kv := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(kv, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if backendkit.IsCredentialParam(k) {
			add(v)
		}
	}
	// A URL that parses: also each value as backendkit reads it (one that
	// runs past a ';').
	if u, err := url.Parse(raw); err == nil {
		for _, s := range backendkit.URLSecrets(u) {
			if !slices.Contains(found, s) {
				found = append(found, s)
			}
		}
	}
	return found
}

// rememberSecrets records the credentials of a backend URL that Redact
// looks for. They are kept for the life of the process: a message may
// quote them after the client closed.
func rememberSecrets(raw string) {
	found := slices.DeleteFunc(urlSecrets(raw), func(s string) bool { return !backendkit.Maskable(s) })
	if len(found) == 0 {
		return
	}
	secrets.Lock()
	defer secrets.Unlock()
	for _, s := range found {
		if !slices.Contains(secrets.list, s) {
			secrets.list = append(secrets.list, s)
		}
	}
}

// Redact masks in msg every credential of a backend URL the library was
// given, as backendkit.MaskText does.
func Redact(msg string) string {
	secrets.Lock()
	defer secrets.Unlock()
	return backendkit.MaskText(msg, secrets.list)
}
