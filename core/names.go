package simba

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxNameLength is the longest lease name accepted, in bytes (R-NAME-1).
// The characters allowed are ASCII, one byte each, so a valid name is also
// at most 128 characters long; a longer name is refused by its length in
// bytes, whatever characters it holds.
const MaxNameLength = 128

// nameShown is how many bytes of a rejected name an error message quotes;
// the rest is left out, with a marker giving the full length.
const nameShown = 64

// ErrInvalidName is matched (with errors.Is) by every *NameError.
var ErrInvalidName = errors.New("simba: invalid lease name")

// NameError reports a lease or group name that breaks R-NAME-1: names are
// 1 to 128 bytes of [A-Za-z0-9._:-] (ASCII, so 1 to 128 characters), other
// than "." and "..".
type NameError struct {
	// Name is the rejected name, whole. The message quotes it (Go syntax,
	// so invalid UTF-8 and control characters show as escapes), and only
	// its first 64 bytes, marked with the full length, when it is longer.
	Name   string
	Reason string // what is wrong with it
}

func (e *NameError) Error() string {
	if len(e.Name) <= nameShown {
		return fmt.Sprintf("simba: invalid lease name %q: %s", e.Name, e.Reason)
	}
	// Cut before the character that holds byte nameShown, if any does.
	n := nameShown
	for k := nameShown; k > nameShown-utf8.UTFMax; k-- {
		if utf8.RuneStart(e.Name[k]) {
			n = k
			break
		}
	}
	return fmt.Sprintf("simba: invalid lease name %q (first %d of %d bytes): %s", e.Name[:n], n, len(e.Name), e.Reason)
}

// Is makes errors.Is(err, ErrInvalidName) true for every *NameError.
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// ValidateName returns nil when name is a valid lease name on every
// backend, and a *NameError saying why otherwise: empty, longer than
// MaxNameLength bytes, "." or "..", or the first character outside
// [A-Za-z0-9._:-], as the character it is (or, where name is not valid
// UTF-8, as the byte in hex) and its byte offset. The engine calls it
// before any backend call; backends may call it again.
func ValidateName(name string) error {
	switch {
	case name == "":
		return &NameError{Name: name, Reason: "empty"}
	case len(name) > MaxNameLength:
		return &NameError{Name: name, Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(name), MaxNameLength)}
	case name == "." || name == "..":
		return &NameError{Name: name, Reason: `"." and ".." are reserved`}
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return &NameError{Name: name, Reason: badCharacter(name, i) + " is not one of [A-Za-z0-9._:-]"}
		}
	}
	return nil
}

// badCharacter describes the character of name that starts at byte i.
func badCharacter(name string, i int) string {
	r, size := utf8.DecodeRuneInString(name[i:])
	switch {
	case r == utf8.RuneError && size <= 1:
		return fmt.Sprintf("byte 0x%02x (not valid UTF-8) at byte %d", name[i], i)
	case r < utf8.RuneSelf:
		return fmt.Sprintf("character %q at byte %d", r, i)
	}
	return fmt.Sprintf("character %q (%U, %d bytes) at byte %d", r, r, size, i)
}

func nameByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '.', c == '_', c == ':', c == '-':
		return true
	}
	return false
}
