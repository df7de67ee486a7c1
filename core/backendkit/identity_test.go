package backendkit

import (
	"strings"
	"testing"
)

func TestCheckIdentity(t *testing.T) {
	for _, c := range []struct {
		give string
		want string // the error; "" when accepted
	}{
		{give: "billing-7 (eu-west)"},
		{give: "host:4242"},
		{give: "ñandú-1 東京"},
		{give: strings.Repeat("x", MaxIdentity)},
		{give: strings.Repeat("é", MaxIdentity/2)},
		{give: "", want: "empty"},
		{give: strings.Repeat("x", MaxIdentity+1), want: "257 bytes, at most 256 allowed"},
		{give: strings.Repeat("é", MaxIdentity/2) + "x", want: "257 bytes, at most 256 allowed"},
		{give: "ab\xff", want: "not valid UTF-8"},
		{give: "a\nb", want: "the unprintable character U+000A at byte 1"},
		{give: "tab\there", want: "the unprintable character U+0009 at byte 3"},
		{give: "é\u200b", want: "the unprintable character U+200B at byte 2"},
		{give: "\x7f", want: "the unprintable character U+007F at byte 0"},
	} {
		err := CheckIdentity(c.give)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckIdentity(%q) = %v, want nil", c.give, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("CheckIdentity(%q) = %v, want %q", c.give, err, c.want)
		}
	}
}

func TestSessionIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewSessionID()
		if !ValidSessionID(id) {
			t.Fatalf("ValidSessionID(%q) = false for an id NewSessionID made", id)
		}
		if seen[id] {
			t.Fatalf("NewSessionID made %q twice", id)
		}
		seen[id] = true
	}
	for _, give := range []string{
		"",
		strings.Repeat("a", SessionIDLength-1),
		strings.Repeat("a", SessionIDLength+1),
		strings.Repeat("A", SessionIDLength), // upper case is not what NewSessionID makes
		strings.Repeat("g", SessionIDLength),
		strings.Repeat("0", SessionIDLength-1) + " ",
		strings.Repeat("é", SessionIDLength/2),
		"0x" + strings.Repeat("0", SessionIDLength-2),
	} {
		if ValidSessionID(give) {
			t.Errorf("ValidSessionID(%q) = true, want false", give)
		}
	}
}
