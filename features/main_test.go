package features

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cucumber/godog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestFeatures runs every feature file of this folder on each selected
// backend, as a subtest per backend and per scenario. See README.md for how
// backends are chosen and how tags select scenarios. The backends run side
// by side: each keeps to its own server and to names of its own, and their
// scenarios spend most of their time waiting on real time.
func TestFeatures(t *testing.T) {
	backends, err := selectedBackends()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A mistyped tag would otherwise pass as a green run of nothing.
		if tags := strings.TrimSpace(os.Getenv("SIMBA_FEATURES_TAGS")); tags != "" && scenariosRun.Load() == 0 {
			t.Errorf("SIMBA_FEATURES_TAGS=%q selected no scenario on %s", tags, strings.Join(backends, ", "))
		}
		removeSimbaBinary()
		for _, line := range failovers() {
			t.Log(line)
		}
	})
	for _, name := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runSuite(t, name)
		})
	}
}

// runSuite runs the scenarios that apply to one backend.
func runSuite(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	env, err := openEnv(ctx, t, name)
	cancel()
	if err != nil {
		t.Fatalf("prepare %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := env.cleanup(ctx); err != nil {
			t.Errorf("clean up %s: %v", name, err)
		}
	})
	format := os.Getenv("SIMBA_FEATURES_FORMAT")
	if format == "" {
		format = "progress"
	}
	suite := godog.TestSuite{
		Name: "simba-" + name,
		ScenarioInitializer: func(sc *godog.ScenarioContext) {
			initScenario(sc, env)
		},
		Options: &godog.Options{
			Format:   format,
			Paths:    []string{"."},
			Tags:     tagsFor(env),
			Strict:   true,
			TestingT: t,
			NoColors: true,
		},
	}
	if code := suite.Run(); code != 0 {
		t.Fatalf("the %s features failed (godog status %d)", name, code)
	}
}

// tagsFor selects the scenarios that apply to env: never @wip (unless
// SIMBA_FEATURES_WIP is set, to see whether they pass yet); a scenario
// tagged with backend names (@memory, @redis, @postgres, @mysql, @zk) only
// on those backends; @broadcast only where releases are broadcast, @polling
// only where they are not; @cli only where the simba command is given a
// URL of the backend (the memory backend and Redis, not a Redis Cluster). SIMBA_FEATURES_TAGS narrows the selection
// further.
func tagsFor(env *backendEnv) string {
	var tags []string
	if os.Getenv("SIMBA_FEATURES_WIP") == "" {
		tags = append(tags, "~@wip")
	}
	if env.broadcasts {
		tags = append(tags, "~@polling")
	} else {
		tags = append(tags, "~@broadcast")
	}
	if env.cliBackend == "" {
		tags = append(tags, "~@cli")
	}
	// godog's tag expressions are an "or" (",") of "and"s ("&&"): a
	// scenario applies when it names this backend, or names none.
	untagged := slices.Clone(tags)
	for _, b := range allBackends {
		untagged = append(untagged, "~@"+b)
	}
	bases := []string{
		strings.Join(append(slices.Clone(tags), "@"+env.name), " && "),
		strings.Join(untagged, " && "),
	}
	if env.name == backendRedisCluster {
		bases = append(bases, strings.Join(append(slices.Clone(tags), "@"+backendRedis), " && "))
	}
	var alts []string
	extra := strings.TrimSpace(os.Getenv("SIMBA_FEATURES_TAGS"))
	for _, base := range bases {
		if extra == "" {
			alts = append(alts, base)
			continue
		}
		// Every alternative of the extra expression gets the base
		// conditions.
		for _, alt := range strings.Split(extra, ",") {
			alts = append(alts, base+" && "+strings.TrimSpace(alt))
		}
	}
	return strings.Join(alts, ",")
}

// scenariosRun counts the scenarios begun on every backend of the run.
var scenariosRun atomic.Int64

// initScenario builds the world of one scenario and binds the steps to it.
func initScenario(sc *godog.ScenarioContext, env *backendEnv) {
	w := newWorld(env)
	step := func(expr string, fn any) { sc.Step(expr, w.handler(expr, fn)) }
	w.registerSteps(step)
	sc.Before(func(ctx context.Context, s *godog.Scenario) (context.Context, error) {
		scenariosRun.Add(1)
		for _, tag := range s.Tags {
			if tag.Name == "@cli" {
				w.cli, w.env = true, env.forCLI()
			}
		}
		return ctx, w.start()
	})
	sc.After(func(ctx context.Context, _ *godog.Scenario, _ error) (context.Context, error) {
		return ctx, w.finish()
	})
}

// Failover times measured by backends.feature, reported at the end.
var (
	failoverMu    sync.Mutex
	failoverLines []string
)

func recordFailover(backend string, took, bound time.Duration) {
	failoverMu.Lock()
	defer failoverMu.Unlock()
	failoverLines = append(failoverLines, fmt.Sprintf("failover backend=%s took=%v bound=%v", backend, took.Round(time.Millisecond), bound))
}

func failovers() []string {
	failoverMu.Lock()
	defer failoverMu.Unlock()
	return append([]string(nil), failoverLines...)
}
