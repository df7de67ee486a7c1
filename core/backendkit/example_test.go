package backendkit_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"

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
