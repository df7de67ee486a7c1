package simba

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// registerForTest registers open for scheme until the test ends.
func registerForTest(t *testing.T, scheme string, open BackendOpener) {
	t.Helper()
	RegisterBackend(scheme, open)
	t.Cleanup(func() {
		backends.Lock()
		defer backends.Unlock()
		delete(backends.openers, strings.ToLower(scheme))
	})
}

// stubBackend is an OpenedBackend that remembers the URL it was opened
// with.
type stubBackend struct {
	Backend
	url string
}

func (*stubBackend) Close() error { return nil }

func stubOpener(ctx context.Context, rawURL string) (OpenedBackend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &stubBackend{url: rawURL}, nil
}

func TestOpenBackendDispatchesByScheme(t *testing.T) {
	registerForTest(t, "test-a", stubOpener)
	registerForTest(t, "Test.B+x", func(ctx context.Context, rawURL string) (OpenedBackend, error) {
		return &stubBackend{url: "b:" + rawURL}, nil
	})
	tests := []struct {
		give string
		want string
	}{
		{give: "test-a://host/x?y=1", want: "test-a://host/x?y=1"},
		{give: "TEST-A://user:pa@ss@host", want: "TEST-A://user:pa@ss@host"},
		{give: "test.b+x://h", want: "b:test.b+x://h"},
	}
	for _, tt := range tests {
		b, err := OpenBackend(t.Context(), tt.give)
		if err != nil {
			t.Errorf("OpenBackend(%q): %v", tt.give, err)
			continue
		}
		if got := b.(*stubBackend).url; got != tt.want {
			t.Errorf("OpenBackend(%q) opened %q, want %q", tt.give, got, tt.want)
		}
	}
	schemes := BackendSchemes()
	if !slices.IsSorted(schemes) || !slices.Contains(schemes, "test-a") || !slices.Contains(schemes, "test.b+x") {
		t.Errorf("BackendSchemes() = %v, want sorted, with test-a and test.b+x", schemes)
	}
}

func TestOpenBackendPassesCtxAndErrors(t *testing.T) {
	registerForTest(t, "test-ctx", stubOpener)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := OpenBackend(ctx, "test-ctx://h"); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenBackend with a cancelled ctx = %v, want the opener's context.Canceled", err)
	}

	refused := errors.New("refused")
	registerForTest(t, "test-err", func(context.Context, string) (OpenedBackend, error) { return nil, refused })
	if _, err := OpenBackend(t.Context(), "test-err://h"); err != refused { //nolint:errorlint // the very error, unwrapped
		t.Errorf("OpenBackend = %v, want the opener's error as it is", err)
	}

	registerForTest(t, "test-nil", func(context.Context, string) (OpenedBackend, error) { return nil, nil })
	if b, err := OpenBackend(t.Context(), "test-nil://h"); b != nil || err == nil {
		t.Errorf("OpenBackend of an opener returning nothing = %v, %v; want an error", b, err)
	}
}

func TestOpenBackendUnknownScheme(t *testing.T) {
	registerForTest(t, "test-known", stubOpener)
	tests := []struct {
		give    string
		scheme  string
		wantPkg string // "" when no package is suggested
	}{
		{give: "zk://u:s3cr3t@zk1:2181/app", scheme: "zk", wantPkg: "github.com/simba-go/simba/backend-zk"},
		{give: "Redis://:s3cr3t@h:6379/0", scheme: "redis", wantPkg: "github.com/simba-go/simba/backend-redis"},
		{give: "rediss://h", scheme: "rediss", wantPkg: "github.com/simba-go/simba/backend-redis"},
		{give: "postgres://u:s3cr3t@db/app", scheme: "postgres", wantPkg: "github.com/simba-go/simba/backend-jdbc/postgres"},
		{give: "postgresql://db/app", scheme: "postgresql", wantPkg: "github.com/simba-go/simba/backend-jdbc/postgres"},
		{give: "mysql://u:s3cr3t@db/app", scheme: "mysql", wantPkg: "github.com/simba-go/simba/backend-jdbc/mysql"},
		{give: "etcd://u:s3cr3t@h", scheme: "etcd"},
	}
	for _, tt := range tests {
		_, err := OpenBackend(t.Context(), tt.give)
		var se *SchemeError
		if !errors.Is(err, ErrUnknownScheme) || errors.Is(err, ErrInvalidURL) || !errors.As(err, &se) {
			t.Errorf("OpenBackend(%q) = %v, want a *SchemeError matching ErrUnknownScheme only", tt.give, err)
			continue
		}
		msg := err.Error()
		if se.Scheme != tt.scheme || !strings.Contains(msg, fmt.Sprintf("%q", tt.scheme)) {
			t.Errorf("OpenBackend(%q) = %q, scheme %q; want scheme %q named", tt.give, msg, se.Scheme, tt.scheme)
		}
		if !slices.Contains(se.Registered, "test-known") || !strings.Contains(msg, "test-known") {
			t.Errorf("OpenBackend(%q) = %q, registered %v; want the registered schemes listed", tt.give, msg, se.Registered)
		}
		if tt.wantPkg != "" && !strings.Contains(msg, "import "+tt.wantPkg+" ") {
			t.Errorf("OpenBackend(%q) = %q, want it to say to import %s", tt.give, msg, tt.wantPkg)
		}
		if tt.wantPkg == "" && strings.Contains(msg, "import github.com") {
			t.Errorf("OpenBackend(%q) = %q suggests a package for a scheme of no backend", tt.give, msg)
		}
		if strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "u:") {
			t.Errorf("OpenBackend(%q) = %q shows the user information", tt.give, msg)
		}
	}
}

func TestOpenBackendNoScheme(t *testing.T) {
	for _, give := range []string{
		"localhost:6379",
		"user:s3cr3t@host",
		"user:s3cr3t@tcp(host:3306)/db",
		"redis:/host",
		"://user:s3cr3t@host",
		"re dis://user:s3cr3t@host",
		"1redis://host",
		"user:s3cr3t@h://x",
		"user@h://x",
	} {
		_, err := OpenBackend(t.Context(), give)
		var se *SchemeError
		if !errors.Is(err, ErrInvalidURL) || errors.Is(err, ErrUnknownScheme) || !errors.As(err, &se) || se.Scheme != "" {
			t.Errorf("OpenBackend(%q) = %v, want a *SchemeError without scheme matching ErrInvalidURL only", give, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "has no scheme") {
			t.Errorf("OpenBackend(%q) = %q, want it to say the URL has no scheme", give, msg)
		}
		if strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "user") {
			t.Errorf("OpenBackend(%q) = %q quotes the URL", give, msg)
		}
	}
}

// TestSchemeErrorMessage checks the messages whole (the registry of this
// test binary holds the memory backend, which the examples import).
func TestSchemeErrorMessage(t *testing.T) {
	tests := []struct {
		give *SchemeError
		want string
	}{
		{
			give: &SchemeError{Scheme: "redis"},
			want: `simba: unknown backend URL scheme "redis": import github.com/simba-go/simba/backend-redis to open it ` +
				`(no backend is registered: import a backend package)`,
		},
		{
			give: &SchemeError{Scheme: "memory", Registered: []string{"redis", "rediss"}},
			want: `simba: unknown backend URL scheme "memory": import github.com/simba-go/simba/core/memory to open it ` +
				`(registered: redis, rediss)`,
		},
		{
			give: &SchemeError{Scheme: "etcd", Registered: []string{"zk"}},
			want: `simba: unknown backend URL scheme "etcd" (registered: zk)`,
		},
		{
			give: &SchemeError{Registered: []string{"memory", "zk"}},
			want: `simba: backend URL has no scheme: want SCHEME://... (registered: memory, zk)`,
		},
	}
	for _, tt := range tests {
		if got := tt.give.Error(); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
	}
}

func TestRegisterBackendPanics(t *testing.T) {
	registerForTest(t, "test-dup", stubOpener)
	tests := []struct {
		name   string
		scheme string
		open   BackendOpener
		want   string
	}{
		{name: "empty scheme", scheme: "", open: stubOpener, want: "invalid scheme"},
		{name: "space", scheme: "re dis", open: stubOpener, want: "invalid scheme"},
		{name: "leading digit", scheme: "1x", open: stubOpener, want: "invalid scheme"},
		{name: "with separator", scheme: "redis://", open: stubOpener, want: "invalid scheme"},
		{name: "nil opener", scheme: "test-nil-opener", open: nil, want: "nil opener"},
		{name: "duplicate", scheme: "test-dup", open: stubOpener, want: "twice"},
		{name: "duplicate in another case", scheme: "TEST-Dup", open: stubOpener, want: "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, ok := r.(string); !ok || !strings.Contains(msg, tt.want) {
					t.Errorf("RegisterBackend(%q) panicked with %v, want a message with %q", tt.scheme, r, tt.want)
				}
			}()
			RegisterBackend(tt.scheme, tt.open)
		})
	}
	if slices.Contains(BackendSchemes(), "test-nil-opener") {
		t.Error("a refused registration was kept")
	}
}

func TestRegistryConcurrentUse(t *testing.T) {
	registerForTest(t, "test-conc", stubOpener)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 4 {
		scheme := fmt.Sprintf("test-conc-%d", i)
		wg.Go(func() { registerForTest(t, scheme, stubOpener) })
		wg.Go(func() {
			for range 100 {
				if _, err := OpenBackend(ctx, "test-conc://h"); err != nil {
					t.Error(err)
					return
				}
				_ = BackendSchemes()
			}
		})
	}
	wg.Wait()
	for i := range 4 {
		if !slices.Contains(BackendSchemes(), fmt.Sprintf("test-conc-%d", i)) {
			t.Errorf("test-conc-%d missing from %v", i, BackendSchemes())
		}
	}
}

// TestOpenBackendBlankURL: an empty URL, one of spaces, and one with a
// space around it (an unset or badly quoted variable) are named as such,
// not as a URL without a scheme, and still quote nothing of the URL.
func TestOpenBackendBlankURL(t *testing.T) {
	registerForTest(t, "test-blank", stubOpener)
	tests := []struct {
		give string
		want string
	}{
		{give: "", want: "backend URL is empty"},
		{give: "   ", want: "backend URL is only spaces"},
		{give: "\t\n", want: "backend URL is only spaces"},
		{give: " test-blank://u:s3cr3t@h", want: "backend URL starts or ends with a space"},
		{give: "test-blank://u:s3cr3t@h\n", want: "backend URL starts or ends with a space"},
	}
	for _, tt := range tests {
		_, err := OpenBackend(t.Context(), tt.give)
		var se *SchemeError
		if !errors.Is(err, ErrInvalidURL) || errors.Is(err, ErrUnknownScheme) || !errors.As(err, &se) || se.Scheme != "" {
			t.Errorf("OpenBackend(%q) = %v, want a *SchemeError without scheme matching ErrInvalidURL only", tt.give, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "s3cr3t") {
			t.Errorf("OpenBackend(%q) = %q, want %q and no user information", tt.give, msg, tt.want)
		}
	}
}
