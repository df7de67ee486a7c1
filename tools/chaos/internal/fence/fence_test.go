package fence_test

import (
	"errors"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/tools/chaos/internal/fence"
	"github.com/simba-go/simba/tools/chaos/internal/history"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFenceRefusesLowerTokens(t *testing.T) {
	dir := t.TempDir()
	log, err := history.Create(filepath.Join(dir, "log.jsonl"), "suite")
	if err != nil {
		t.Fatal(err)
	}
	s, err := fence.Listen(filepath.Join(dir, "f.sock"), log)
	if err != nil {
		t.Fatal(err)
	}
	a, err := fence.Dial(t.Context(), filepath.Join(dir, "f.sock"), "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := fence.Dial(t.Context(), filepath.Join(dir, "f.sock"), "b")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		c    *fence.Client
		tok  uint64
		want error
	}{{a, 1, nil}, {a, 1, nil}, {b, 2, nil}, {a, 1, fence.ErrRefused}, {b, 2, nil}, {a, 3, nil}}
	for i, st := range steps {
		if err := st.c.Write("x", st.tok); !errors.Is(err, st.want) && (err != nil || st.want != nil) {
			t.Errorf("step %d: Write(%d) = %v, want %v", i, st.tok, err, st.want)
		}
	}
	if got := s.Handovers(); got != 2 {
		t.Errorf("Handovers = %d, want 2 (a to b, b to a)", got)
	}
	if got := s.Owner("x"); got != "a" {
		t.Errorf("Owner = %q, want a", got)
	}
	_ = a.Close()
	_ = b.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := history.ReadFile(filepath.Join(dir, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(steps) || recs[3].OK || !recs[2].OK {
		t.Errorf("log %+v: want one record per write, the fourth refused", recs)
	}
}
