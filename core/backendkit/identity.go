package backendkit

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxIdentity is the longest identity a session carries, in bytes; core
// exports it as simba.MaxIdentity.
const MaxIdentity = 256

// CheckIdentity returns nil when id is an identity a session may carry
// (simba.WithIdentity): 1 to [MaxIdentity] bytes of printable UTF-8
// (unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the
// ASCII space). Otherwise its error says why, in words that follow what
// names the identity and quote nothing of it: "empty", "257 bytes, at most
// 256 allowed", "not valid UTF-8", "the unprintable character U+000A at
// byte 1". The error wraps no sentinel: the caller wraps it in its own
// (simba.ErrInvalidArgument). A backend that stores no identity for the
// empty one checks only the others.
func CheckIdentity(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case len(id) > MaxIdentity:
		return fmt.Errorf("%d bytes, at most %d allowed", len(id), MaxIdentity)
	case !utf8.ValidString(id):
		return errors.New("not valid UTF-8")
	}
	for i, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("the unprintable character %U at byte %d", r, i)
		}
	}
	return nil
}
