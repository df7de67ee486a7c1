package simba_test

import (
	"errors"
	"testing"
	"testing/synctest"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// A nil pointer of a backend type is a nil backend: New refuses it, rather
// than return a client whose session loop panics on its first call.
func TestNewRefusesANilBackendPointer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var conn *memory.Conn
		c, err := simba.New(conn, simba.WithDeferredStart())
		if !errors.Is(err, simba.ErrInvalidArgument) {
			if c != nil {
				_ = c.Close(t.Context()) // never started: no backend call
			}
			t.Fatalf("New(a nil *memory.Conn) = %v, want an error matching ErrInvalidArgument", err)
		}
	})
}
