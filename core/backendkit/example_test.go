package backendkit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/simba-go/simba/core/backendkit"
)

func ExampleIsCredentialParam() {
	for _, name := range []string{"sentinel_password", "auth_token", "x_auth", "allowCleartextPasswords", "require_auth", "authSource"} {
		fmt.Println(name, backendkit.IsCredentialParam(name))
	}
	// Output:
	// sentinel_password true
	// auth_token true
	// x_auth true
	// allowCleartextPasswords false
	// require_auth false
	// authSource false
}

func ExampleRedactURL() {
	u, _ := url.Parse("redis://app:S3cretPw@127.0.0.1:6379/0?dial_timeout=1s&x_auth=1&sentinel_password=S3cretPw2")
	fmt.Println(backendkit.RedactURL(u))
	// Output:
	// redis://app:xxxxx@127.0.0.1:6379/0?dial_timeout=1s&x_auth=xxxxx&sentinel_password=xxxxx
}

func ExampleMaskText() {
	u, _ := url.Parse("mysql://app:S3cretPw@127.0.0.1:1/db?x_auth=1")
	secrets := backendkit.URLSecrets(u) // S3cretPw and 1
	// "1" is too short to be looked for: the address stays readable.
	fmt.Println(backendkit.MaskText("dial tcp 127.0.0.1:1: login app:S3cretPw refused", secrets))
	// Output:
	// dial tcp 127.0.0.1:1: login app:xxxxx refused
}

func ExampleMaskError() {
	secrets := []string{"S3cretPw"}
	driverErr := fmt.Errorf("auth S3cretPw: %w", context.DeadlineExceeded)
	err := backendkit.MaskError(driverErr, secrets)
	fmt.Println(err)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// auth xxxxx: context deadline exceeded
	// true
}

// SplitAddress names the part of an address at fault, so that a mistyped
// URL is refused before any dial.
func ExampleSplitAddress() {
	for _, addr := range []string{"db-1:5432", "[::1]:6379", "h:1:99", ":6379"} {
		host, port, err := backendkit.SplitAddress(addr, false)
		fmt.Println(host, port, err)
	}
	// Output:
	// db-1 5432 <nil>
	// ::1 6379 <nil>
	//   port "1:99": want a number from 1 to 65535 (an IPv6 address goes in brackets: [ADDRESS]:PORT)
	//   no host before ":6379"
}

// CheckBlank tells an unset or badly quoted variable from a URL, quoting
// nothing of it.
func ExampleCheckBlank() {
	for _, raw := range []string{"", "  ", "redis://h:6379 ", "redis://h:6379"} {
		fmt.Println(backendkit.CheckBlank(raw))
	}
	// Output:
	// is empty
	// is only spaces
	// starts or ends with a space
	// <nil>
}

// CheckIdentity says what is wrong with an identity in words that follow
// what names it; the caller wraps its own sentinel.
func ExampleCheckIdentity() {
	for _, id := range []string{"billing-7 (eu-west)", "", "a\nb"} {
		if err := backendkit.CheckIdentity(id); err != nil {
			fmt.Printf("identity %q: %v\n", id, err)
			continue
		}
		fmt.Printf("identity %q: ok\n", id)
	}
	// Output:
	// identity "billing-7 (eu-west)": ok
	// identity "": empty
	// identity "a\nb": the unprintable character U+000A at byte 1
}

func ExampleNewSessionID() {
	id := backendkit.NewSessionID() // e.g. 3f6c0b1e9a4d27c85e0f1a2b3c4d5e6f
	fmt.Println(len(id), backendkit.ValidSessionID(id))
	// Output:
	// 32 true
}

// ValidSessionID lets a backend answer for an id it cannot have made
// without asking its server.
func ExampleValidSessionID() {
	for _, id := range []string{"3f6c0b1e9a4d27c85e0f1a2b3c4d5e6f", "3F6C0B1E9A4D27C85E0F1A2B3C4D5E6F", "session-1"} {
		fmt.Println(id, backendkit.ValidSessionID(id))
	}
	// Output:
	// 3f6c0b1e9a4d27c85e0f1a2b3c4d5e6f true
	// 3F6C0B1E9A4D27C85E0F1A2B3C4D5E6F false
	// session-1 false
}

func ExampleCheckScheme() {
	for _, raw := range []string{"POSTGRES://app@db/orders", "", "app:S3cretPw@db", "mysql://app:S3cretPw@db/orders"} {
		scheme, err := backendkit.CheckScheme(raw, "postgres://, postgresql://", "postgres", "postgresql")
		fmt.Printf("%q %v\n", scheme, err)
	}
	// Output:
	// "postgres" <nil>
	// "" the URL is empty: want postgres://, postgresql://
	// "" no scheme: want postgres://, postgresql://
	// "" scheme "mysql": want postgres://, postgresql://
}

// ParseURL quotes nothing of a URL it refuses, and refuses the URLs whose
// parts an unencoded character of the password has moved.
func ExampleParseURL() {
	for _, raw := range []string{"redis://app:S3cr%2Fet@h:6379/0", "redis://app:S3cr/et@h:6379/0", "redis://app:S3cr@et@h:6379/0#x"} {
		u, err := backendkit.ParseURL(raw)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(u.Host, u.Path)
	}
	// Output:
	// h:6379 /0
	// not a valid URL (a port that is not a number from 1 to 65535, or an unencoded '/', '?' or '#' in the password)
	// cannot tell its user information from the rest
}

func ExampleRedacted() {
	fmt.Printf("Password:%s\n", backendkit.Redacted("S3cretPw"))
	fmt.Printf("Password:%s\n", backendkit.Redacted(""))
	// Output:
	// Password:redacted
	// Password:""
}

// A backend package registers its schemes from an init function; the
// registry's openers return an interface, and Register makes a failed
// open return a nil one.
func ExampleRegister() {
	type opener func(ctx context.Context, rawURL string) (io.Closer, error)
	registry := map[string]opener{}
	register := func(scheme string, open opener) { registry[scheme] = open } // simba.RegisterBackend

	open := func(ctx context.Context, rawURL string) (*os.File, error) { // a backend package's Open
		return nil, errors.New("refused")
	}
	backendkit.Register(register, open, "file", "files")

	c, err := registry["files"](context.Background(), "files://x")
	fmt.Println(len(registry), c == nil, err)
	// Output:
	// 2 true refused
}

// SchemePackage tells a program that opens a URL of no registered scheme
// which package to import.
func ExampleSchemePackage() {
	fmt.Printf("%q\n", backendkit.SchemePackage("Redis+Sentinel"))
	fmt.Printf("%q\n", backendkit.SchemePackage("etcd"))
	// Output:
	// "github.com/simba-go/simba/backend-redis"
	// ""
}

func ExampleURLForm() {
	fmt.Println(backendkit.URLForm("memory"))
	fmt.Println(backendkit.URLForm("ZK"))
	fmt.Println(backendkit.URLForm("etcd"))
	// Output:
	// memory://[NAME]
	// zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/CHROOT]
	// etcd://...
}
