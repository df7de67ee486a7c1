package simbamysql

import (
	"time"

	simba "github.com/simba-go/simba/core"
)

var _ simba.LeaseLimiter = (*Backend)(nil)

// MaxLeaseDuration returns MaxLease, the longest session lease the backend
// accepts: simba.New refuses a client whose LeaseDuration exceeds it with a
// *simba.ConfigError, since every OpenSession of that lease would fail.
func (b *Backend) MaxLeaseDuration() time.Duration { return MaxLease }
