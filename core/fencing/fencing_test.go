package fencing_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/core/fencing"
	"github.com/simba-go/simba/core/fencingtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValueWrite(t *testing.T) {
	type write struct {
		token uint64
		value string
		want  bool
	}
	tests := []struct {
		name      string
		give      []write
		wantValue string
		wantToken uint64
	}{
		{name: "zero value", wantValue: "", wantToken: 0},
		{name: "first write", give: []write{{3, "a", true}}, wantValue: "a", wantToken: 3},
		{name: "higher", give: []write{{3, "a", true}, {4, "b", true}}, wantValue: "b", wantToken: 4},
		{name: "equal", give: []write{{3, "a", true}, {3, "b", true}}, wantValue: "b", wantToken: 3},
		{name: "lower", give: []write{{3, "a", true}, {2, "stale", false}}, wantValue: "a", wantToken: 3},
		{name: "zero after a token", give: []write{{1, "a", true}, {0, "unfenced", false}}, wantValue: "a", wantToken: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v fencing.Value[string]
			for _, w := range tt.give {
				if got := v.Write(w.token, w.value); got != w.want {
					t.Errorf("Write(%d, %q) = %t, want %t", w.token, w.value, got, w.want)
				}
			}
			value, token := v.Load()
			if value != tt.wantValue || token != tt.wantToken {
				t.Errorf("Load() = (%q, %d), want (%q, %d)", value, token, tt.wantValue, tt.wantToken)
			}
		})
	}
}

func TestValueUpdate(t *testing.T) {
	var v fencing.Value[[]string]
	appendBatch := func(b string) func(*[]string) {
		return func(s *[]string) { *s = append(*s, b) }
	}
	if !v.Update(5, appendBatch("b1")) || !v.Update(5, appendBatch("b2")) {
		t.Fatal("Update with the current token was rejected")
	}
	called := false
	if v.Update(4, func(*[]string) { called = true }) {
		t.Error("Update(4) after token 5 was accepted")
	}
	if called {
		t.Error("Update called f for a stale token")
	}
	if !v.Update(6, nil) {
		t.Error("Update(6, nil) was rejected")
	}
	got, token := v.Load()
	if len(got) != 2 || got[0] != "b1" || got[1] != "b2" || token != 6 {
		t.Errorf("Load() = (%q, %d), want ([b1 b2], 6)", got, token)
	}
}

func TestValueUpdatePanics(t *testing.T) {
	var v fencing.Value[int]
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic of f did not reach the caller")
			}
		}()
		v.Update(9, func(*int) { panic("boom") })
	}()
	// The lock was released and the newer token kept.
	if v.Write(8, 1) {
		t.Error("Write(8) accepted after Update(9) panicked")
	}
	if _, token := v.Load(); token != 9 {
		t.Errorf("token = %d after a panicking Update(9), want 9", token)
	}
}

// writeResource adapts Value.Write to the kit.
type writeResource struct{ v fencing.Value[string] }

func (r *writeResource) Write(_ context.Context, token uint64, value string) (bool, error) {
	return r.v.Write(token, value), nil
}

func (r *writeResource) State(context.Context) (uint64, string, error) {
	value, token := r.v.Load()
	return token, value, nil
}

// updateResource adapts Value.Update to the kit.
type updateResource struct{ writeResource }

func (r *updateResource) Write(_ context.Context, token uint64, value string) (bool, error) {
	return r.v.Update(token, func(s *string) { *s = value }), nil
}

func TestValuePassesKit(t *testing.T) {
	t.Run("Write", func(t *testing.T) {
		fencingtest.Run(t, func(testing.TB) fencingtest.Resource { return &writeResource{} })
	})
	t.Run("Update", func(t *testing.T) {
		fencingtest.Run(t, func(testing.TB) fencingtest.Resource { return &updateResource{} })
	})
}
