package simba_test

import (
	"errors"
	"strings"
	"testing"

	simba "github.com/simba-go/simba/core"
)

// R-NAME-1
func TestValidateName(t *testing.T) {
	tests := []struct {
		give string
		ok   bool
	}{
		{"a", true},
		{"report", true},
		{"billing.3", true},
		{"A-z_0:9.x", true},
		{"a..b", true},
		{"...", true},
		{strings.Repeat("x", 128), true},
		{"", false},
		{".", false},
		{"..", false},
		{strings.Repeat("x", 129), false},
		{"a b", false},
		{"a/b", false},
		{"ä", false},
		{"a\x00", false},
		{"{tag}", false},
	}
	for _, tt := range tests {
		err := simba.ValidateName(tt.give)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tt.give, err, tt.ok)
		}
		var ne *simba.NameError
		if err != nil && (!errors.As(err, &ne) || !errors.Is(err, simba.ErrInvalidName) || ne.Name != tt.give) {
			t.Errorf("ValidateName(%q) error %v is not a *NameError", tt.give, err)
		}
	}
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a", ".", "..", "a.b", "x y", strings.Repeat("z", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := simba.ValidateName(name)
		ok := len(name) >= 1 && len(name) <= 128 && name != "." && name != ".."
		for _, r := range name {
			if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-", r) {
				ok = false
			}
		}
		if (err == nil) != ok {
			t.Fatalf("ValidateName(%q) = %v, want ok=%v", name, err, ok)
		}
	})
}
