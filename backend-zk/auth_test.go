package simbazk

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestOtherPassword checks the rule by which Open calls a password wrong:
// only an ACL that grants creating nodes to nobody the client can be, and
// names the same user with another password.
func TestOtherPassword(t *testing.T) {
	self := zk.DigestACL(zk.PermAll, "simba", "right")[0]
	other := zk.DigestACL(zk.PermAll, "simba", "wrong")[0]
	stranger := zk.DigestACL(zk.PermAll, "someone", "else")[0]
	readOnly := zk.WorldACL(zk.PermRead)[0]
	cases := []struct {
		name string
		acl  []zk.ACL
		want bool
	}{
		{"same user, another password", []zk.ACL{other, readOnly}, true},
		{"the identity itself", []zk.ACL{self, readOnly}, false},
		{"the identity read-only, the user with another password", []zk.ACL{{Perms: zk.PermRead, Scheme: "digest", ID: self.ID}, other}, true},
		{"world may create", []zk.ACL{other, zk.WorldACL(zk.PermCreate)[0]}, false},
		{"another user only", []zk.ACL{stranger, readOnly}, false},
		{"an ip entry may create", []zk.ACL{other, {Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.1"}}, false},
		{"world all", zk.WorldACL(zk.PermAll), false},
		{"empty", nil, false},
	}
	for _, c := range cases {
		if got := otherPassword(c.acl, "simba", self.ID); got != c.want {
			t.Errorf("%s: otherPassword = %v, want %v", c.name, got, c.want)
		}
	}
}
