package simba

import (
	"errors"
	"fmt"
)

// MaxNameLength is the longest lease name accepted, in bytes (R-NAME-1).
const MaxNameLength = 128

// ErrInvalidName is matched (with errors.Is) by every *NameError.
var ErrInvalidName = errors.New("simba: invalid lease name")

// NameError reports a lease or group name that breaks R-NAME-1: names are
// 1 to 128 characters of [A-Za-z0-9._:-], other than "." and "..".
type NameError struct {
	Name   string // the rejected name, quoted when printed
	Reason string // what is wrong with it
}

func (e *NameError) Error() string {
	return fmt.Sprintf("simba: invalid lease name %q: %s", e.Name, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidName) true for every *NameError.
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// ValidateName returns nil when name is a valid lease name on every
// backend, and a *NameError saying why otherwise. The engine calls it
// before any backend call; backends may call it again.
func ValidateName(name string) error {
	switch {
	case name == "":
		return &NameError{Name: name, Reason: "empty"}
	case len(name) > MaxNameLength:
		return &NameError{Name: name, Reason: fmt.Sprintf("%d characters, at most %d allowed", len(name), MaxNameLength)}
	case name == "." || name == "..":
		return &NameError{Name: name, Reason: `"." and ".." are reserved`}
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return &NameError{Name: name, Reason: fmt.Sprintf("character %q at byte %d is not one of [A-Za-z0-9._:-]", rune(name[i]), i)}
		}
	}
	return nil
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
