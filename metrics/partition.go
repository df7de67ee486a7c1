package simbametrics

import (
	"slices"
	"strconv"
	"strings"

	simba "github.com/simba-go/simba/core"
)

// PartitionOf reads an election's lease name as a partition of a group:
// simba.Group names partition i of group g "g.i". It reports ok when name
// is a group name, a dot and a partition number written as
// strconv.Itoa writes it (no sign, no leading zero) below
// simba.MaxPartitions.
//
// A client's snapshot does not say which elections belong to a group, so
// this rule is all the Collector and SnapshotHandler have: an election of
// its own named like a partition ("backup.2") is counted as partition 2
// of a group "backup". Give such elections names that do not end in a
// number to keep them out of the group figures.
func PartitionOf(name string) (group string, partition int, ok bool) {
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 || dot == len(name)-1 {
		return "", 0, false
	}
	digits := name[dot+1:]
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || i >= simba.MaxPartitions || strconv.Itoa(i) != digits {
		return "", 0, false
	}
	return name[:dot], i, true
}

// groupShare is what one node holds of one group, read from its snapshot.
type groupShare struct {
	name       string
	partitions int   // partitions of the group this node runs
	held       []int // the partitions it holds, in increasing order
}

// groupShares reads the groups of a snapshot: the elections named like
// partitions (PartitionOf), by group, sorted by group name. A group is
// listed as soon as this node runs one of its partitions, held or not.
func groupShares(s simba.Snapshot) []groupShare {
	var out []groupShare
	at := make(map[string]int)
	for _, l := range s.Leases {
		if l.Kind != KindElection {
			continue
		}
		g, i, ok := PartitionOf(l.Name)
		if !ok {
			continue
		}
		k, seen := at[g]
		if !seen {
			k = len(out)
			at[g] = k
			out = append(out, groupShare{name: g, held: []int{}})
		}
		out[k].partitions++
		if l.State == simba.StateHolding {
			out[k].held = append(out[k].held, i)
		}
	}
	for k := range out {
		slices.Sort(out[k].held)
	}
	slices.SortFunc(out, func(a, b groupShare) int { return strings.Compare(a.name, b.name) })
	return out
}
