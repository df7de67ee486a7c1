package simbazk

import (
	"context"
	"fmt"
	"net"
	"strings"

	simba "github.com/simba-go/simba/core"
)

func init() {
	simba.RegisterBackend("zk", openURL)
}

// openURL opens a zk:// URL for simba.OpenBackend.
func openURL(ctx context.Context, rawURL string) (simba.OpenedBackend, error) {
	connect, auth, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	b, err := Open(ctx, connect, Options{Auth: auth})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ParseURL splits a Zookeeper URL,
//
//	zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/CHROOT]
//
// into the connect string of [Open] ("HOST:PORT,...[/CHROOT]") and the
// digest identity of Options.Auth ("USER:PASSWORD", "" when absent). The
// user information is taken literally, without percent-decoding, up to
// the last '@' of the URL, so a password may hold any character (':', '@'
// and '/' included); a user name holds no ':'. Every server needs a port;
// query parameters and fragments are refused. The scheme matches in any
// case.
//
// Importing this package registers the scheme zk with simba.OpenBackend:
// it opens ParseURL's connect string with [Open], with zero Options but
// Auth.
//
// Errors are *OptionsError values matching ErrInvalidOptions and
// simba.ErrInvalidURL; they never contain the user information.
func ParseURL(rawURL string) (connect, auth string, err error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || !strings.EqualFold(scheme, "zk") {
		return "", "", &OptionsError{Field: "URL", Reason: "want zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/CHROOT]"}
	}
	connect = rest
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		auth, connect = rest[:at], rest[at+1:]
		if user, pass, ok := strings.Cut(auth, ":"); !ok || user == "" || pass == "" {
			return "", "", &OptionsError{Field: "URL", Reason: "user information must be USER:PASSWORD"}
		}
	}
	if strings.ContainsAny(connect, "?#") {
		return "", "", &OptionsError{Field: "URL", Reason: "query parameters are not supported"}
	}
	servers, _, err := ParseConnectString(connect)
	if err != nil {
		return "", "", err
	}
	for _, s := range servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return "", "", &OptionsError{Field: "URL", Reason: fmt.Sprintf("server %q: want HOST:PORT", s)}
		}
	}
	return connect, auth, nil
}
