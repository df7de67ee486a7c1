package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Entry is a topology that runs can start by name. Each implementation
// registers its entries from an init function of its own file.
type Entry struct {
	// Name is the name Start gives its Topology, for -topology and the
	// reports.
	Name string
	// Backend is the kind of backend of the topology (Topology.Backend).
	Backend string
	// Start starts the servers in a state directory under dir, on free
	// ports, and returns once the topology serves writes.
	Start func(ctx context.Context, dir string) (Topology, error)
	// Unbuildable, when set, is the exact error that keeps this topology
	// from being built from Debian's packages: runs report it and go on
	// with the others instead of starting it.
	Unbuildable string
}

// ErrUnknownTopology is matched by the error of Lookup for a name no
// implementation registered.
var ErrUnknownTopology = errors.New("topology: unknown topology")

var registry struct {
	sync.Mutex
	entries map[string]Entry
}

// Register adds e. A second entry of the same name, or one without a
// name or start function, is a programming error and panics, at init.
func Register(e Entry) {
	registry.Lock()
	defer registry.Unlock()
	if e.Name == "" || (e.Start == nil && e.Unbuildable == "") {
		panic("topology: Register needs a name and a start function")
	}
	if _, dup := registry.entries[e.Name]; dup {
		panic("topology: " + e.Name + " registered twice")
	}
	if registry.entries == nil {
		registry.entries = map[string]Entry{}
	}
	registry.entries[e.Name] = e
}

// Names returns the registered names, sorted.
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	return namesLocked()
}

// Lookup returns the entry of name.
func Lookup(name string) (Entry, error) {
	registry.Lock()
	defer registry.Unlock()
	e, ok := registry.entries[name]
	if !ok {
		return Entry{}, fmt.Errorf("%w %q (known: %v)", ErrUnknownTopology, name, namesLocked())
	}
	return e, nil
}

func namesLocked() []string {
	names := make([]string, 0, len(registry.entries))
	for n := range registry.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Registered reports whether an entry of name is registered.
func Registered(name string) bool {
	registry.Lock()
	defer registry.Unlock()
	_, ok := registry.entries[name]
	return ok
}
