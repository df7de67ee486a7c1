package backendtest

import (
	"context"
	"strings"
	"time"
	"unicode"
)

// Passwords are the passwords of check SecretsInErrors: each character
// that has a meaning in a URL, alone and together, and passwords whose
// start reads as a port number, so that a URL holding them unencoded is
// misread rather than refused, and a mask that handles only the plain
// form shows the rest.
var Passwords = []string{
	"Qz9#Jx8Wv7",
	"Qz9/Jx8Wv7",
	"Qz9?Jx8Wv7",
	"Qz9@Jx8Wv7",
	"Qz9%Jx8Wv7",
	"Qz9%41Jx8Wv7",
	"Qz9:Jx8Wv7",
	"Qz9://Jx8Wv7",
	"6380/Qz9Jx8",
	"6380#Qz9Jx8",
	"6380?Qz9Jx8",
	"Ab1#Cd2/Ef3?Gh4@Ij5%Kl6:Mn7",
}

// LeakedPart returns the longest part of secret (3 bytes or more, with a
// letter in it) that text holds, or "" when there is none.
func LeakedPart(text, secret string) string {
	for n := len(secret); n >= 3; n-- {
		for i := 0; i+n <= len(secret); i++ {
			part := secret[i : i+n]
			if strings.ContainsFunc(part, unicode.IsLetter) && strings.Contains(text, part) {
				return part
			}
		}
	}
	return ""
}

// testSecretsInErrors runs each case of Harness.Secrets with each of
// Passwords: the open fails, no part of the password shows in any text
// of the error's chain (see [ErrorTexts]) or in the log, and the error
// is the one the case wants. Skipped without Harness.Secrets.
func testSecretsInErrors(e *env) {
	if e.h.Secrets == nil {
		e.t.Skip("the harness sets no Secrets")
	}
	for _, c := range e.h.Secrets(e.t) {
		within := c.Within
		if within == 0 {
			within = 5 * time.Second
		}
		for _, pw := range Passwords {
			var logs LogBuffer
			ctx, cancel := context.WithTimeout(e.t.Context(), within)
			b, err := c.Open(ctx, pw, logs.Logger())
			cancel()
			if err == nil {
				_ = b.Close()
				e.t.Errorf("%s, password %q: the open succeeded", c.Name, pw)
				continue
			}
			if part := LeakedPart(ErrorTexts(err), pw); part != "" {
				e.t.Errorf("%s: the error shows %q of the password %q: %v", c.Name, part, pw, err)
			}
			if part := LeakedPart(logs.String(), pw); part != "" {
				e.t.Errorf("%s: the log shows %q of the password %q:\n%s", c.Name, part, pw, logs.String())
			}
			if c.Want != nil && !c.Want(err) {
				e.t.Errorf("%s, password %q: unexpected error %v", c.Name, pw, err)
			}
		}
	}
}
