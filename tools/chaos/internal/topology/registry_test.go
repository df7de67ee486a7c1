package topology_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/simba-go/simba/tools/chaos/internal/topology"
)

func TestRegistry(t *testing.T) {
	if !slices.Contains(topology.Names(), "redis-single") || !topology.Registered("redis-single") {
		t.Fatalf("names %v lack redis-single", topology.Names())
	}
	e, err := topology.Lookup("redis-single")
	if err != nil || e.Backend != "redis" || e.Start == nil {
		t.Errorf("Lookup(redis-single) = %+v, %v", e, err)
	}
	if _, err := topology.Lookup("no-such"); !errors.Is(err, topology.ErrUnknownTopology) {
		t.Errorf("Lookup(no-such) error %v, want ErrUnknownTopology", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second registration of redis-single did not panic")
		}
	}()
	topology.Register(topology.Entry{Name: "redis-single", Backend: "redis", Start: topology.StartSingle})
}
