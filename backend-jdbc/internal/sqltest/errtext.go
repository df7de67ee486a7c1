package sqltest

import (
	"fmt"
	"strings"
)

// ErrorTexts returns every text err shows: Error, %v, %+v and %#v of err
// and of each error its chain holds (Unwrap, single or multiple), one per
// line, for the tests of errors that must not show a secret.
func ErrorTexts(err error) string {
	var b strings.Builder
	seen := 0
	var walk func(error)
	walk = func(e error) {
		if e == nil || seen > 100 {
			return
		}
		seen++
		fmt.Fprintf(&b, "%s\n%v\n%+v\n%#v\n", e.Error(), e, e, e)
		switch u := e.(type) { //nolint:errorlint // every level of the chain, one at a time
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return b.String()
}
