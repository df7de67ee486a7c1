package backendkit

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// SessionIDLength is the length in bytes of an id [NewSessionID] makes.
const SessionIDLength = 32

// NewSessionID returns a new session id: 128 bits from the system's
// secure random source in lower-case hex, so that no two sessions of any
// process share one (R-SES-2). crypto/rand.Read never fails; it aborts
// the program when the source is broken.
func NewSessionID() string {
	var raw [SessionIDLength / 2]byte
	_, _ = rand.Read(raw[:])
	return hex.EncodeToString(raw[:])
}

// ValidSessionID reports whether s has the shape of an id [NewSessionID]
// makes: [SessionIDLength] lower-case hexadecimal digits. A backend whose
// ids come from NewSessionID treats any other id as a session that does
// not exist, without asking its server.
func ValidSessionID(s string) bool {
	return len(s) == SessionIDLength && strings.Trim(s, "0123456789abcdef") == ""
}
