package simba_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	simba "github.com/simba-go/simba/core"
)

// R-NAME-1
func TestValidateName(t *testing.T) {
	tests := []struct {
		give string
		want string // the error's message; "" for a valid name
	}{
		{give: "a"},
		{give: "report"},
		{give: "billing.3"},
		{give: "A-z_0:9.x"},
		{give: "a..b"},
		{give: "..."},
		{give: strings.Repeat("x", 128)},
		{give: "", want: `simba: invalid lease name "": empty`},
		{give: ".", want: `simba: invalid lease name ".": "." and ".." are reserved`},
		{give: "..", want: `simba: invalid lease name "..": "." and ".." are reserved`},
		{give: "a b", want: `simba: invalid lease name "a b": character ' ' at byte 1 is not one of [A-Za-z0-9._:-]`},
		{give: "a/b", want: `simba: invalid lease name "a/b": character '/' at byte 1 is not one of [A-Za-z0-9._:-]`},
		{give: "{tag}", want: `simba: invalid lease name "{tag}": character '{' at byte 0 is not one of [A-Za-z0-9._:-]`},
		{give: "a\x00", want: `simba: invalid lease name "a\x00": character '\x00' at byte 1 is not one of [A-Za-z0-9._:-]`},
		{give: "ä", want: `simba: invalid lease name "ä": character 'ä' (U+00E4, 2 bytes) at byte 0 is not one of [A-Za-z0-9._:-]`},
		{give: "café", want: `simba: invalid lease name "café": character 'é' (U+00E9, 2 bytes) at byte 3 is not one of [A-Za-z0-9._:-]`},
		{give: "job-日本", want: `simba: invalid lease name "job-日本": character '日' (U+65E5, 3 bytes) at byte 4 is not one of [A-Za-z0-9._:-]`},
		{give: "a🙂", want: `simba: invalid lease name "a🙂": character '🙂' (U+1F642, 4 bytes) at byte 1 is not one of [A-Za-z0-9._:-]`},
		{give: "a\u200bb", want: `simba: invalid lease name "a\u200bb": character '\u200b' (U+200B, 3 bytes) at byte 1 is not one of [A-Za-z0-9._:-]`},
		{give: "ab\xff", want: `simba: invalid lease name "ab\xff": byte 0xff (not valid UTF-8) at byte 2 is not one of [A-Za-z0-9._:-]`},
		{give: "caf\xc3", want: `simba: invalid lease name "caf\xc3": byte 0xc3 (not valid UTF-8) at byte 3 is not one of [A-Za-z0-9._:-]`},
		{give: "\xe9t\xe9", want: `simba: invalid lease name "\xe9t\xe9": byte 0xe9 (not valid UTF-8) at byte 0 is not one of [A-Za-z0-9._:-]`},
		{give: strings.Repeat("x", 129),
			want: `simba: invalid lease name "` + strings.Repeat("x", 64) + `" (first 64 of 129 bytes): 129 bytes, at most 128 allowed`},
		{give: strings.Repeat("x", 200),
			want: `simba: invalid lease name "` + strings.Repeat("x", 64) + `" (first 64 of 200 bytes): 200 bytes, at most 128 allowed`},
		// 65 two-byte characters: 130 bytes but 65 characters; the limit
		// counts bytes, and the quote does not split a character.
		{give: strings.Repeat("é", 65),
			want: `simba: invalid lease name "` + strings.Repeat("é", 32) + `" (first 64 of 130 bytes): 130 bytes, at most 128 allowed`},
		{give: strings.Repeat("x", 63) + "é",
			want: `simba: invalid lease name "` + strings.Repeat("x", 63) + `" (first 63 of 65 bytes): character 'é' (U+00E9, 2 bytes) at byte 63 is not one of [A-Za-z0-9._:-]`},
		{give: strings.Repeat("x", 100) + ";",
			want: `simba: invalid lease name "` + strings.Repeat("x", 64) + `" (first 64 of 101 bytes): character ';' at byte 100 is not one of [A-Za-z0-9._:-]`},
		{give: strings.Repeat("x", 64) + "\xff\xff",
			want: `simba: invalid lease name "` + strings.Repeat("x", 64) + `" (first 64 of 66 bytes): byte 0xff (not valid UTF-8) at byte 64 is not one of [A-Za-z0-9._:-]`},
	}
	for _, tt := range tests {
		err := simba.ValidateName(tt.give)
		if tt.want == "" {
			if err != nil {
				t.Errorf("ValidateName(%q) = %v, want nil", tt.give, err)
			}
			continue
		}
		var ne *simba.NameError
		switch {
		case err == nil:
			t.Errorf("ValidateName(%q) = nil, want %q", tt.give, tt.want)
		case err.Error() != tt.want:
			t.Errorf("ValidateName(%q)\n got %q\nwant %q", tt.give, err, tt.want)
		case !errors.As(err, &ne) || !errors.Is(err, simba.ErrInvalidName) || ne.Name != tt.give:
			t.Errorf("ValidateName(%q) error %v is not a *NameError holding the whole name", tt.give, err)
		}
	}
}

// The name's characters are ASCII, so its length in bytes is its length
// in characters, and the error's message stays short and valid UTF-8 for
// any input.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a", ".", "..", "a.b", "x y", strings.Repeat("z", 129), "café", "a\xffb",
		strings.Repeat("x", 63) + "é", strings.Repeat("é", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := simba.ValidateName(name)
		ok := len(name) >= 1 && len(name) <= 128 && name != "." && name != ".."
		bad := -1 // the first byte outside the allowed set
		for i := 0; i < len(name); i++ {
			if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-", rune(name[i])) {
				ok = false
				if bad < 0 {
					bad = i
				}
			}
		}
		if (err == nil) != ok {
			t.Fatalf("ValidateName(%q) = %v, want ok=%v", name, err, ok)
		}
		if err == nil {
			return
		}
		var ne *simba.NameError
		if !errors.As(err, &ne) || ne.Name != name {
			t.Fatalf("ValidateName(%q) = %v: not a *NameError holding the whole name", name, err)
		}
		msg := err.Error()
		if !utf8.ValidString(msg) || len(msg) > 400 {
			t.Fatalf("ValidateName(%q): message of %d bytes, valid UTF-8 %v: %q", name, len(msg), utf8.ValidString(msg), msg)
		}
		switch {
		case len(name) > 128:
			if want := fmt.Sprintf("%d bytes, at most 128 allowed", len(name)); !strings.Contains(msg, want) {
				t.Fatalf("ValidateName(%d bytes) = %q, want it to say %q", len(name), msg, want)
			}
		case bad >= 0:
			r, size := utf8.DecodeRuneInString(name[bad:])
			want := fmt.Sprintf("character %q", r)
			if r == utf8.RuneError && size <= 1 {
				want = fmt.Sprintf("byte 0x%02x", name[bad])
			}
			if at := fmt.Sprintf(" at byte %d is not one of", bad); !strings.Contains(msg, want) || !strings.Contains(msg, at) {
				t.Fatalf("ValidateName(%q) = %q, want it to say %q%q", name, msg, want, at)
			}
		}
	})
}
