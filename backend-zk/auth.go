package simbazk

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// ErrAuth is matched (with errors.Is) by Open's error when the ACL of
// Simba's root shows that the password of Options.Auth is wrong (see
// [Open]).
var ErrAuth = errors.New("simbazk: authentication refused")

// authCheckLease is the session timeout asked for by Open's check of
// Options.Auth; the session is closed as soon as the check ends.
const authCheckLease = 4 * time.Second

// checkAuth is Open's check of Options.Auth: a Zookeeper server accepts any
// digest identity, so a wrong password shows only in the ACLs. It opens a
// session (authenticated as every session is), reads the ACL of Root, or
// of its nearest ancestor that exists, which is where Simba creates its
// nodes, and fails with ErrAuth when that ACL lets neither the identity
// nor world:anyone create nodes and names the identity's user with
// another password. Other ACLs pass: an entry of another scheme (ip,
// x509, sasl), another user or the server's super user cannot be judged
// from the client.
func (b *Backend) checkAuth(ctx context.Context) error {
	user, password, _ := strings.Cut(b.opts.Auth, ":")
	self := zk.DigestACL(zk.PermAll, user, password)[0].ID
	g, err := b.OpenSession(ctx, authCheckLease)
	if err != nil {
		return err
	}
	s, err := b.session(g.ID)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = b.CloseSession(ctx, g.ID)
	}()
	var node string // read only once call returned the ACL: the goroutine is done with it
	acl, err := call(ctx, b, "open: read the ACL of the root", func() ([]zk.ACL, error) {
		for node = b.opts.Root; ; node = path.Dir(node) {
			var acl []zk.ACL
			err := s.do(func() (err error) { acl, _, err = s.conn.GetACL(node); return err })
			if !errors.Is(err, zk.ErrNoNode) || node == "/" {
				return acl, err
			}
		}
	})
	if errors.Is(err, zk.ErrNoAuth) {
		return nil // unreadable: nothing to judge by
	}
	if err != nil {
		return fmt.Errorf("simbazk: open: read the ACL of %s: %w", b.opts.Root, err)
	}
	if otherPassword(acl, user, self) {
		return fmt.Errorf("%w: the ACL of %s names digest user %q with another password, and lets neither that identity "+
			"nor world:anyone create nodes: is the password of Options.Auth wrong?", ErrAuth, node, user)
	}
	return nil
}

// otherPassword reports whether acl grants the create permission neither
// to world:anyone nor to the digest identity self, nor to any identity of
// a scheme the client cannot judge, and has a digest entry for user with
// another password.
func otherPassword(acl []zk.ACL, user, self string) bool {
	other := false
	for _, a := range acl {
		switch a.Scheme {
		case "world":
			if a.ID == "anyone" && a.Perms&zk.PermCreate != 0 {
				return false
			}
		case "digest":
			if a.ID == self {
				if a.Perms&zk.PermCreate != 0 {
					return false
				}
				continue
			}
			if u, _, _ := strings.Cut(a.ID, ":"); u == user {
				other = true
			}
		default:
			if a.Perms&zk.PermCreate != 0 {
				return false
			}
		}
	}
	return other
}
