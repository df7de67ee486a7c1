package simbazk

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// Defaults of [Options].
const (
	DefaultRoot        = "/simba"
	DefaultDialTimeout = time.Second
)

// ErrInvalidOptions is matched (with errors.Is) by every *OptionsError.
var ErrInvalidOptions = errors.New("simbazk: invalid options")

// OptionsError reports an [Options] field, a server list, a connect string
// or a URL that cannot be used. Its message never contains a password.
type OptionsError struct {
	Field  string // e.g. "Root", "connect string", "URL"
	Reason string // what is wrong with it
}

func (e *OptionsError) Error() string { return "simbazk: options " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidOptions) true for every *OptionsError,
// and errors.Is(err, simba.ErrInvalidURL) for those about a connect string
// or a URL.
func (e *OptionsError) Is(target error) bool {
	switch target {
	case ErrInvalidOptions:
		return true
	case simba.ErrInvalidURL:
		return e.Field == "connect string" || e.Field == "URL"
	}
	return false
}

// Options configures a [Backend]. The zero value is usable: every field has
// a documented default.
//
// Options holds a password in Auth: its String and LogValue methods print
// "redacted" in its place, and the backend never logs it.
type Options struct {
	// Root is the absolute path under which Simba keeps its nodes: leases
	// under Root/leases, group members under Root/groups. Missing parents
	// are created on first use with ACL. It must not end with "/", contain
	// an empty, "." or ".." component, or lie under /zookeeper.
	// Default "/simba".
	Root string

	// Auth is a digest identity, "user:password", added to every
	// connection before it is used. Empty means no authentication.
	Auth string

	// ACL is set on every node Simba creates (Root and its parents
	// included). Default: when Auth is set, only the authenticated identity
	// may create, modify or delete Simba's nodes and everyone may read them
	// (auth:ALL plus world:anyone READ); without Auth, world:anyone ALL.
	ACL []zk.ACL

	// DialTimeout bounds each connection attempt to one server, TLS
	// handshake included, and each server's whole probe by Open (connection
	// and Zookeeper handshake). Default 1s.
	DialTimeout time.Duration

	// TLS, when not nil, wraps every connection in TLS with this
	// configuration (the server's secureClientPort). When ServerName is
	// empty, the host of the server address is used.
	TLS *tls.Config

	// Dialer, when not nil, opens the raw connections instead of a
	// net.Dialer (a proxy, a custom network). The context carries
	// DialTimeout. TLS, when set, is layered on top.
	Dialer func(ctx context.Context, network, address string) (net.Conn, error)

	// Logger receives the backend's records, all at debug level: session
	// state changes and the Zookeeper client's own messages, which are
	// routed here instead of the standard logger. Default slog.Default().
	Logger *slog.Logger
}

// String describes o with the password of Auth redacted.
func (o Options) String() string {
	return fmt.Sprintf("simbazk.Options{Root:%q Auth:%s ACL:%d entries DialTimeout:%v TLS:%t Dialer:%t}",
		o.Root, redact(o.Auth), len(o.ACL), o.DialTimeout, o.TLS != nil, o.Dialer != nil)
}

// GoString is String, so that %#v does not print the password either.
func (o Options) GoString() string { return o.String() }

// LogValue makes slog print o with the password of Auth redacted.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("root", o.Root),
		slog.String("auth", redact(o.Auth)),
		slog.Int("acl", len(o.ACL)),
		slog.Duration("dial_timeout", o.DialTimeout),
		slog.Bool("tls", o.TLS != nil),
	)
}

// redact keeps the user of a "user:password" identity; an identity
// without its ':' may be all password, and is printed as
// backendkit.Redacted prints one.
func redact(auth string) string {
	if user, _, ok := strings.Cut(auth, ":"); ok {
		return user + ":" + backendkit.Redacted(auth)
	}
	return backendkit.Redacted(auth)
}

// resolve fills the defaults in a copy of o and validates it.
func (o Options) resolve() (Options, error) {
	o.Root = cmp.Or(o.Root, DefaultRoot)
	if problem := rootProblem(o.Root); problem != "" {
		return o, &OptionsError{Field: "Root", Reason: problem}
	}
	if o.Auth != "" && !isDigestIdentity(o.Auth) {
		return o, &OptionsError{Field: "Auth", Reason: `want "user:password" with both parts non-empty`}
	}
	if o.DialTimeout < 0 {
		return o, &OptionsError{Field: "DialTimeout", Reason: fmt.Sprintf("%v is negative", o.DialTimeout)}
	}
	o.DialTimeout = cmp.Or(o.DialTimeout, DefaultDialTimeout)
	if o.ACL == nil {
		if o.Auth != "" {
			o.ACL = append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...)
		} else {
			o.ACL = zk.WorldACL(zk.PermAll)
		}
	}
	if len(o.ACL) == 0 {
		return o, &OptionsError{Field: "ACL", Reason: "empty: no identity could use the nodes (leave it nil for the default)"}
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o, nil
}

// isDigestIdentity reports whether auth is "user:password" with both
// parts non-empty.
func isDigestIdentity(auth string) bool {
	user, pass, ok := strings.Cut(auth, ":")
	return ok && user != "" && pass != ""
}

// rootProblem says why root is not an absolute Zookeeper path Simba may
// own, quoting it; "" when it is one.
func rootProblem(root string) string {
	bad := func(reason string) string { return fmt.Sprintf("%q: %s", root, reason) }
	switch {
	case !strings.HasPrefix(root, "/"):
		return bad("must start with /")
	case root == "/":
		return bad(`must name a node below "/"`)
	case strings.HasSuffix(root, "/"):
		return bad("must not end with /")
	case root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/"):
		return bad("/zookeeper is reserved by the server")
	}
	for _, c := range strings.Split(root[1:], "/") {
		switch c {
		case "":
			return bad("empty path component")
		case ".", "..":
			return bad(`"." and ".." are not valid path components`)
		}
		for _, r := range c {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
				return bad(fmt.Sprintf("character %U is not allowed in a Zookeeper path", r))
			}
		}
	}
	return ""
}

// ParseConnectString splits a Zookeeper connect string,
// "host:port,host:port[/chroot]", into its server list and its chroot
// ("" when absent). Each server needs a host and a port from 1 to 65535;
// an empty or blank string, a bad address and a URL (zk://..., which
// [ParseURL] splits) are refused with an *OptionsError that names the
// problem and quotes no URL.
func ParseConnectString(s string) (servers []string, chroot string, err error) {
	servers, chroot, problem := splitConnect(s)
	if problem != "" {
		return nil, "", &OptionsError{Field: "connect string", Reason: problem}
	}
	return servers, chroot, nil
}

// splitConnect is ParseConnectString, with its problem in words.
func splitConnect(s string) (servers []string, chroot, problem string) {
	if err := backendkit.CheckBlank(s); err != nil {
		return nil, "", err.Error() + ": want HOST:PORT[,HOST:PORT...][/CHROOT]"
	}
	if strings.Contains(s, "://") {
		return nil, "", "a URL, not HOST:PORT[,HOST:PORT...][/CHROOT]: give a zk:// URL to ParseURL or simba.OpenBackend"
	}
	hosts := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], s[i:]
		if chroot == "/" {
			chroot = ""
		} else if problem := rootProblem(chroot); problem != "" {
			return nil, "", "chroot " + problem
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			servers = append(servers, h)
		}
	}
	if len(servers) == 0 {
		return nil, "", fmt.Sprintf("%q names no server", s)
	}
	for _, h := range servers {
		if strings.ContainsRune(h, '@') {
			// USER:PASSWORD@HOST written where a connect string goes:
			// quoting the server would print the password.
			return nil, "", "a server with user information (USER:PASSWORD@HOST): a connect string carries no credentials; set Options.Auth, or give a zk:// URL"
		}
		if _, _, err := backendkit.SplitAddress(h, true); err != nil {
			return nil, "", fmt.Sprintf("server %q: %v", h, err)
		}
	}
	return servers, chroot, ""
}
