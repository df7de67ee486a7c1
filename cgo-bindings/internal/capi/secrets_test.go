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
		{"redis://u@h/0?Password=pw6;authToken=pw7", []string{"pw6", "pw7"}},
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
