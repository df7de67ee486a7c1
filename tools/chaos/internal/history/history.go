// Package history records what a node of the robustness suite saw, one
// JSON object per line, stamped with the machine-wide monotonic clock
// (CLOCK_MONOTONIC), so that the histories of separate processes on one
// machine share one time axis.
//
// A node appends a record before it acts (a write is recorded before it is
// sent) and flushes every record to the kernel at once, so a node killed
// with SIGKILL leaves a history that ends with its last act.
package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrBadHistory is matched by the errors of Read about a malformed line.
var ErrBadHistory = errors.New("history: malformed record")

// The kinds of records.
const (
	KindReady   = "ready"   // the node runs; Session is filled when it opened one
	KindSession = "session" // a session was opened; Session
	KindStart   = "start"   // a term began; Name, Token, Deadline
	KindWrite   = "write"   // a write is about to be sent; Name, Token, Deadline
	KindResult  = "result"  // the fenced resource answered; Name, Token, OK, Err
	KindEnd     = "end"     // the node stopped counting on a term; Name, Token, Reason
	KindFault   = "fault"   // the suite injected a fault; Fault, Node, Phase ("begin" or "end")
	KindFence   = "fence"   // the fenced resource decided a write; Node (the writer), Name, Token, OK
)

// Record is one line of a history. T is the CLOCK_MONOTONIC reading in
// nanoseconds when the node recorded it.
type Record struct {
	T    int64  `json:"t"`
	Kind string `json:"k"`
	Node string `json:"node,omitempty"`

	Name     string `json:"name,omitempty"`
	Token    uint64 `json:"tok,omitempty"`
	Deadline int64  `json:"dl,omitempty"`      // local deadline of the term seen at T, on the same clock
	Permits  int    `json:"permits,omitempty"` // start of a semaphore's permit: its number of permits
	Asked    int64  `json:"asked,omitempty"`   // start of a permit: when its Acquire call began
	Session  string `json:"sid,omitempty"`
	Reason   string `json:"reason,omitempty"`
	OK       bool   `json:"ok,omitempty"`
	Err      string `json:"err,omitempty"`
	Fault    string `json:"fault,omitempty"`
	Phase    string `json:"phase,omitempty"`
}

// Mono returns CLOCK_MONOTONIC in nanoseconds: the clock Go's own
// monotonic readings come from on Linux, shared by every process of the
// machine.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("history: clock_gettime(CLOCK_MONOTONIC): %v", err)) // cannot fail on Linux
	}
	return ts.Nano()
}

// Writer appends records to a file. It is safe for concurrent use.
type Writer struct {
	mu   sync.Mutex
	f    *os.File
	node string
	err  error
}

// Create opens path for appending (creating it) and returns a writer that
// stamps every record with node.
func Create(path, node string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Writer{f: f, node: node}, nil
}

// Add stamps r with the writer's node (unless set) and with the clock
// (unless r.T is set), and appends it with one write call. The first
// error is kept and returned by Close.
func (w *Writer) Add(r Record) {
	if r.T == 0 {
		r.T = Mono()
	}
	if r.Node == "" {
		r.Node = w.node
	}
	line, err := json.Marshal(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil && w.err == nil {
		_, err = w.f.Write(append(line, '\n'))
	}
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("history: %w", err)
	}
}

// Close closes the file and returns the first error of Add or Close.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = fmt.Errorf("history: %w", err)
	}
	return w.err
}

// Read parses a history. A last line cut short (a node killed in the
// middle of a write) is ignored; any other malformed line is an error
// matching ErrBadHistory.
func Read(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pending error
	for n := 1; sc.Scan(); n++ {
		if pending != nil {
			return nil, pending
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			pending = fmt.Errorf("%w: line %d: %w", ErrBadHistory, n, err)
			continue
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return out, nil
}

// ReadFile reads the history at path.
func ReadFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Read(f)
}
