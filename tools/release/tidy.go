package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// tidyOptions says what tidyAll does.
type tidyOptions struct {
	// write: run go mod tidy and write its result; else compare only.
	write bool
	// exactSiblingSums: the go.sum lines of siblings resolved through the
	// proxy must hold the proxy's checksums (written so, or compared so).
	// Otherwise a go.sum keeps the checksums it records for a sibling
	// version (those of the released version) and a comparison only asks
	// that the lines be there.
	exactSiblingSums bool
}

// runTidy is "release tidy".
func runTidy(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("tidy", errOut)
	check := fs.Bool("check", false, "print what go mod tidy would change in each module and fail if it would change anything")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	ws, err := loadWorkspace()
	if err != nil {
		return err
	}
	return tidyAll(ctx, ws, tidyOptions{write: !*check}, out)
}

// tidyAll runs go mod tidy in every module of ws, outside the workspace. A
// module that replaces every sibling it requires is tidied as is. A module
// that requires a sibling without a replace line (the module users go
// install from) resolves its siblings through a file-system proxy of the
// working tree, at the version the go.mod files name, built once.
func tidyAll(ctx context.Context, ws *workspace, opts tidyOptions, out io.Writer) error {
	var px *tidyProxy
	defer func() {
		if px != nil {
			px.close()
		}
	}()
	// The modules with replace lines first: the proxy is made from the
	// tree after their go.mod and go.sum files are tidy.
	var plain, viaProxy []*gomod
	for _, m := range ws.modules {
		if len(ws.unreplacedSiblings(m)) == 0 {
			plain = append(plain, m)
		} else {
			viaProxy = append(viaProxy, m)
		}
	}
	var untidy []string
	for _, m := range append(plain, viaProxy...) {
		var diff string
		var err error
		how := ""
		if len(ws.unreplacedSiblings(m)) == 0 {
			diff, err = tidyPlain(ctx, ws, m, opts.write)
		} else {
			if px == nil {
				if px, err = newTidyProxy(ctx, ws); err != nil {
					return err
				}
			}
			diff, err = px.tidy(ctx, m, opts)
			how = " (siblings from the proxy of the working tree)"
		}
		switch {
		case err != nil:
			return fmt.Errorf("tidy %s: %w", m.dir, err)
		case diff == "":
			fmt.Fprintf(out, "ok   tidy %s%s\n", m.dir, how)
		case opts.write:
			fmt.Fprintf(out, "tidied %s%s:\n%s", m.dir, how, diff)
		default:
			fmt.Fprintf(out, "FAIL tidy %s%s: go mod tidy would change:\n%s", m.dir, how, diff)
			untidy = append(untidy, m.dir)
		}
	}
	if len(untidy) > 0 {
		hint := "run make tidy"
		if opts.exactSiblingSums {
			hint = "run make tidy, or go run ./tools/release -version vX.Y.Z to record the siblings' checksums as they are now"
		}
		return fmt.Errorf("not tidy: %s (%s)", strings.Join(untidy, ", "), hint)
	}
	return nil
}

// tidyPlain runs go mod tidy (-diff unless write) in m with go.work off,
// and returns the change.
func tidyPlain(ctx context.Context, ws *workspace, m *gomod, write bool) (string, error) {
	dir := ws.abs(m)
	env := withEnv(os.Environ(), "GOWORK=off")
	before, err := readModSum(dir)
	if err != nil {
		return "", err
	}
	if !write {
		out, err := runGo(ctx, dir, env, "mod", "tidy", "-diff")
		if err != nil && strings.HasPrefix(out, "diff ") {
			return out, nil
		}
		return "", err
	}
	if _, err := runGo(ctx, dir, env, "mod", "tidy"); err != nil {
		return "", err
	}
	after, err := readModSum(dir)
	if err != nil {
		return "", err
	}
	return diffLines("go.mod", before[0], after[0]) + diffLines("go.sum", before[1], after[1]), nil
}

// readModSum returns go.mod and go.sum of dir; a missing go.sum is empty.
func readModSum(dir string) ([2][]byte, error) {
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return [2][]byte{}, err
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return [2][]byte{}, err
	}
	return [2][]byte{mod, sum}, nil
}

// tidyProxy tidies modules through a file-system proxy of the working tree.
type tidyProxy struct {
	ws  *workspace
	tmp string
	env []string
	n   int
}

func newTidyProxy(ctx context.Context, ws *workspace) (*tidyProxy, error) {
	v, err := ws.requiredVersion()
	if err != nil {
		return nil, err
	}
	if err := ws.checkRequiredAt(v); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "simba-tidy-")
	if err != nil {
		return nil, err
	}
	px := &tidyProxy{ws: ws, tmp: tmp}
	if _, err := buildProxy(ws, filepath.Join(tmp, "proxy"), v); err != nil {
		px.close()
		return nil, err
	}
	if px.env, err = proxyEnv(ctx, ws, filepath.Join(tmp, "proxy"), filepath.Join(tmp, "modcache"), true); err != nil {
		px.close()
		return nil, err
	}
	return px, nil
}

func (px *tidyProxy) close() { os.RemoveAll(px.tmp) }

// tidy runs go mod tidy for m on copies of its go.mod and go.sum (-modfile),
// the siblings' lines left out of the go.sum copy so that they are
// recorded afresh from the proxy; it then writes or compares the result
// and returns the change.
func (px *tidyProxy) tidy(ctx context.Context, m *gomod, opts tidyOptions) (string, error) {
	dir := px.ws.abs(m)
	cur, err := readModSum(dir)
	if err != nil {
		return "", err
	}
	px.n++
	modfile := filepath.Join(px.tmp, fmt.Sprintf("tidy%d.mod", px.n))
	sumfile := strings.TrimSuffix(modfile, ".mod") + ".sum"
	if err := os.WriteFile(modfile, cur[0], 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(sumfile, withoutSiblings(cur[1], px.sibling), 0o644); err != nil {
		return "", err
	}
	if _, err := runGo(ctx, dir, px.env, "mod", "tidy", "-modfile="+modfile); err != nil {
		return "", err
	}
	newMod, err := os.ReadFile(modfile)
	if err != nil {
		return "", err
	}
	newSum, err := os.ReadFile(sumfile)
	if err != nil {
		return "", err
	}
	if !opts.exactSiblingSums {
		newSum = keepSiblingSums(cur[1], newSum, px.sibling)
	}
	diff := diffLines("go.mod", cur[0], newMod) + diffLines("go.sum", cur[1], newSum)
	if !opts.write || diff == "" {
		return diff, nil
	}
	if !bytes.Equal(cur[0], newMod) {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), newMod, 0o644); err != nil {
			return "", err
		}
	}
	if !bytes.Equal(cur[1], newSum) {
		if err := os.WriteFile(filepath.Join(dir, "go.sum"), newSum, 0o644); err != nil {
			return "", err
		}
	}
	return diff, nil
}

// sibling reports whether path is a module of the workspace.
func (px *tidyProxy) sibling(path string) bool {
	_, ok := px.ws.byPath[path]
	return ok
}

// sumLines splits a go.sum into its non-empty lines.
func sumLines(data []byte) []string {
	var lines []string
	for l := range strings.SplitSeq(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// sumKey returns "path version" of a go.sum line (version may end in
// /go.mod) and the module path.
func sumKey(line string) (key, path string) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return line, ""
	}
	return f[0] + " " + f[1], f[0]
}

func joinLines(lines []string) []byte {
	if len(lines) == 0 {
		return nil
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// withoutSiblings returns sum without the lines of modules sibling accepts.
func withoutSiblings(sum []byte, sibling func(string) bool) []byte {
	var keep []string
	for _, l := range sumLines(sum) {
		if _, p := sumKey(l); !sibling(p) {
			keep = append(keep, l)
		}
	}
	return joinLines(keep)
}

// keepSiblingSums returns tidied with each sibling line replaced by the line
// old records for the same module version, when it records one.
func keepSiblingSums(old, tidied []byte, sibling func(string) bool) []byte {
	recorded := map[string]string{}
	for _, l := range sumLines(old) {
		if k, p := sumKey(l); sibling(p) {
			recorded[k] = l
		}
	}
	lines := sumLines(tidied)
	for i, l := range lines {
		if k, p := sumKey(l); sibling(p) {
			if r, ok := recorded[k]; ok {
				lines[i] = r
			}
		}
	}
	return joinLines(lines)
}

// diffLines returns the lines of a that b lacks ("-") and of b that a lacks
// ("+"), each in its order, under a header naming the file; nothing when a
// and b are equal.
func diffLines(name string, a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	count := func(lines []string) map[string]int {
		c := map[string]int{}
		for _, l := range lines {
			c[l]++
		}
		return c
	}
	ac, bc := count(al), count(bl)
	var sb strings.Builder
	fmt.Fprintf(&sb, "    %s:\n", name)
	changed := false
	// unmatched prints, with sign, the lines that have no match left in
	// other, taking the matched ones from it.
	unmatched := func(sign string, lines []string, other map[string]int) {
		for _, l := range lines {
			if other[l] > 0 {
				other[l]--
				continue
			}
			fmt.Fprintf(&sb, "    %s%s\n", sign, l)
			changed = true
		}
	}
	unmatched("-", al, bc)
	unmatched("+", bl, ac)
	if !changed {
		fmt.Fprintf(&sb, "    (the same lines in another order)\n")
	}
	return sb.String()
}
