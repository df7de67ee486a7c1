package backendkit

import (
	"strings"
	"testing"
)

func TestSplitAddress(t *testing.T) {
	for _, c := range []struct {
		give       string
		needPort   bool
		host, port string
		err        string // in the error; "" when accepted
	}{
		{give: "h", host: "h"},
		{give: "h:6379", host: "h", port: "6379"},
		{give: "db-1.example.com.:1", host: "db-1.example.com.", port: "1"},
		{give: "10.0.0.1:65535", host: "10.0.0.1", port: "65535"},
		{give: "[::1]:6379", host: "::1", port: "6379"},
		{give: "[fe80::1%eth0]", host: "fe80::1%eth0"},
		{give: "", err: "no host"},
		{give: ":6379", err: `no host before ":6379"`},
		{give: "h:1:99", err: `port "1:99": want a number from 1 to 65535 (an IPv6 address goes in brackets`},
		{give: "h:99999", err: `port "99999": want a number from 1 to 65535`},
		{give: "h:0", err: `port "0"`},
		{give: "h:", err: `port ""`},
		{give: "h:abc", err: `port "abc"`},
		{give: "h:+80", err: `port "+80"`},
		{give: "h", needPort: true, err: "no port: want HOST:PORT"},
		{give: "[::1]", needPort: true, err: "no port"},
		{give: "::1", err: `"::1": an IPv6 address goes in brackets: [ADDRESS]:PORT`},
		{give: "::1:6379", err: "an IPv6 address goes in brackets"},
		{give: "fe80::1%eth0", err: `"fe80::1%eth0": an IPv6 address goes in brackets`},
		{give: "fe80::1%eth0:6379", err: "an IPv6 address goes in brackets"},
		{give: "fe80::1:70000", err: "an IPv6 address goes in brackets"},
		{give: "[::1", err: "no ']'"},
		{give: "[zz::1]:1", err: `host "[zz::1]": not an IPv6 address`},
		{give: "[10.0.0.1]:1", err: "not an IPv6 address"},
		{give: "[::1]x", err: `"x" after the host "[::1]"`},
		{give: "bad!host:1", err: `host "bad!host": not a host name or IP address`},
		{give: "1.2.3.4.5", err: `host "1.2.3.4.5"`},
		{give: "10.0.0.300:1", err: `host "10.0.0.300"`},
		{give: "a..b", err: `host "a..b"`},
		{give: "h h:1", err: `host "h h"`},
	} {
		host, port, err := SplitAddress(c.give, c.needPort)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("SplitAddress(%q): %v", c.give, err)
		case c.err == "" && (host != c.host || port != c.port):
			t.Errorf("SplitAddress(%q) = %q, %q; want %q, %q", c.give, host, port, c.host, c.port)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("SplitAddress(%q) = %v; want an error saying %q", c.give, err, c.err)
		}
	}
}

func TestCheckBlank(t *testing.T) {
	for give, want := range map[string]string{
		"":                 "is empty",
		" ":                "is only spaces",
		"\t\n":             "is only spaces",
		" redis://s3cr3t":  "starts or ends with a space",
		"redis://s3cr3t\n": "starts or ends with a space",
		"redis://h":        "",
	} {
		err := CheckBlank(give)
		if want == "" && err != nil || want != "" && (err == nil || err.Error() != want) {
			t.Errorf("CheckBlank(%q) = %v, want %q", give, err, want)
		}
	}
}

func TestValidScheme(t *testing.T) {
	for give, want := range map[string]bool{
		"redis": true, "redis+cluster": true, "Test.B-1": true, "z": true,
		"": false, "1redis": false, "re dis": false, "user:pw@h": false, "+x": false, "é": false,
	} {
		if got := ValidScheme(give); got != want {
			t.Errorf("ValidScheme(%q) = %v, want %v", give, got, want)
		}
	}
}
