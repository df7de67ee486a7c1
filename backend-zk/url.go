package simbazk

import (
	"context"
	"strings"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

func init() {
	backendkit.Register(simba.RegisterBackend, openURL, "zk")
}

// openURL opens a zk:// URL for simba.OpenBackend.
func openURL(ctx context.Context, rawURL string) (*Backend, error) {
	connect, auth, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return Open(ctx, connect, Options{Auth: auth})
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
	form := backendkit.URLForm("zk")
	if _, err := backendkit.CheckScheme(rawURL, form, "zk"); err != nil {
		return "", "", &OptionsError{Field: "URL", Reason: err.Error()}
	}
	_, rest, _ := strings.Cut(rawURL, "://")
	connect = rest
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		auth, connect = rest[:at], rest[at+1:]
		if !isDigestIdentity(auth) {
			return "", "", &OptionsError{Field: "URL", Reason: "user information must be USER:PASSWORD"}
		}
	}
	if strings.ContainsAny(connect, "?#") {
		return "", "", &OptionsError{Field: "URL", Reason: "query parameters are not supported"}
	}
	if connect == "" {
		return "", "", &OptionsError{Field: "URL", Reason: "names no server: want " + form}
	}
	if _, _, problem := splitConnect(connect); problem != "" {
		return "", "", &OptionsError{Field: "URL", Reason: problem}
	}
	return connect, auth, nil
}
