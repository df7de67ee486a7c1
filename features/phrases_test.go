package features

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/cucumber/godog"
)

// A step pattern names what the step is about (nodes, a node's term, its
// listener, the backend, the simba command, ...) and ends with a group for
// the rest of the sentence, which one of the subject's phrases reads. The
// phrase's method gets the pattern's groups first, then its own, in order.
// A pattern that begins with an optional `within <duration>` passes that
// duration to the phrases that wait (timed); the others refuse it.
type phrase struct {
	re    *regexp.Regexp
	fn    reflect.Value
	timed bool
}

// phrases is the list of phrases of one pattern.
type phrases []phrase

// say is a phrase whose method does not wait.
func say(expr string, fn any) phrase { return newPhrase(expr, fn, false) }

// timed is a phrase whose method takes the pattern's `within` duration
// (empty when the sentence gives none) as its first argument.
func timed(expr string, fn any) phrase { return newPhrase(expr, fn, true) }

func newPhrase(expr string, fn any, isTimed bool) phrase {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.Type().NumOut() != 1 || v.Type().Out(0) != errorType {
		panic(fmt.Sprintf("features: phrase %q: %T must return only an error", expr, fn))
	}
	return phrase{re: regexp.MustCompile("^(?:" + expr + ")$"), fn: v, timed: isTimed}
}

// withinGroup is how a pattern begins when its phrases may wait: `within`
// and a duration as world.dur reads it ("300ms", "one lease duration",
// "half a renew interval", "3 lease durations").
const withinGroup = `^(?:within (\S+(?: a)?(?: (?:lease|renew) (?:durations?|intervals?)| time)?) )?`

// match returns the phrase that reads rest, and its groups. A sentence
// that says `within` is read by a timed phrase; one that does not, by a
// phrase that does not wait when one reads it (`A is leader of "x"` sets
// A up; `within 2s A is leader of "x"` waits for it).
func (ps phrases) match(rest string, within bool) (phrase, []string, error) {
	var found []phrase
	var groups [][]string
	for _, p := range ps {
		if m := p.re.FindStringSubmatch(rest); m != nil && (p.timed || !within) {
			found = append(found, p)
			groups = append(groups, m[1:])
		}
	}
	if len(found) > 1 && !within {
		for i, p := range found {
			if !p.timed {
				found, groups = found[i:i+1], groups[i:i+1]
				break
			}
		}
	}
	if len(found) != 1 {
		return phrase{}, nil, fmt.Errorf("features: %d phrases read %q", len(found), rest)
	}
	return found[0], groups[0], nil
}

// takesTable reports whether the phrases' methods take the step's table
// (all of them, or none: godog gives the table to the pattern).
func (ps phrases) takesTable() bool {
	n := 0
	for _, p := range ps {
		t := p.fn.Type()
		if t.NumIn() > 0 && t.In(t.NumIn()-1) == tableType {
			n++
		}
	}
	if n != 0 && n != len(ps) {
		panic("features: some phrases of a pattern take a table and some do not")
	}
	return n > 0
}

var tableType = reflect.TypeFor[*godog.Table]()

// handler returns the function godog calls for the step pattern expr bound
// to fn (a method of world, or phrases): it finds the method the sentence
// means, runs it through w.run and, when it fails, puts the method's own
// file and line in front of the error, so that a failure points to the code
// of its step rather than to this adapter.
func (w *world) handler(expr string, fn any) any {
	ps, isPhrases := fn.(phrases)
	var t reflect.Type
	if isPhrases {
		in := make([]reflect.Type, regexp.MustCompile(expr).NumSubexp())
		for i := range in {
			in[i] = reflect.TypeFor[string]()
		}
		if ps.takesTable() {
			in = append(in, tableType)
		}
		t = reflect.FuncOf(in, []reflect.Type{errorType}, false)
	} else {
		v := reflect.ValueOf(fn)
		t = v.Type()
		if t.Kind() != reflect.Func || t.NumOut() != 1 || t.Out(0) != errorType {
			panic(fmt.Sprintf("features: step %q: %T must return only an error", expr, fn))
		}
	}
	hasWithin := strings.HasPrefix(expr, withinGroup)
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		method, in, err := reflect.ValueOf(fn), args, error(nil)
		if isPhrases {
			method, in, err = ps.resolve(args, hasWithin)
		}
		if err == nil {
			err = w.run(func() error {
				w.settle()
				err, _ := method.Call(in)[0].Interface().(error)
				return err
			})
			if err != nil {
				err = fmt.Errorf("%s: %w", stepLocation(method), err)
			}
		}
		res := reflect.New(errorType).Elem()
		if err != nil {
			res.Set(reflect.ValueOf(err))
		}
		return []reflect.Value{res}
	}).Interface()
}

// resolve finds the phrase that reads the last string argument and builds
// the arguments of its method.
func (ps phrases) resolve(args []reflect.Value, hasWithin bool) (reflect.Value, []reflect.Value, error) {
	var table []reflect.Value
	if n := len(args); n > 0 && args[n-1].Type() == tableType {
		args, table = args[:n-1], args[n-1:]
	}
	strs := make([]string, len(args))
	for i, a := range args {
		strs[i] = a.String()
	}
	p, groups, err := ps.match(strs[len(strs)-1], hasWithin && strs[0] != "")
	if err != nil {
		return reflect.Value{}, nil, err
	}
	words := append(slicesClone(strs[:len(strs)-1]), groups...)
	if hasWithin && !p.timed {
		if words[0] != "" {
			return reflect.Value{}, nil, fmt.Errorf("features: %q does not wait: drop the \"within %s\"", strs[len(strs)-1], words[0])
		}
		words = words[1:]
	}
	t := p.fn.Type()
	if t.NumIn() != len(words)+len(table) {
		return reflect.Value{}, nil, fmt.Errorf("features: the phrase %s gives %d arguments to a method of %d", p.re, len(words)+len(table), t.NumIn())
	}
	in := make([]reflect.Value, 0, t.NumIn())
	for i, s := range words {
		switch t.In(i).Kind() {
		case reflect.String:
			in = append(in, reflect.ValueOf(s))
		case reflect.Int:
			n, err := strconv.Atoi(s)
			if err != nil {
				return reflect.Value{}, nil, fmt.Errorf("features: %q is not a number", s)
			}
			in = append(in, reflect.ValueOf(n))
		default:
			panic(fmt.Sprintf("features: a phrase cannot pass a %v", t.In(i)))
		}
	}
	return p.fn, append(in, table...), nil
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// stepLocation returns where the step method fn is declared, as
// "file:line name". Go gives a method value the position of a generated
// wrapper, so the declarations of world's methods are read from the
// package's files.
func stepLocation(fn reflect.Value) string {
	f := runtime.FuncForPC(fn.Pointer())
	if f == nil {
		return "unknown step"
	}
	full := f.Name()
	name := strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")
	if at, ok := methodLines()[name]; ok {
		return at + " " + name
	}
	file, line := f.FileLine(f.Entry())
	return fmt.Sprintf("%s:%d %s", filepath.Base(file), line, name)
}

// methodLines maps each method of world to the file and line that
// declare it, read once from the package's files.
var methodLines = sync.OnceValue(func() map[string]string {
	decl := regexp.MustCompile(`^func \(w \*world\) (\w+)\(`)
	out := make(map[string]string)
	files, _ := filepath.Glob("*_test.go")
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		for line := 1; s.Scan(); line++ {
			if m := decl.FindStringSubmatch(s.Text()); m != nil {
				out[m[1]] = fmt.Sprintf("%s:%d", name, line)
			}
		}
		_ = f.Close()
	}
	return out
})
