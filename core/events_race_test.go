package simba

import (
	"sync"
	"testing"
	"time"
)

// TestAddRacingDrainKeepsTheRing races add against a deliver task that
// claims the last events of its hand, with a bound of one: when the task
// claims them between add's count of the hand and its drop, the hand no
// longer holds an event to drop, and add must not take one from an empty
// ring (which lost the new event and left a count of -1). Each round
// hands one event to the task and adds one: the ring then holds exactly
// the one added.
func TestAddRacingDrainKeepsTheRing(t *testing.T) {
	const rounds = 200_000
	deadline := time.Now().Add(5 * time.Second)
	l := &listener{}
	var mu sync.Mutex // the client's evMu
	for i := 0; i < rounds && time.Now().Before(deadline); i++ {
		mu.Lock()
		l.n, l.head = 0, 0
		l.handLen = 1
		l.handPos.Store(0)
		mu.Unlock()
		claimed := make(chan struct{})
		go func() {
			l.handPos.Add(1) // the deliver task claims the hand's one event
			close(claimed)
		}()
		mu.Lock()
		l.add(Event{Kind: EventElected}, 1)
		n := l.n
		mu.Unlock()
		<-claimed
		if n != 1 {
			t.Fatalf("round %d: the ring holds %d events after an add, want 1", i, n)
		}
	}
}
