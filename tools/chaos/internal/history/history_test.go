package history_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/tools/chaos/internal/history"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWriteAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := history.Create(path, "n1")
	if err != nil {
		t.Fatal(err)
	}
	before := history.Mono()
	w.Add(history.Record{Kind: history.KindStart, Name: "x", Token: 3, Deadline: 42})
	w.Add(history.Record{Kind: history.KindEnd, Name: "x", Token: 3, Reason: "released", Node: "other"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("read %d records, want 2", len(recs))
	}
	if r := recs[0]; r.Node != "n1" || r.Token != 3 || r.Deadline != 42 || r.T < before {
		t.Errorf("first record %+v: want node n1, token 3, deadline 42, T >= %d", r, before)
	}
	if recs[1].Node != "other" || recs[1].T < recs[0].T {
		t.Errorf("second record %+v: want its own node and a later T", recs[1])
	}
}

func TestReadIgnoresACutLastLineOnly(t *testing.T) {
	recs, err := history.Read(strings.NewReader("{\"t\":1,\"k\":\"ready\"}\n{\"t\":2,\"k\":\"sta"))
	if err != nil || len(recs) != 1 {
		t.Fatalf("Read = %v, %v; want one record and no error", recs, err)
	}
	_, err = history.Read(strings.NewReader("{\"t\":1,\"k\n{\"t\":2,\"k\":\"ready\"}\n"))
	if !errors.Is(err, history.ErrBadHistory) {
		t.Fatalf("Read of a broken middle line = %v, want ErrBadHistory", err)
	}
}
