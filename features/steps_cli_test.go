package features

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The simba command (tools/cmd/simba): the scenarios of cli.feature run the
// binary, built once per run, as processes of their own, beside the nodes.
// Time is real for them on every backend: a process outside the test
// cannot share a synctest bubble's clock.

// simbaBuild is the simba command built for the run; TestFeatures removes
// it at the end.
var simbaBuild struct {
	once      sync.Once
	dir, path string
	err       error
}

// simbaBinary builds the simba command from the tools module, the first
// time a scenario needs it, and returns its path.
func simbaBinary() (string, error) {
	simbaBuild.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			simbaBuild.err = fmt.Errorf("build simba: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "simba-features-")
		if err != nil {
			simbaBuild.err = fmt.Errorf("build simba: %w", err)
			return
		}
		simbaBuild.dir = dir
		path := filepath.Join(dir, "simba")
		// Without -race, as the tools module's own tests build it: one of
		// the two builds finds the other's packages in the cache.
		build := exec.Command(goTool, "build", "-o", path, "./cmd/simba")
		build.Dir = filepath.Join("..", "tools")
		if out, err := build.CombinedOutput(); err != nil {
			simbaBuild.err = fmt.Errorf("build simba: %w\n%s", err, bytes.TrimSpace(out))
			return
		}
		simbaBuild.path = path
	})
	return simbaBuild.path, simbaBuild.err
}

// removeSimbaBinary removes what simbaBinary built.
func removeSimbaBinary() {
	if simbaBuild.dir != "" {
		_ = os.RemoveAll(simbaBuild.dir)
	}
}

// simbaProc is one simba process of a scenario, "simba 1".
type simbaProc struct {
	name   string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{} // closed once the process has exited
	code   int           // its exit code, as a shell reports it; read after done
}

// syncBuffer is the output of a process, written by exec's copying
// goroutine while steps read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// simbaWait bounds "simba 1 exits with code N" without "within": the
// process is expected to end on its own, soon.
const simbaWait = 10 * time.Second

// simbaRuns starts "simba LINE", in the background. LINE is read like a
// shell line, with the suite's lease names: a word in double quotes is a
// lease of the scenario (see world.name), a word in single quotes is
// taken as it is, and words are split at spaces. The backend is given in
// SIMBA_BACKEND; lock, leader and status get the scenario's lease duration
// as --lease unless LINE has one. extra is more of simba's environment,
// NAME=VALUE words.
func (w *world) simbaRuns(name, line, extra string) error {
	if _, ok := w.procs[name]; ok {
		return fmt.Errorf("features: simba %s runs already", name)
	}
	bin, err := simbaBinary()
	if err != nil {
		return err
	}
	args, err := w.shellWords(line)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		switch args[0] {
		case "lock", "leader", "status":
			if !hasFlag(args, "lease") {
				args = append([]string{args[0], "--lease", w.lease(w.timing).String()}, args[1:]...)
			}
		}
	}
	env := []string{"SIMBA_BACKEND=" + w.env.cliBackend}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SIMBA_BACKEND=") {
			env = append(env, kv)
		}
	}
	env = append(env, strings.Fields(extra)...)

	p := &simbaProc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	// A process left in the command's group must not hold the step up
	// once simba has exited.
	p.cmd.WaitDelay = 2 * time.Second
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start simba %s: %w", name, err)
	}
	w.procs[name] = p
	go func() {
		_ = p.cmd.Wait()
		p.code = shellCode(p.cmd.ProcessState)
		close(p.done)
	}()
	return nil
}

// hasFlag reports whether args, before "--", set the flag name, with one
// dash or two.
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		flag := strings.TrimLeft(a, "-")
		if strings.HasPrefix(a, "-") && (flag == name || strings.HasPrefix(flag, name+"=")) {
			return true
		}
	}
	return false
}

// shellCode is a process's exit code as a shell reports it: 128+N when
// signal N ended it.
func shellCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// shellWords splits line into words: see simbaRuns.
func (w *world) shellWords(line string) ([]string, error) {
	var (
		words []string
		word  strings.Builder
		in    bool // a word has begun
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t':
			if in {
				words = append(words, word.String())
				word.Reset()
				in = false
			}
		case '\'', '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("features: unclosed %c in %q", c, line)
			}
			quoted := line[i+1 : i+1+end]
			if c == '"' {
				quoted = w.name(quoted)
			}
			word.WriteString(quoted)
			in = true
			i += end + 1
		default:
			word.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, word.String())
	}
	return words, nil
}

func (w *world) proc(name string) (*simbaProc, error) {
	p, ok := w.procs[name]
	if !ok {
		return nil, fmt.Errorf("features: no simba %s in this scenario", name)
	}
	return p, nil
}

// simbaExits waits for simba name to exit, for at most within (with the
// grace of real time), or simbaWait, and checks its exit code.
func (w *world) simbaExits(within, name string, code int) error {
	p, err := w.proc(name)
	if err != nil {
		return err
	}
	limit := simbaWait
	if within != "" {
		if limit, err = w.cliDur(within); err != nil {
			return err
		}
	}
	t := time.NewTimer(w.grace(limit))
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return fmt.Errorf("simba %s did not exit within %v%s", name, limit, p.transcript(w))
	}
	if p.code != code {
		return fmt.Errorf("simba %s exited with code %d, not %d%s", name, p.code, code, p.transcript(w))
	}
	return nil
}

// simbaPrinted checks that a line of what simba name wrote (its output,
// which the command shares, or its stderr) contains text, or, with "no ",
// that none does. The lines are read without the scenario's id in its
// lease names and with every run of spaces made one; in text, <token>
// stands for a token, a decimal number above zero. With within, the check
// waits until the text appears.
func (w *world) simbaPrinted(within, name, stream, no, text string) error {
	p, err := w.proc(name)
	if err != nil {
		return err
	}
	parts := strings.Split(strings.Join(strings.Fields(text), " "), "<token>")
	for i, part := range parts {
		parts[i] = regexp.QuoteMeta(part)
	}
	re, err := regexp.Compile(strings.Join(parts, "[1-9][0-9]*"))
	if err != nil {
		return err
	}
	printed := func() bool {
		return re.MatchString(p.lines(w, stream))
	}
	switch {
	case no != "" && within != "":
		return errors.New("features: \"within\" waits for a line to appear, not for none to")
	case no != "":
		if printed() {
			return fmt.Errorf("simba %s's %s has %q%s", name, stream, text, p.transcript(w))
		}
		return nil
	case within == "":
		if !printed() {
			return fmt.Errorf("simba %s's %s has no %q%s", name, stream, text, p.transcript(w))
		}
		return nil
	}
	d, err := w.cliDur(within)
	if err != nil {
		return err
	}
	if err := w.eventually(d, fmt.Sprintf("simba %s's %s has no %q", name, stream, text), printed); err != nil {
		return fmt.Errorf("%w%s", err, p.transcript(w))
	}
	return nil
}

// lines returns one stream of p, read as simbaPrinted reads it.
func (p *simbaProc) lines(w *world, stream string) string {
	out := p.stdout.String()
	if stream == "stderr" {
		out = p.stderr.String()
	}
	out = strings.ReplaceAll(out, w.id+".", "")
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// transcript is what p printed, for a failure message.
func (p *simbaProc) transcript(w *world) string {
	return fmt.Sprintf("\n--- simba %s output:\n%s--- simba %s stderr:\n%s---", p.name, p.lines(w, "output"), p.name, p.lines(w, "stderr"))
}

// transcripts are the transcripts of the simba processes named, for a
// failure message.
func (w *world) transcripts(names ...string) string {
	var b strings.Builder
	for _, name := range names {
		if p, ok := w.procs[name]; ok {
			b.WriteString(p.transcript(w))
		}
	}
	return b.String()
}

// signals are the signals a step sends to simba.
var signals = map[string]syscall.Signal{
	"SIGTERM": syscall.SIGTERM,
	"SIGINT":  syscall.SIGINT,
	"SIGHUP":  syscall.SIGHUP,
	"SIGQUIT": syscall.SIGQUIT,
	"SIGSTOP": syscall.SIGSTOP, // a paused simba: its command runs on
	"SIGCONT": syscall.SIGCONT,
}

// simbaSignalled sends a signal to simba name (not to its command).
func (w *world) simbaSignalled(name, signal string) error {
	p, err := w.proc(name)
	if err != nil {
		return err
	}
	sig, ok := signals[signal]
	if !ok {
		return fmt.Errorf("features: unknown signal %s", signal)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal simba %s: %w", name, err)
	}
	return nil
}

// printedToken matches the lines in which a command printed its token.
var printedToken = regexp.MustCompile(`(?m)\bSIMBA_TOKEN=(\d+)\s*$`)

// printedTokensRise checks that the SIMBA_TOKEN=N lines the commands of
// simba first, then of simba then, printed show at least two tokens,
// each above zero and above the one before; with within, it waits for
// them.
func (w *world) printedTokensRise(within, first, then string) error {
	if within == "" {
		return w.printedTokensIncrease(first, then)
	}
	d, err := w.cliDur(within)
	if err != nil {
		return err
	}
	var last error
	if err := w.eventually(d, "the tokens printed do not increase", func() bool {
		last = w.printedTokensIncrease(first, then)
		return last == nil
	}); err != nil {
		return fmt.Errorf("%w: %w", err, last)
	}
	return nil
}

func (w *world) printedTokensIncrease(first, then string) error {
	var tokens []uint64
	for _, name := range []string{first, then} {
		if name == "" {
			continue
		}
		p, err := w.proc(name)
		if err != nil {
			return err
		}
		for _, m := range printedToken.FindAllStringSubmatch(p.stdout.String(), -1) {
			tok, err := strconv.ParseUint(m[1], 10, 64)
			if err != nil {
				return err
			}
			tokens = append(tokens, tok)
		}
	}
	if len(tokens) < 2 {
		return fmt.Errorf("the commands printed %d tokens, want at least two%s", len(tokens), w.transcripts(first, then))
	}
	for i, tok := range tokens {
		if tok == 0 || (i > 0 && tok <= tokens[i-1]) {
			return fmt.Errorf("the tokens printed do not increase: %v%s", tokens, w.transcripts(first, then))
		}
	}
	return nil
}

// cliDur reads a duration phrase against the timing simba is given: the
// scenario's lease duration, renewed every third of it.
func (w *world) cliDur(phrase string) (time.Duration, error) {
	return w.dur(phrase, w.cliTiming())
}

// stopSimbas ends the scenario's simba processes that still run: SIGTERM,
// which has simba stop its command, then SIGKILL.
func (w *world) stopSimbas() error {
	var errs []error
	for _, p := range w.procs {
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			errs = append(errs, fmt.Errorf("simba %s did not exit on SIGTERM within 10s%s", p.name, p.transcript(w)))
		}
	}
	return errors.Join(errs...)
}

// dropCLIKeys removes, on Redis, the keys of the scenario's leases, which
// simba keeps under its default prefix rather than the run's.
func (w *world) dropCLIKeys() error {
	if w.env.redis == nil || !w.cli {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	iter := w.env.redis.Scan(ctx, 0, w.env.prefix+"*:"+w.id+".*", 500).Iterator()
	for iter.Next(ctx) {
		errs = append(errs, w.env.redis.Del(ctx, iter.Val()).Err())
	}
	return errors.Join(append(errs, iter.Err())...)
}
