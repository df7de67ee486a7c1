package simbazk

import "errors"

// ErrAuth is matched (with errors.Is) by Open's error when the ACL of
// Simba's root shows that the password of Options.Auth is wrong (see
// [Open]).
var ErrAuth = errors.New("simbazk: authentication refused")
