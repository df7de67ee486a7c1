package simbaredis

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

func TestRegisteredSchemes(t *testing.T) {
	schemes := simba.BackendSchemes()
	for _, s := range []string{"redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster"} {
		if !slices.Contains(schemes, s) {
			t.Errorf("BackendSchemes() = %v, want %s registered", schemes, s)
		}
	}
}

func TestOpenBackendURLErrors(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, u := range []string{
		"redis://user:" + secret + "@127.0.0.1:notaport/0",
		"REDIS://user:" + secret + "@127.0.0.1:6379/0?no_such_option=1",
		"rediss://user:s3#cr3t-pw@127.0.0.1:6379/0",
		"redis://user:" + secret + "@[::1/0",
	} {
		_, err := simba.OpenBackend(context.Background(), u)
		if !errors.Is(err, simba.ErrInvalidURL) || !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("OpenBackend(%q) = %v, want ErrInvalidURL and ErrInvalidOptions", strings.ReplaceAll(u, secret, "***"), err)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "s3#cr3t") {
			t.Errorf("the error of an invalid URL shows the password: %v", err)
		}
	}
}

func TestOpenBackendSilentServer(t *testing.T) {
	url := "redis://" + backendtest.SilentListener(t) + "/0"
	var err error
	within(t, time.Second, "OpenBackend of a silent server with a 300ms context", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err = simba.OpenBackend(ctx, url)
	})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, simba.ErrInvalidURL) {
		t.Errorf("OpenBackend of a silent server = %v, want context.DeadlineExceeded", err)
	}
}

func TestOpenBackend(t *testing.T) {
	url := serverURL(t)
	b, err := simba.OpenBackend(callCtx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	rb, ok := b.(*Backend)
	if !ok {
		t.Fatalf("OpenBackend(%s) = %T, want *Backend", url, b)
	}
	if rb.KeyPrefix() != DefaultKeyPrefix || !rb.ownsClient {
		t.Errorf("OpenBackend: prefix %q, owns client %t; want the defaults of Open", rb.KeyPrefix(), rb.ownsClient)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
