package simbazk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestCredentialsShowNowhere: a digest password in a zk:// URL shows in no
// error of simba.OpenBackend, for URLs that cannot be used and servers
// that cannot be reached; a backend that opens and closes shows it in no
// log, nor in Options printed or logged. (The conformance suite checks
// the errors of ParseURL and Open.)
func TestCredentialsShowNowhere(t *testing.T) {
	server := testServers(t, "SIMBA_TEST_ZK_SERVERS")[0]
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	chroot := "/simba-secrets-" + hex.EncodeToString(nonce[:])
	for _, c := range unusableURLs(server) {
		t.Run(c.name, func(t *testing.T) {
			for _, pw := range []string{backendtest.Secret, backendtest.Secret + "@:/?#%"} {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				ob, err := simba.OpenBackend(ctx, "zk://simba:"+pw+"@"+c.rest)
				cancel()
				if err == nil {
					_ = ob.Close()
				}
				backendtest.NoSecret(t, "simba.OpenBackend", err, backendtest.Secret)
			}
		})
	}
	var logs backendtest.LogBuffer
	opts := Options{Auth: "simba:" + backendtest.Secret, DialTimeout: 200 * time.Millisecond, Logger: logs.Logger()}
	b, err := Open(ctx(t), server+chroot, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := b.OpenSession(ctx(t), 2*time.Second); err != nil {
		t.Errorf("OpenSession: %v", err)
	}
	_ = b.Close()
	backendtest.NoSecretIn(t, "the log", logs.String(), backendtest.Secret)
	backendtest.PrintsWithoutSecret(t, opts, &opts, backendtest.Secret)
}
