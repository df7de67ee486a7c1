package capi

import (
	"slices"
	"strings"
	"testing"
)

func TestURLSecrets(t *testing.T) {
	tests := []struct {
		url  string
		want []string
	}{
		{"redis://user:pw1@127.0.0.1:1/0", []string{"pw1"}},
		{"redis://127.0.0.1:1/0?password=pw2&protocol=9", []string{"pw2"}},
		{"redis://127.0.0.1:1/0?sentinel_password=pw3&master_name=m", []string{"pw3"}},
		{"postgres://u:p%40ss@h/db?sslmode=disable", []string{"p%40ss", "p@ss"}},
		{"mysql://u:pw4@tcp(127.0.0.1:1)/db?parseTime=true", []string{"pw4"}},
		{"u:pw5@tcp(127.0.0.1:1)/db", []string{"pw5"}},
		{"zk://127.0.0.1:1", nil},
		{"memory://name", nil},
		{"redis://u@h/0?Password=pw6;authToken=pw7", []string{"pw6", "pw7", "pw6;authToken=pw7"}},
		{"redis://h/0?pwd=pw8&X-Api-Key=pw9&allowCleartextPasswords=1&require_auth=md5", []string{"pw8", "pw9"}},
	}
	for _, tt := range tests {
		if got := urlSecrets(tt.url); !slices.Equal(got, tt.want) {
			t.Errorf("urlSecrets(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

func TestRedactMasksEveryKnownSecret(t *testing.T) {
	rememberSecrets("redis://u:Zq9secretA@h:1/0?password=Zq9secretB")
	msg := Redact("dial redis://u:Zq9secretA@h:1/0?password=Zq9secretB: refused")
	if strings.Contains(msg, "Zq9secret") {
		t.Errorf("Redact left a secret in %q", msg)
	}
	if !strings.Contains(msg, "refused") {
		t.Errorf("Redact cut the message: %q", msg)
	}
}

// FuzzURLSecrets: any URL is taken apart without a panic, and the secrets
// found are masked in a message that quotes the URL.
func FuzzURLSecrets(f *testing.F) {
	for _, s := range []string{"redis://u:p@h/0?password=x", "mysql://u:p@tcp(h:1)/d", "a@b:c@d/?&=;", "://@", "%zz:%zz@h?password=%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, s := range urlSecrets(raw) {
			if s == "" {
				t.Fatalf("an empty secret from %q", raw)
			}
		}
	})
}

// TestRedactKeepsWhatIsNoCredential: a switch that only speaks of
// passwords (allowCleartextPasswords=1) and a short value of a credential
// (x_auth=1) are not masked in messages, where they would mangle the
// address; pwd and api_key, spelt any way, are credentials.
func TestRedactKeepsWhatIsNoCredential(t *testing.T) {
	if got := urlSecrets("mysql://root@127.0.0.1:1/db?allowCleartextPasswords=1&require_auth=md5"); len(got) != 0 {
		t.Errorf("urlSecrets found %q in switches", got)
	}
	rememberSecrets("postgres://u@127.0.0.1:15432/db?x_auth=1&x_token=5432")
	rememberSecrets("redis://127.0.0.1:1/0?pwd=Zq9secretC&X-Api-Key=Zq9secretD")
	const msg = "dial tcp 127.0.0.1:15432: connect: connection refused"
	if got := Redact(msg); got != msg {
		t.Errorf("Redact(%q) = %q, want it as it is", msg, got)
	}
	if got := Redact("auth Zq9secretC Zq9secretD"); got != "auth xxxxx xxxxx" {
		t.Errorf("Redact of pwd= and X-Api-Key= values = %q", got)
	}
}
