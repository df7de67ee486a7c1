package features

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simbaredis "github.com/simba-go/simba/backend-redis"
	"github.com/simba-go/simba/core/fencing"
	"github.com/simba-go/simba/core/fencingtest"
)

// Steps of fencing (R-FEN-1, R-FEN-2): the stale writer end to end, and
// the fencing kit on each recipe.

// fenced is one fenced value of a scenario, kept by one recipe.
type fenced struct {
	recipe string
	res    fencingtest.Resource
}

const (
	recipeProcess = "in process"
	recipeRedis   = "in Redis"
	recipeSQL     = "in a SQL table"
)

// fencePrefix is the start of the names of the Redis fences a run makes
// under the key prefix p; each fence's keys begin with "{" and that name.
// A fence name is a lease name, without braces: a cluster prefix's hash
// tag is dropped (the fence's own name is its keys' hash tag).
func fencePrefix(p string) string { return strings.NewReplacer("{", "", "}", "").Replace(p) + "fence." }

// valueResource is the in-process recipe, fencing.Value, seen by the kit.
type valueResource struct{ v fencing.Value[string] }

func (r *valueResource) Write(_ context.Context, token uint64, value string) (bool, error) {
	return r.v.Write(token, value), nil
}

func (r *valueResource) State(context.Context) (uint64, string, error) {
	value, token := r.v.Load()
	return token, value, nil
}

// ignoringResource accepts every write, whatever its token: the kit must
// fail it.
type ignoringResource struct {
	mu    sync.Mutex
	token uint64
	value string
}

func (r *ignoringResource) Write(_ context.Context, token uint64, value string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.token, r.value = token, value
	return true, nil
}

func (r *ignoringResource) State(context.Context) (uint64, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.token, r.value, nil
}

// redisResource is the Redis recipe, simbaredis.Fence.
type redisResource struct {
	env  *backendEnv
	name string
	f    *simbaredis.Fence
}

func (r *redisResource) Write(ctx context.Context, token uint64, value string) (bool, error) {
	return r.f.Write(ctx, token, value)
}

func (r *redisResource) State(ctx context.Context) (uint64, string, error) { return r.f.Read(ctx) }

// Reopen builds a new Fence on the same keys.
func (r *redisResource) Reopen(context.Context) (fencingtest.Resource, error) {
	return newRedisResource(r.env, r.name)
}

func newRedisResource(env *backendEnv, name string) (*redisResource, error) {
	f, err := simbaredis.NewFence(env.redis, name)
	if err != nil {
		return nil, err
	}
	return &redisResource{env: env, name: name, f: f}, nil
}

// sqlFence is what the SQL recipe uses of a *simbapg.Fence or a
// *simbamysql.Fence; their SQLHandle is one type.
type sqlFence interface {
	Init(ctx context.Context, db simbapg.SQLHandle, key any) error
	Write(ctx context.Context, db simbapg.SQLHandle, key any, token uint64, values ...any) (bool, error)
}

// sqlResource is the SQL recipe, simbapg.Fence or simbamysql.Fence, on one
// row of the run's fence table.
type sqlResource struct {
	env *backendEnv
	key string
	f   sqlFence
}

// newSQLFence returns the fence of the run's fence table on env's
// database.
func newSQLFence(env *backendEnv) (sqlFence, error) {
	t := simbapg.FenceTable{Table: env.prefix + "fence", Key: "id", Token: "token", Columns: []string{"val"}}
	switch env.dialect {
	case dialectPostgres:
		f, err := simbapg.NewFence(t)
		if err != nil {
			return nil, err
		}
		return f, nil
	case dialectMySQL:
		f, err := simbamysql.NewFence(simbamysql.FenceTable(t))
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("features: %s has no SQL fence", env.name)
}

func newSQLResource(ctx context.Context, env *backendEnv, key string) (*sqlResource, error) {
	f, err := newSQLFence(env)
	if err != nil {
		return nil, err
	}
	if err := f.Init(ctx, env.db, key); err != nil {
		return nil, err
	}
	return &sqlResource{env: env, key: key, f: f}, nil
}

func (r *sqlResource) Write(ctx context.Context, token uint64, value string) (bool, error) {
	return r.f.Write(ctx, r.env.db, r.key, token, value)
}

func (r *sqlResource) State(ctx context.Context) (uint64, string, error) {
	var token int64
	var value sql.NullString
	q := placeholders(r.env.dialect, "SELECT token, val FROM "+r.env.prefix+"fence WHERE id = ?")
	if err := r.env.db.QueryRowContext(ctx, q, r.key).Scan(&token, &value); err != nil {
		return 0, "", err
	}
	return uint64(token), value.String, nil
}

// Reopen reads the same row again, through a new Fence.
func (r *sqlResource) Reopen(ctx context.Context) (fencingtest.Resource, error) {
	return newSQLResource(ctx, r.env, r.key)
}

// placeholders turns the ? of q into $1, $2... on PostgreSQL.
func placeholders(d sqlDialect, q string) string {
	if d != dialectPostgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// newFenced returns a fresh fenced value kept by recipe on this backend.
func (w *world) newFenced(ctx context.Context, recipe string) (fencingtest.Resource, error) {
	name := w.id + "." + randomID(4)
	switch recipe {
	case recipeProcess:
		return &valueResource{}, nil
	case recipeRedis:
		if w.env.redis == nil {
			return nil, fmt.Errorf("features: the Redis recipe needs the redis backend: tag the scenario @redis")
		}
		return newRedisResource(w.env, fencePrefix(w.env.prefix)+name)
	case recipeSQL:
		if w.env.db == nil {
			return nil, fmt.Errorf("features: the SQL recipe needs a SQL backend: tag the scenario @postgres @mysql")
		}
		return newSQLResource(ctx, w.env, name)
	}
	return nil, fmt.Errorf("features: unknown fencing recipe %q", recipe)
}

func (w *world) fencedValues(list string) error {
	ctx, cancel := w.serverCtx()
	defer cancel()
	for _, recipe := range strings.Split(list, " and ") {
		res, err := w.newFenced(ctx, strings.TrimSpace(recipe))
		if err != nil {
			return err
		}
		w.fences = append(w.fences, fenced{recipe: recipe, res: res})
	}
	return nil
}

func (w *world) fencedWrite(name, value, lease, outcome string) error {
	if len(w.fences) == 0 {
		return errors.New("features: the scenario has no fenced values")
	}
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	ctx, cancel := w.serverCtx()
	defer cancel()
	for _, f := range w.fences {
		ok, err := f.res.Write(ctx, t.Token(), value)
		if err != nil {
			return fmt.Errorf("the write %s failed: %w", f.recipe, err)
		}
		if ok != (outcome == "accepted") {
			return fmt.Errorf("the write of %q with token %d %s was %s, want %s", value, t.Token(), f.recipe, acceptance(ok), outcome)
		}
	}
	return nil
}

func acceptance(ok bool) string {
	if ok {
		return "accepted"
	}
	return "refused"
}

func (w *world) fencedHolds(value, name, lease string) error {
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	ctx, cancel := w.serverCtx()
	defer cancel()
	for _, f := range w.fences {
		token, got, err := f.res.State(ctx)
		if err != nil {
			return fmt.Errorf("reading the value %s: %w", f.recipe, err)
		}
		if token != t.Token() || got != value {
			return fmt.Errorf("the value %s holds %q with token %d, want %q with %d", f.recipe, got, token, value, t.Token())
		}
	}
	return nil
}

func (w *world) kitPasses(recipe string) error {
	ctx, cancel := context.WithTimeout(w.ctx, w.grace(30*w.lease(w.timing)))
	defer cancel()
	failures := fencingtest.Check(ctx, func(ctx context.Context) (fencingtest.Resource, error) {
		return w.newFenced(ctx, recipe)
	})
	if len(failures) > 0 {
		return fmt.Errorf("the kit failed the recipe kept %s: %v", recipe, failures)
	}
	return nil
}

func (w *world) kitFailsIgnorer(list string) error {
	want := strings.Split(strings.ReplaceAll(list, " and ", ", "), ", ")
	failures := fencingtest.Check(w.ctx, func(context.Context) (fencingtest.Resource, error) {
		return &ignoringResource{}, nil
	})
	var got []string
	for _, f := range failures {
		if strings.TrimSpace(f.Message) == "" {
			return fmt.Errorf("the kit's failure of %s says nothing", f.Check)
		}
		got = append(got, f.Check)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("the kit failed the checks %v, want %v: %v", got, want, failures)
	}
	return nil
}
