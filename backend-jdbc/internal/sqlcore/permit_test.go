package sqlcore

import (
	"context"
	"slices"
	"testing"

	simba "github.com/simba-go/simba/core"
)

// fakePermitTx is a semaphore record and the answers of the statements
// after it; it records what PermitSteps asked.
type fakePermitTx struct {
	permits int    // the record's permits
	token   uint64 // the record's token
	held    bool   // a live session owns a slot of the recorded permits
	take    PermitResult

	checked []string // the names Held was asked about
	above   uint64   // what Take was asked to exceed; 0: not called
	set     []any    // the permits and token stored, nil when not
}

func (f *fakePermitTx) LockSemaphore(context.Context, string, int) (int, uint64, error) {
	return f.permits, f.token, nil
}

func (f *fakePermitTx) Held(_ context.Context, names []string) (bool, error) {
	f.checked = names
	return f.held, nil
}

func (f *fakePermitTx) Take(_ context.Context, _, _ string, above uint64) (uint64, bool, bool, error) {
	f.above = above
	return f.take.Token, f.take.Won, f.take.Live, nil
}

func (f *fakePermitTx) SetSemaphore(_ context.Context, _ string, permits int, token uint64) error {
	f.set = []any{permits, token}
	return nil
}

func TestPermitSteps(t *testing.T) {
	won := PermitResult{Token: 9, Won: true, Live: true}
	for _, tt := range []struct {
		name        string
		give        fakePermitTx
		want        PermitResult
		wantChecked []string
		wantSet     []any
	}{
		{name: "same permits, won", give: fakePermitTx{permits: 2, token: 8, take: won}, want: won, wantSet: []any{2, uint64(9)}},
		{name: "same permits, lost", give: fakePermitTx{permits: 2, token: 8, take: PermitResult{Live: true}}, want: PermitResult{Live: true}},
		{name: "other permits, a slot held", give: fakePermitTx{permits: 3, token: 8, held: true, take: won},
			want: PermitResult{Live: true, Recorded: 3}, wantChecked: []string{"s:0", "s:1", "s:2"}},
		{name: "other permits, none held, lost", give: fakePermitTx{permits: 1, token: 8, take: PermitResult{Live: true}},
			want: PermitResult{Live: true}, wantChecked: []string{"s:0"}, wantSet: []any{2, uint64(8)}},
		{name: "other permits, none held, won", give: fakePermitTx{permits: 1, token: 8, take: won},
			want: won, wantChecked: []string{"s:0"}, wantSet: []any{2, uint64(9)}},
		{name: "caller expired", give: fakePermitTx{permits: 1, token: 8}, want: PermitResult{}, wantChecked: []string{"s:0"}},
	} {
		tx := tt.give
		got, err := PermitSteps(t.Context(), &tx, "id", simba.Permit{Semaphore: "s", Permits: 2, Slot: 1})
		if err != nil || got != tt.want || !slices.Equal(tx.checked, tt.wantChecked) || !slices.Equal(tx.set, tt.wantSet) {
			t.Errorf("%s: %+v, %v, checked %q, set %v; want %+v, checked %q, set %v",
				tt.name, got, err, tx.checked, tx.set, tt.want, tt.wantChecked, tt.wantSet)
		}
		if tt.want.Recorded == 0 && tx.above != 8 {
			t.Errorf("%s: Take asked for a token above %d, want above the record's 8", tt.name, tx.above)
		}
	}
}
