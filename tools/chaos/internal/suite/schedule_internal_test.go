package suite

import (
	"slices"
	"testing"
)

func TestTopologyScheduleMixesEveryPairing(t *testing.T) {
	for _, tt := range []struct {
		tf, nf, want []string
	}{
		{[]string{"pk"}, nil, []string{"pk"}},
		{[]string{"pk"}, []string{"kill", "stop"}, []string{"pk", "kill", "pk", "stop"}},
		{[]string{"pk", "fo"}, []string{"kill", "stop"}, []string{"pk", "kill", "fo", "stop"}},
		{[]string{"a", "b", "c"}, []string{"kill", "stop"},
			[]string{"a", "kill", "b", "stop", "c", "kill", "a", "stop", "b", "kill", "c", "stop"}},
	} {
		if got := topologySchedule(tt.tf, tt.nf); !slices.Equal(got, tt.want) {
			t.Errorf("topologySchedule(%v, %v) = %v, want %v", tt.tf, tt.nf, got, tt.want)
		}
	}
}
