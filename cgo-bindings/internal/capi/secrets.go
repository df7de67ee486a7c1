package capi

import (
	"net/url"
	"sort"
	"strings"
	"sync"
)

// The C API masks the credentials of every backend URL it was given in
// every message it returns, whatever the backend's driver quotes: the
// password of the userinfo (user:password@, also in a MySQL DSN's
// user:password@tcp(...)) and the value of every query parameter whose
// name speaks of a secret (password=, sentinel_password=, ...), raw and
// percent-decoded. The backends mask them too; this is the last line.

const masked = "xxxxx"

var secrets = struct {
	sync.Mutex
	list []string // longest first, so that a secret inside another is masked whole
}{}

// secretKey reports whether a query parameter's name names a credential.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"pass", "secret", "token", "credential", "auth"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// urlSecrets returns the credentials raw carries.
func urlSecrets(raw string) []string {
	var found []string
	add := func(s string) {
		if s == "" {
			return
		}
		found = append(found, s)
		for _, unescape := range []func(string) (string, error){url.QueryUnescape, url.PathUnescape} {
			if d, err := unescape(s); err == nil && d != "" && !contains(found, d) {
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
		if secretKey(k) {
			add(v)
		}
	}
	return found
}

// rememberSecrets records the credentials of a backend URL, for Redact.
// They are kept for the life of the process: a message may quote them
// after the client closed.
func rememberSecrets(raw string) {
	found := urlSecrets(raw)
	if len(found) == 0 {
		return
	}
	secrets.Lock()
	defer secrets.Unlock()
	for _, s := range found {
		if !contains(secrets.list, s) {
			secrets.list = append(secrets.list, s)
		}
	}
	sort.Slice(secrets.list, func(i, j int) bool { return len(secrets.list[i]) > len(secrets.list[j]) })
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Redact masks in msg every credential of a backend URL the library was
// given.
func Redact(msg string) string {
	secrets.Lock()
	defer secrets.Unlock()
	for _, s := range secrets.list {
		msg = strings.ReplaceAll(msg, s, masked)
	}
	return msg
}
