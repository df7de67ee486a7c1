package main

import (
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/simba-go/simba/core/backendkit"
)

// span is the byte range [start, end) of a string.
type span struct{ start, end int }

// backendURL is a backend URL as its driver splits it, with the ranges
// that may hold a credential.
//
// The drivers split the user information off in two ways:
//
//   - url.Parse (redis://, rediss://, mysql://, memory://): the fragment
//     starts at the first '#', the query at the first '?', the host part
//     ends at the first '/', and the user information ends at the last '@'
//     of the host part. A password with an unencoded '/', '?' or '#' spills
//     out of the host part: in "redis://user:pa/ss@host/0" the host part is
//     "user:pa", and a driver would report "pa" as an invalid port.
//   - pgx, like libpq (postgres://, postgresql://): the user information
//     ends at the first '@' before the first '/'; '?' and '#' do not stop
//     it. A password with an unencoded '@' or '/' spills out: in
//     "postgres://u:pa@ss@h/db" the host is "ss@h".
//
// A URL with an '@' after the one its driver takes as the end of the user
// information (or with an '@' after the host part, when the driver finds
// none) is ambiguous: that '@' may end a password or be part of a host,
// path or query. simba hides everything from the scheme to the last '@' of
// such a URL and refuses to open it.
//
// zk:// URLs are split by simba itself: their user information, a digest
// identity taken literally, ends at the last '@' of the URL, so that it may
// hold any character; a chroot cannot hold '@'.
type backendURL struct {
	raw       string
	scheme    string // "" when raw has no valid scheme
	ambiguous bool   // an '@' where the user information may end, besides the one the driver takes
	secrets   []span // sorted, not overlapping
}

// parseBackendURL finds the scheme, the user information and the password
// parameters of raw. It never fails: what it cannot tell apart it counts
// as secret.
func parseBackendURL(raw string) backendURL {
	u := backendURL{raw: raw}
	var secrets []span
	scheme, rest, ok := strings.Cut(raw, "://")
	base := len(scheme) + len("://")
	if !ok || !backendkit.ValidScheme(scheme) {
		// No scheme: a DSN such as user:pass@tcp(host)/db or a keyword/value
		// string. Everything up to the last '@' may be credentials.
		rest, base = raw, 0
		if at := strings.LastIndexByte(raw, '@'); at >= 0 {
			secrets = append(secrets, span{0, at})
		}
	} else {
		u.scheme = scheme
		at := userinfoEnd(strings.ToLower(scheme), rest)
		last := strings.LastIndexByte(rest, '@')
		switch {
		case last > at:
			u.ambiguous = true
			secrets = append(secrets, span{base, base + last})
		case at >= 0:
			// USER[:PASSWORD]@: the user name ends at the first ':'.
			if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 {
				secrets = append(secrets, span{base + colon + 1, base + at})
			}
		}
	}
	// A password parameter: its value may hold '&', '#' or a space that
	// the drivers would cut at, so everything after its '=' is secret.
	if start := passwordValue(rest); start >= 0 {
		secrets = append(secrets, span{base + start, len(raw)})
	}
	u.secrets = mergeSpans(secrets)
	return u
}

// hostPartEnd returns, for an ambiguous URL with a single '@', the
// character before it ('/', or '?' or '#' but on PostgreSQL) at which the
// driver ends the host part, so that it never reaches the '@': the one
// that the user information must have percent-encoded. It returns 0 for a
// URL with more than one '@', or none.
func (u backendURL) hostPartEnd() byte {
	_, rest, ok := strings.Cut(u.raw, "://")
	if !ok || strings.Count(rest, "@") != 1 {
		return 0
	}
	stops := "/?#"
	if s := strings.ToLower(u.scheme); s == "postgres" || s == "postgresql" {
		stops = "/"
	}
	at := strings.IndexByte(rest, '@')
	if i := strings.IndexAny(rest[:at], stops); i >= 0 {
		return rest[i]
	}
	return 0
}

// userinfoEnd returns the offset of the '@' that ends the user information
// of rest (the URL after "scheme://") as the driver of scheme reads it, or
// -1 when it reads none.
func userinfoEnd(scheme, rest string) int {
	switch scheme {
	case "zk":
		return strings.LastIndexByte(rest, '@')
	case "postgres", "postgresql":
		if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
			return i
		}
		return -1
	default:
		hostEnd := len(rest)
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			hostEnd = i
		}
		return strings.LastIndexByte(rest[:hostEnd], '@')
	}
}

// passwordValue returns the offset in s of the value of the first
// parameter that names a credential (a name backendkit.IsCredentialParam
// accepts once percent-decoded, after the start, '?', '&', ';' or a space,
// and before '='), or -1. The name is decoded as the drivers decode it
// (pgx takes "pass%77ord" for "password"); a name that does not decode
// counts as a credential's.
func passwordValue(s string) int {
	for i := 0; i < len(s); i++ {
		if i > 0 && strings.IndexByte("?&; ", s[i-1]) < 0 {
			continue
		}
		end := strings.IndexAny(s[i:], "=?&; /:@#")
		if end <= 0 || s[i+end] != '=' {
			continue
		}
		name, err := url.QueryUnescape(s[i : i+end])
		if err != nil || backendkit.IsCredentialParam(name) {
			return i + end + 1
		}
	}
	return -1
}

// mergeSpans sorts spans and joins those that overlap or touch, dropping
// empty ones.
func mergeSpans(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var out []span
	for _, s := range spans {
		switch {
		case s.end <= s.start:
		case len(out) > 0 && s.start <= out[len(out)-1].end:
			out[len(out)-1].end = max(out[len(out)-1].end, s.end)
		default:
			out = append(out, s)
		}
	}
	return out
}

// redactedString is the URL with every secret range replaced.
func (u backendURL) redactedString() string {
	var b strings.Builder
	last := 0
	for _, s := range u.secrets {
		b.WriteString(u.raw[last:s.start])
		b.WriteString(backendkit.Mask)
		last = s.end
	}
	b.WriteString(u.raw[last:])
	return b.String()
}

// secretStrings returns the secrets of u as they may appear in a driver's
// message, for backendkit.MaskText and MaskError, which look only for
// those long enough to be one: as written, as a driver cuts a parameter's
// value, percent-decoded, and the password alone of a USER:PASSWORD range.
func (u backendURL) secretStrings() []string {
	var out []string
	for _, s := range u.secrets {
		v := u.raw[s.start:s.end]
		out = append(out, v)
		// A parameter's value as a driver cuts it.
		if i := strings.IndexAny(v, "&# "); i >= 0 {
			out = append(out, v[:i])
		}
		// The password alone, when the range holds USER:PASSWORD.
		_, pw, _ := strings.Cut(v, ":")
		for _, x := range []string{v, pw} {
			if d, err := url.PathUnescape(x); err == nil {
				out = append(out, d)
			}
			if d, err := url.QueryUnescape(x); err == nil {
				out = append(out, d)
			}
		}
		out = append(out, pw)
	}
	return out
}

// redactURL returns rawURL with its password, or whatever may be one,
// replaced by xxxxx: fit to print.
func redactURL(rawURL string) string {
	return parseBackendURL(rawURL).redactedString()
}

// scrubWriter writes to w with every secret replaced. Each Write must hold
// whole lines, as the records of a slog handler do.
type scrubWriter struct {
	w       io.Writer
	secrets []string
}

func (s scrubWriter) Write(p []byte) (int, error) {
	out := p
	if masked := backendkit.MaskText(string(p), s.secrets); masked != string(p) {
		out = []byte(masked)
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
