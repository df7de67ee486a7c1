package backendkit

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Mask stands for a credential in whatever a backend prints. It is
// shorter than [MinMaskedLen], so that masking text never makes a new
// secret of it.
const Mask = "xxxxx"

// MinMaskedLen is the length in bytes of the shortest credential that
// [MaskText] looks for in free text; see [Maskable].
const MinMaskedLen = 6

// credentialSuffixes are the endings of a normalised parameter name (see
// IsCredentialParam) that hold a credential: the drivers' own (password,
// sslpassword), the spellings of Redis deployments (requirepass,
// sentinel_password, masterauth), and the usual names of tokens and keys.
var credentialSuffixes = []string{
	"password", "passwd", "pwd", "pass", "passphrase",
	"secret", "secrets", "token", "credential", "credentials",
	"auth", "bearer", "apikey", "accesskey", "secretkey", "privatekey",
}

// flagPrefixes start the names of settings about credentials whose
// values are switches or methods, never secrets: go-sql-driver/mysql's
// allowCleartextPasswords, allowNativePasswords, allowOldPasswords, and the
// enable_, disable_ and skip_ flags of other tools.
var flagPrefixes = []string{"allow", "enable", "disable", "skip"}

// flagNames are normalised names that end like a credential and are not:
// libpq's and pgx's require_auth, whose value lists the methods the server
// may ask for (password, md5, scram-sha-256, none).
var flagNames = []string{"requireauth"}

// IsCredentialParam reports whether a URL query parameter or a DSN
// keyword named name holds a credential. The name is compared lower-cased
// and without '_', '-' and '.' (sentinel_password, sentinelPassword and
// sentinel-password are one name); it holds a credential when it is, or
// ends in, password, passwd, pwd, pass, passphrase, secret(s), token,
// credential(s), auth, bearer, apikey, accesskey, secretkey or privatekey
// (auth_token, client_secret, x_auth, oauth_bearer ...), unless it starts
// with allow, enable, disable or skip, ends in bypass, or is require_auth:
// those are switches about credentials. A name that only holds such a word
// elsewhere (authSource, authMechanism, validate_password.policy,
// passfile, token_ttl) names no secret.
func IsCredentialParam(name string) bool {
	n := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == '.' {
			return -1
		}
		return r
	}, strings.ToLower(name))
	if slices.Contains(flagNames, n) || strings.HasSuffix(n, "bypass") ||
		slices.ContainsFunc(flagPrefixes, func(p string) bool { return strings.HasPrefix(n, p) }) {
		return false
	}
	return slices.ContainsFunc(credentialSuffixes, func(s string) bool { return strings.HasSuffix(n, s) })
}

// queryPairs splits a raw query at '&', as url.ParseQuery does, and
// calls f with each pair as written and the offset in it of the credential
// it holds, or -1: of its first part, between ';', that is a credential
// parameter followed by '='. url.ParseQuery drops a pair holding ';',
// and older parsers split it there, so whoever wrote one may have meant
// either; a credential's value may run to the end of the pair.
func queryPairs(rawQuery string, f func(pair string, cred int)) {
	if rawQuery == "" {
		return
	}
	for pair := range strings.SplitSeq(rawQuery, "&") {
		f(pair, credentialPart(pair))
	}
}

// credentialPart returns the offset of the first part of pair, split at
// ';', that is a credential parameter followed by '=', or -1.
func credentialPart(pair string) int {
	off := 0
	for part := range strings.SplitSeq(pair, ";") {
		if key, _, ok := strings.Cut(part, "="); ok && IsCredentialParam(unescapeKey(key)) {
			return off
		}
		off += len(part) + 1
	}
	return -1
}

func unescapeKey(raw string) string {
	if k, err := url.QueryUnescape(raw); err == nil {
		return k
	}
	return raw
}

// RedactURL returns u fit to print: the password of its user information
// and the value of every credential parameter of its query
// ([IsCredentialParam]) replaced by [Mask], however short; that value
// runs to the '&' that ends its pair, a ';' does not end it. Everything
// else of the query is printed byte for byte as written; the rest of u as
// [url.URL.String] prints it. The fragment is left out: it means nothing
// to a backend, and a password holding an unencoded '#' would have put its
// tail there. A credential parameter without a value ("password" or
// "password=") is printed as it is.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	var b strings.Builder
	first := true
	queryPairs(u.RawQuery, func(pair string, cred int) {
		if !first {
			b.WriteByte('&')
		}
		first = false
		if cred < 0 {
			b.WriteString(pair)
			return
		}
		key, value, _ := strings.Cut(pair[cred:], "=")
		if value == "" {
			b.WriteString(pair)
			return
		}
		b.WriteString(pair[:cred] + key + "=" + Mask)
	})
	c.RawQuery = b.String()
	c.Fragment, c.RawFragment = "", ""
	return c.Redacted()
}

// URLSecrets returns the credentials u holds, for [MaskText] and
// [MaskError]: the password of its user information and the value of every
// credential parameter, each as written and percent-decoded, without
// duplicates or empty strings. A value that a ';' may end is returned
// whole and up to that ';', and so is the value of every credential
// parameter that follows a ';' in the same pair (password=a;password=b),
// which a parser that splits there reads.
func URLSecrets(u *url.URL) []string {
	if u == nil {
		return nil
	}
	var out []string
	add := func(raw string) {
		vals := []string{raw}
		if v, err := url.QueryUnescape(raw); err == nil {
			vals = append(vals, v)
		}
		for _, v := range vals {
			if v != "" && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	queryPairs(u.RawQuery, func(pair string, cred int) {
		if cred < 0 {
			return
		}
		// A parser that splits the pair at ';' reads the value of every
		// credential part (password=a;password=b, password=a;token=b).
		for rest := pair[cred:]; ; {
			_, value, _ := strings.Cut(rest, "=")
			add(value)
			before, after, cut := strings.Cut(value, ";")
			if !cut {
				break
			}
			add(before)
			next := credentialPart(after)
			if next < 0 {
				break
			}
			rest = after[next:]
		}
	})
	return out
}

// Maskable reports whether [MaskText] looks for secret in free text: when
// it has at least [MinMaskedLen] bytes and is not a decimal number. A
// shorter or numeric value ("1", "true", "md5", "admin", "5432") would be
// found in addresses, ports, counts and words that are no secret, and
// masking them there makes a message unreadable; such a value is hidden
// only where the backend prints it structurally ([RedactURL]).
func Maskable(secret string) bool {
	return len(secret) >= MinMaskedLen && !isDecimal(secret)
}

// isDecimal reports whether s is an optional sign, digits and at most one
// '.' among them.
func isDecimal(s string) bool {
	s = strings.TrimLeft(s, "+-")
	digits, dots := 0, 0
	for _, r := range s {
		switch {
		case '0' <= r && r <= '9':
			digits++
		case r == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// maskForms returns the ways a text may quote the maskable secrets: as
// they are and percent-encoded as a query, a path or user information
// would hold them, longest first, so that a secret holding another is
// masked whole.
func maskForms(secrets []string) []string {
	var forms []string
	for _, s := range secrets {
		if !Maskable(s) {
			continue
		}
		for _, f := range []string{s, url.QueryEscape(s), url.PathEscape(s), url.User(s).String()} {
			if !slices.Contains(forms, f) {
				forms = append(forms, f)
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return forms
}

// MaskText returns text with every [Maskable] secret of secrets, as it is
// or percent-encoded, replaced by [Mask]; the others are not looked for.
// No maskable secret shows in what it returns, also where replacing one
// secret would have joined the pieces of another.
func MaskText(text string, secrets []string) string {
	return maskWith(text, maskForms(secrets))
}

func maskWith(text string, forms []string) string {
	if len(forms) == 0 {
		return text
	}
	// Every replacement shortens the text (a form is longer than Mask), so
	// the passes end.
	for {
		masked := text
		for _, f := range forms {
			masked = strings.ReplaceAll(masked, f, Mask)
		}
		if masked == text {
			return text
		}
		text = masked
	}
}

// MaskError returns err when nothing it or its chain shows (Error, %+v,
// %#v) holds a [Maskable] secret of secrets, and otherwise an error whose
// every text is masked as [MaskText] does. Its chain holds err's: each
// error of it as it is when it shows no secret, and masked the same way
// when it does, so errors.Is finds every sentinel and errors.As every
// value that shows no secret; the masked error prints with %#v only its
// masked message.
func MaskError(err error, secrets []string) error {
	forms := maskForms(secrets)
	if err == nil || len(forms) == 0 || !showsSecret(err, forms) {
		return err
	}
	return &maskedError{err: err, forms: forms}
}

// showsSecret reports whether a text err or an error of its chain shows
// holds one of forms.
func showsSecret(err error, forms []string) bool {
	for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if maskWith(text, forms) != text {
			return true
		}
	}
	return slices.ContainsFunc(unwrapped(err), func(e error) bool { return e != nil && showsSecret(e, forms) })
}

// unwrapped returns the errors err wraps, one or several.
func unwrapped(err error) []error {
	switch u := err.(type) { //nolint:errorlint // one level of the chain, walked by the callers
	case interface{ Unwrap() error }:
		if x := u.Unwrap(); x != nil {
			return []error{x}
		}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

// maskedError shows err with the secrets masked; see MaskError.
type maskedError struct {
	err   error
	forms []string // from maskForms
}

func (e *maskedError) Error() string { return maskWith(e.err.Error(), e.forms) }

// GoString keeps %#v from printing the fields, the secrets included.
func (e *maskedError) GoString() string {
	return "backendkit.maskedError(" + strconv.Quote(e.Error()) + ")"
}

// Is reports whether err's chain matches target: a yes or no shows
// nothing of it.
func (e *maskedError) Is(target error) bool { return errors.Is(e.err, target) }

func (e *maskedError) Unwrap() []error {
	inner := unwrapped(e.err)
	out := make([]error, 0, len(inner))
	for _, x := range inner {
		if x == nil {
			continue
		}
		if showsSecret(x, e.forms) {
			x = &maskedError{err: x, forms: e.forms}
		}
		out = append(out, x)
	}
	return out
}
