package memory

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// ErrClosed is matched by the error of every call on a [Conn] after
// [Conn.Close], and of the calls that were waiting on a fault when it was
// closed.
var ErrClosed = errors.New("memory: connection closed")

func init() {
	backendkit.Register(simba.RegisterBackend, Open, "memory")
}

// stores holds the stores of memory:// URLs by name, for the life of the
// process.
var stores = struct {
	sync.Mutex
	m map[string]*Server
}{m: make(map[string]*Server)}

// Open returns a new connection to the store that rawURL names:
// memory://NAME, or memory:// for the store of the empty name (a trailing
// "/" is allowed; the scheme matches in any case). Every Open of one name
// in one process connects to the same store, created by the first: two
// nodes that open memory://a share their leases. The stores belong to
// this process only and live as long as it does; nothing is shared with
// another process. Importing this package registers the scheme "memory"
// with [simba.OpenBackend], which calls Open.
//
// Open checks nothing beyond the URL, there being no server to reach; it
// fails when ctx is already done. A URL with user information, a port, a
// path, a query or a fragment is refused with an error that matches
// [simba.ErrInvalidURL] and quotes nothing of it. Close the connection
// with [Conn.Close].
func Open(ctx context.Context, rawURL string) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: open: %w", err)
	}
	name, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	stores.Lock()
	defer stores.Unlock()
	s := stores.m[name]
	if s == nil {
		s = New()
		stores.m[name] = s
	}
	return s.Connect(), nil
}

// parseURL returns the store name of a memory:// URL.
func parseURL(rawURL string) (string, error) {
	if _, err := backendkit.CheckScheme(rawURL, backendkit.URLForm("memory"), "memory"); err != nil {
		return "", &urlError{err.Error()}
	}
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return "", &urlError{"not a valid URL"}
	case u.User != nil:
		return "", &urlError{"user information is not allowed"}
	case u.Port() != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.Contains(rawURL, "#"):
		return "", &urlError{"want memory://NAME, without port, path, query or fragment"}
	}
	return u.Hostname(), nil
}

// urlError is a memory:// URL that cannot be used; it matches
// simba.ErrInvalidURL.
type urlError struct{ reason string }

func (e *urlError) Error() string { return "memory: invalid URL: " + e.reason }

func (e *urlError) Is(target error) bool { return target == simba.ErrInvalidURL }
