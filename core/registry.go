package simba

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/simba-go/simba/core/backendkit"
)

// BackendOpener opens a backend from a URL of a scheme it registered. It
// gets the URL exactly as given to [OpenBackend], with the scheme in any
// case. It must return within ctx (or fail), never return a nil backend
// with a nil error, and never put a password of the URL into an error.
// Errors about the URL itself (its form, an unknown parameter) should
// match [ErrInvalidURL].
type BackendOpener func(ctx context.Context, rawURL string) (OpenedBackend, error)

var (
	// ErrUnknownScheme is matched by the error of [OpenBackend] for a URL
	// whose scheme no imported backend registered; the error is a
	// *[SchemeError].
	ErrUnknownScheme = errors.New("simba: unknown backend URL scheme")

	// ErrInvalidURL is matched by the errors of [OpenBackend] about a URL
	// that cannot be used as written: no scheme (a *[SchemeError]), or a
	// form its backend refuses. Such errors never contain the URL's user
	// information.
	ErrInvalidURL = errors.New("simba: invalid backend URL")
)

// SchemeError is the error of [OpenBackend] for a URL whose scheme it
// cannot open: a URL without a valid "scheme://" prefix (it matches
// [ErrInvalidURL]), or a scheme no imported backend registered (it matches
// [ErrUnknownScheme]). Its message lists the registered schemes and, for a
// scheme of this project, the package to import; it never quotes more of
// the URL than its scheme.
type SchemeError struct {
	// Scheme is the URL's scheme in lower case, "" when the URL has none.
	Scheme string
	// Registered lists the schemes registered when the error was made,
	// sorted.
	Registered []string

	blank string // what is wrong with a blank URL: "is empty", "is only spaces", ...
}

func (e *SchemeError) Error() string {
	var b strings.Builder
	switch {
	case e.blank != "":
		b.WriteString("simba: backend URL " + e.blank + ": want SCHEME://...")
	case e.Scheme == "":
		b.WriteString("simba: backend URL has no scheme: want SCHEME://...")
	default:
		fmt.Fprintf(&b, "simba: unknown backend URL scheme %q", e.Scheme)
		if pkg := backendkit.SchemePackage(e.Scheme); pkg != "" {
			fmt.Fprintf(&b, ": import %s to open it", pkg)
		}
	}
	if len(e.Registered) == 0 {
		b.WriteString(" (no backend is registered: import a backend package")
	} else {
		b.WriteString(" (registered: " + strings.Join(e.Registered, ", "))
	}
	b.WriteString(")")
	return b.String()
}

// Is makes errors.Is match ErrInvalidURL for a URL without a scheme and
// ErrUnknownScheme otherwise.
func (e *SchemeError) Is(target error) bool {
	if e.Scheme == "" {
		return target == ErrInvalidURL
	}
	return target == ErrUnknownScheme
}

var backends = struct {
	sync.RWMutex
	openers map[string]BackendOpener
}{openers: make(map[string]BackendOpener)}

// RegisterBackend makes [OpenBackend] open the URLs of scheme with open.
// Backend packages call it from an init function; schemes match without
// regard to case. It panics, like sql.Register, when scheme is not a valid
// URL scheme (a letter, then letters, digits, '+', '-' or '.'), when open
// is nil, or when scheme is already registered: two packages claiming one
// scheme is a build mistake to catch at start-up.
func RegisterBackend(scheme string, open BackendOpener) {
	if !backendkit.ValidScheme(scheme) {
		panic(fmt.Sprintf("simba: RegisterBackend: invalid scheme %q", scheme))
	}
	if open == nil {
		panic("simba: RegisterBackend: nil opener for scheme " + scheme)
	}
	key := strings.ToLower(scheme)
	backends.Lock()
	defer backends.Unlock()
	if _, dup := backends.openers[key]; dup {
		panic("simba: RegisterBackend called twice for scheme " + key)
	}
	backends.openers[key] = open
}

// BackendSchemes returns the registered schemes, in lower case and sorted.
func BackendSchemes() []string {
	backends.RLock()
	defer backends.RUnlock()
	schemes := make([]string, 0, len(backends.openers))
	for s := range backends.openers {
		schemes = append(schemes, s)
	}
	slices.Sort(schemes)
	return schemes
}

// OpenBackend opens the backend of rawURL with the opener registered for
// its scheme. The caller owns the result and closes it after the clients
// that use it.
//
// A backend package registers its schemes when it is imported, like a
// database/sql driver: importing github.com/simba-go/simba/backend-redis,
// for its API or as import _ "github.com/simba-go/simba/backend-redis",
// makes OpenBackend open redis:// and rediss:// URLs. This package imports
// no backend, so a program links only the drivers it imports. The backends
// of this project, their URLs and the package that registers them:
//
//	memory://NAME                                 github.com/simba-go/simba/core/memory
//	redis://..., rediss://...                     github.com/simba-go/simba/backend-redis
//	postgres://..., postgresql://...              github.com/simba-go/simba/backend-jdbc/postgres
//	mysql://...                                   github.com/simba-go/simba/backend-jdbc/mysql
//	zk://[USER:PASSWORD@]HOST:PORT[,...][/CHROOT] github.com/simba-go/simba/backend-zk
//
// Each package documents its URL form and what its opener checks.
//
// ctx bounds the opening: every backend of this project checks that its
// server answers before it returns, and fails when ctx ends first.
// Cancelling ctx after OpenBackend returned has no effect on the backend.
//
// A URL without a valid "scheme://" prefix, or of a scheme nobody
// registered, gives a *[SchemeError] (matching [ErrInvalidURL] or
// [ErrUnknownScheme]) that quotes nothing of the URL but its scheme. So
// does a URL that is empty, only white space, or starts or ends with
// white space (an unset or badly quoted variable), named as such.
// Other errors are the opener's, as it returned them: a backend's errors
// never contain the URL's password, and those about the URL itself match
// [ErrInvalidURL].
func OpenBackend(ctx context.Context, rawURL string) (OpenedBackend, error) {
	if err := backendkit.CheckBlank(rawURL); err != nil {
		return nil, &SchemeError{Registered: BackendSchemes(), blank: err.Error()}
	}
	scheme, ok := urlScheme(rawURL)
	if !ok {
		return nil, &SchemeError{Registered: BackendSchemes()}
	}
	backends.RLock()
	open := backends.openers[scheme]
	backends.RUnlock()
	if open == nil {
		return nil, &SchemeError{Scheme: scheme, Registered: BackendSchemes()}
	}
	b, err := open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("simba: the opener of scheme %s returned no backend and no error", scheme)
	}
	return b, nil
}

// urlScheme returns the scheme of rawURL in lower case, when rawURL starts
// with a valid scheme followed by "://". Nothing before "://" can be user
// information then: a scheme holds no ':' nor '@'.
func urlScheme(rawURL string) (string, bool) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || !backendkit.ValidScheme(scheme) {
		return "", false
	}
	return strings.ToLower(scheme), true
}
