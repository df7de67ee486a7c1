package features

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql
	"github.com/redis/go-redis/v9"
	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simbaredis "github.com/simba-go/simba/backend-redis"
	simbazk "github.com/simba-go/simba/backend-zk"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// Backend names, as SIMBA_FEATURES_BACKENDS spells them.
const (
	backendMemory   = "memory"
	backendRedis    = "redis"
	backendPostgres = "postgres"
	backendMySQL    = "mysql"
	backendZK       = "zk"
	// backendRedisCluster is the Redis backend on a Redis Cluster: it runs
	// the scenarios tagged @redis too.
	backendRedisCluster = "redis-cluster"
)

// serverVars maps each real backend to the variable that gives its
// server's address.
var serverVars = map[string]string{
	backendRedis:    "SIMBA_TEST_REDIS_URL",
	backendPostgres: "SIMBA_TEST_POSTGRES_URL",
	backendMySQL:    "SIMBA_TEST_MYSQL_URL",
	backendZK:       "SIMBA_TEST_ZK_SERVERS",

	backendRedisCluster: "SIMBA_TEST_REDIS_CLUSTER_URL",
}

var allBackends = []string{backendMemory, backendRedis, backendPostgres, backendMySQL, backendZK, backendRedisCluster}

// sqlDialect is the database of a SQL backend; the zero value is none.
type sqlDialect int

const (
	dialectPostgres sqlDialect = iota + 1
	dialectMySQL
)

// link stalls and heals one node's connection to its backend.
type link interface {
	Stall()
	Heal()
}

// nodeBackend is one node's own connection to the backend under test.
type nodeBackend struct {
	backend simba.Backend
	conn    *memory.Conn // the memory backend's fault controls; nil elsewhere
	link    link
	close   func()
}

// backendEnv is one backend the suite runs on: how to connect a node, what
// the backend promises, and what the run leaves to clean up.
type backendEnv struct {
	name       string
	broadcasts bool           // releases are broadcast (R-CAND-2)
	fake       bool           // scenarios run on a synctest fake clock
	idForm     *regexp.Regexp // the form of its session ids (R-SES-2)
	t          *testing.T     // the backend's subtest: bubbles report to it

	// Direct access to the server, for the checks of its data layout and
	// for the backend's fencing recipe: the one of the backend in use is set.
	prefix  string                // the key prefix (Redis), table prefix (SQL) or root (Zookeeper) of the run
	redis   redis.UniversalClient // Redis: a plain client, or a cluster client
	db      *sql.DB               // PostgreSQL and MySQL
	dialect sqlDialect            // PostgreSQL and MySQL
	zk      *zk.Conn              // Zookeeper
	servers []string              // Zookeeper: the servers, for a connection that ends a session

	// The simba command's view of the backend (cli.feature): the URL it
	// is given, empty where its scenarios do not run, and, on Redis, the
	// key prefix it writes under (its default), which the nodes of its
	// scenarios use too.
	cliBackend string
	cliPrefix  string

	// connect opens a connection for one node of scenario w.
	connect func(ctx context.Context, w *world) (nodeBackend, error)
	// cleanup drops what the run stored on the server.
	cleanup func(ctx context.Context) error
}

var (
	hex128 = regexp.MustCompile(`^[0-9a-f]{32}$`)
	hex64  = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// quiet is the logger of backends: the suite asserts on behaviour, not logs.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// randomID returns n random bytes in hex, to keep runs and scenarios apart
// on shared servers.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// selectedBackends returns the backends to run: SIMBA_FEATURES_BACKENDS
// (default memory) and, when CI is set, every real backend whose server
// variable is set.
func selectedBackends() ([]string, error) {
	raw := os.Getenv("SIMBA_FEATURES_BACKENDS")
	if strings.TrimSpace(raw) == "" {
		raw = backendMemory
	}
	seen := make(map[string]bool)
	var out []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, name := range strings.Split(raw, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if name == "all" {
			for _, b := range allBackends {
				add(b)
			}
			continue
		}
		if name != backendMemory && serverVars[name] == "" {
			return nil, fmt.Errorf("SIMBA_FEATURES_BACKENDS: unknown backend %q (known: %s, all)", name, strings.Join(allBackends, ", "))
		}
		add(name)
	}
	if os.Getenv("CI") != "" {
		for _, name := range allBackends[1:] {
			if os.Getenv(serverVars[name]) != "" {
				add(name)
			}
		}
	}
	return out, nil
}

// openEnv prepares backend name for a run. A real backend whose variable is
// not set is skipped, or fails the test when CI is set.
func openEnv(ctx context.Context, t *testing.T, name string) (*backendEnv, error) {
	if name == backendMemory {
		return memoryEnv(t), nil
	}
	raw := os.Getenv(serverVars[name])
	if raw == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: the %s features cannot run, and CI must not pass by skipping them", serverVars[name], name)
		}
		t.Skipf("%s is not set: skipping the %s features", serverVars[name], name)
	}
	run := randomID(4)
	switch name {
	case backendRedis:
		return redisEnv(t, raw, run)
	case backendRedisCluster:
		return redisClusterEnv(t, raw, run)
	case backendPostgres:
		return postgresEnv(ctx, t, raw, run)
	case backendMySQL:
		return mysqlEnv(ctx, t, raw, run)
	default:
		return zkEnv(t, raw, run)
	}
}

// forCLI is the env of a scenario about the simba command: the same
// server, with the nodes keeping their keys where simba keeps its own.
func (e *backendEnv) forCLI() *backendEnv {
	c := *e
	if e.cliPrefix != "" {
		c.prefix = e.cliPrefix
	}
	return &c
}

// memoryEnv runs every scenario on its own in-memory store, on a fake clock.
// A simba process given memory:// has a store of its own.
func memoryEnv(t *testing.T) *backendEnv {
	return &backendEnv{
		name:       backendMemory,
		broadcasts: true,
		fake:       true,
		idForm:     hex128,
		t:          t,
		cliBackend: "memory://",
		connect: func(_ context.Context, w *world) (nodeBackend, error) {
			c := w.mem.Connect()
			return nodeBackend{backend: c, conn: c, link: c, close: func() {}}, nil
		},
		cleanup: func(context.Context) error { return nil },
	}
}

// redisEnv keeps the run's keys under a prefix of their own and connects
// each node through a proxy.
func redisEnv(t *testing.T, raw, run string) (*backendEnv, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("SIMBA_TEST_REDIS_URL: want redis://host:port/db")
	}
	prefix := "simbafeat" + run + ":"
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("SIMBA_TEST_REDIS_URL: %w", err)
	}
	direct := redis.NewClient(opts)
	return &backendEnv{
		name:       backendRedis,
		broadcasts: true,
		idForm:     hex128,
		t:          t,
		prefix:     prefix,
		redis:      direct,
		cliBackend: raw,
		cliPrefix:  simbaredis.DefaultKeyPrefix,
		connect: func(ctx context.Context, w *world) (nodeBackend, error) {
			ps, err := proxyAll([]string{hostPort(u.Host, "6379")}, nil)
			if err != nil {
				return nodeBackend{}, err
			}
			via := *u
			via.Host = ps[0].Addr()
			b, err := simbaredis.Open(ctx, via.String(), simbaredis.Options{KeyPrefix: w.env.prefix, Logger: quiet})
			if err != nil {
				ps.Close()
				return nodeBackend{}, err
			}
			return nodeBackend{backend: b, link: ps, close: func() { _ = b.Close(); ps.Close() }}, nil
		},
		cleanup: func(ctx context.Context) error {
			defer direct.Close()
			var errs []error
			for _, pattern := range []string{prefix + "*", "{" + fencePrefix(prefix) + "*"} {
				iter := direct.Scan(ctx, 0, pattern, 500).Iterator()
				for iter.Next(ctx) {
					errs = append(errs, direct.Del(ctx, iter.Val()).Err())
				}
				errs = append(errs, iter.Err())
			}
			return errors.Join(errs...)
		},
	}, nil
}

// redisClusterEnv keeps the run's keys under a prefix of their own, with a
// hash tag so that they share one slot, and connects each node through a
// proxy per cluster node: the node's cluster client dials the proxy of
// every address the cluster names.
func redisClusterEnv(t *testing.T, raw, run string) (*backendEnv, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "redis+cluster" || u.Host == "" {
		return nil, errors.New("SIMBA_TEST_REDIS_CLUSTER_URL: want redis+cluster://host:port,host:port")
	}
	addrs := strings.Split(u.Host, ",")
	prefix := "{simbafeat" + run + "}:"
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	return &backendEnv{
		name:       backendRedisCluster,
		broadcasts: true,
		idForm:     hex128,
		t:          t,
		prefix:     prefix,
		redis:      direct,
		connect: func(ctx context.Context, _ *world) (nodeBackend, error) {
			// The cluster names its nodes by the addresses they announce;
			// learn them all first, so that each gets its proxy.
			nodes, err := direct.ClusterNodes(ctx).Result()
			if err != nil {
				return nodeBackend{}, fmt.Errorf("features: CLUSTER NODES: %w", err)
			}
			var targets []string
			for line := range strings.SplitSeq(strings.TrimSpace(nodes), "\n") {
				if f := strings.Fields(line); len(f) > 1 {
					targets = append(targets, strings.SplitN(f[1], "@", 2)[0])
				}
			}
			ps, err := proxyAll(targets, nil)
			if err != nil {
				return nodeBackend{}, err
			}
			via := make(map[string]string, len(targets))
			for i, a := range targets {
				via[a] = ps[i].Addr()
			}
			var dialer net.Dialer
			c := redis.NewClusterClient(&redis.ClusterOptions{
				Addrs: addrs, ContextTimeoutEnabled: true,
				Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
					if p, ok := via[addr]; ok {
						addr = p
					}
					return dialer.DialContext(ctx, network, addr)
				},
			})
			b, err := simbaredis.New(c, simbaredis.Options{KeyPrefix: prefix, Logger: quiet})
			if err != nil {
				_ = c.Close()
				ps.Close()
				return nodeBackend{}, err
			}
			return nodeBackend{backend: b, link: ps, close: func() { _ = b.Close(); _ = c.Close(); ps.Close() }}, nil
		},
		cleanup: func(ctx context.Context) error {
			defer direct.Close()
			return direct.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
				var errs []error
				for _, pattern := range []string{prefix + "*", "{" + fencePrefix(prefix) + "*"} {
					iter := node.Scan(ctx, 0, pattern, 500).Iterator()
					for iter.Next(ctx) {
						errs = append(errs, node.Del(ctx, iter.Val()).Err())
					}
					errs = append(errs, iter.Err())
				}
				return errors.Join(errs...)
			})
		},
	}, nil
}

// sqlTables are the tables the SQL backend creates under a prefix.
func sqlTables(prefix string) []string {
	return []string{prefix + "group_member", prefix + "lease", prefix + "session", prefix + "fence"}
}

// postgresEnv creates the run's tables under a prefix of their own and
// connects each node through a proxy.
func postgresEnv(ctx context.Context, t *testing.T, raw, run string) (*backendEnv, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("SIMBA_TEST_POSTGRES_URL: want postgres://user@host:port/db")
	}
	opts := simbapg.Options{TablePrefix: "feat" + run + "_", Migrate: true, CleanupInterval: -1, Logger: quiet}
	err = migrateSQL(ctx, func() (sqlAdmin, error) {
		b, err := simbapg.Open(ctx, raw, opts)
		if err != nil {
			return nil, err
		}
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	direct, err := sql.Open("pgx", raw)
	if err != nil {
		return nil, err
	}
	if err := createFenceTable(ctx, direct, opts.TablePrefix); err != nil {
		direct.Close()
		return nil, err
	}
	return &backendEnv{
		name:       backendPostgres,
		broadcasts: true,
		idForm:     hex128,
		t:          t,
		prefix:     opts.TablePrefix,
		db:         direct,
		dialect:    dialectPostgres,
		connect: func(ctx context.Context, _ *world) (nodeBackend, error) {
			ps, err := proxyAll([]string{hostPort(u.Host, "5432")}, nil)
			if err != nil {
				return nodeBackend{}, err
			}
			via := *u
			via.Host = ps[0].Addr()
			// The table prefix is an option of simbapg's own:
			// simba.OpenBackend would open the default tables.
			b, err := simbapg.Open(ctx, via.String(), opts)
			if err != nil {
				ps.Close()
				return nodeBackend{}, err
			}
			return nodeBackend{backend: b, link: ps, close: func() { b.Close(); ps.Close() }}, nil
		},
		cleanup: func(ctx context.Context) error {
			defer direct.Close()
			var errs []error
			for _, table := range sqlTables(opts.TablePrefix) {
				_, err := direct.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		},
	}, nil
}

// mysqlConfig reads SIMBA_TEST_MYSQL_URL: a go-sql-driver DSN
// (user@tcp(host:port)/db) or a mysql:// URL.
func mysqlConfig(raw string) (*mysql.Config, error) {
	if !strings.HasPrefix(raw, "mysql://") {
		return mysql.ParseDSN(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	cfg.Addr = hostPort(u.Host, "3306")
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.ParseTime = true
	for k, v := range u.Query() {
		if cfg.Params == nil {
			cfg.Params = make(map[string]string)
		}
		cfg.Params[k] = v[0]
	}
	return cfg, nil
}

// openMySQL connects to the server of cfg, at addr when not empty.
func openMySQL(cfg *mysql.Config, addr string, opts simbamysql.Options) (*simbamysql.Backend, *sql.DB, error) {
	c := cfg.Clone()
	if addr != "" {
		c.Addr = addr
	}
	c.ParseTime = true
	connector, err := mysql.NewConnector(c)
	if err != nil {
		return nil, nil, err
	}
	db := sql.OpenDB(connector)
	b, err := simbamysql.New(db, opts)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return b, db, nil
}

// mysqlEnv creates the run's tables under a prefix of their own and
// connects each node through a proxy.
func mysqlEnv(ctx context.Context, t *testing.T, raw, run string) (*backendEnv, error) {
	cfg, err := mysqlConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("SIMBA_TEST_MYSQL_URL: %w", err)
	}
	opts := simbamysql.Options{TablePrefix: "feat" + run + "_", Migrate: true, CleanupInterval: -1, Logger: quiet}
	var admin *sql.DB
	err = migrateSQL(ctx, func() (sqlAdmin, error) {
		b, db, err := openMySQL(cfg, "", opts)
		if err != nil {
			return nil, err
		}
		admin = db
		return b, nil
	})
	if err == nil {
		err = createFenceTable(ctx, admin, opts.TablePrefix)
	}
	if err != nil {
		if admin != nil {
			admin.Close()
		}
		return nil, err
	}
	return &backendEnv{
		name:    backendMySQL,
		idForm:  hex128,
		t:       t,
		prefix:  opts.TablePrefix,
		db:      admin,
		dialect: dialectMySQL,
		connect: func(ctx context.Context, _ *world) (nodeBackend, error) {
			ps, err := proxyAll([]string{cfg.Addr}, nil)
			if err != nil {
				return nodeBackend{}, err
			}
			b, db, err := openMySQL(cfg, ps[0].Addr(), opts)
			if err != nil {
				ps.Close()
				return nodeBackend{}, err
			}
			return nodeBackend{backend: b, link: ps, close: func() { b.Close(); db.Close(); ps.Close() }}, nil
		},
		cleanup: func(ctx context.Context) error {
			defer admin.Close()
			var errs []error
			for _, table := range sqlTables(opts.TablePrefix) {
				_, err := admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		},
	}, nil
}

// sqlAdmin is what migrateSQL needs of a *simbapg.Backend or a
// *simbamysql.Backend.
type sqlAdmin interface {
	Migrate(ctx context.Context) error
	Close() error
}

// migrateSQL creates the run's tables once, before any node connects.
func migrateSQL(ctx context.Context, open func() (sqlAdmin, error)) error {
	b, err := open()
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Migrate(ctx)
}

// zkEnv keeps the run's nodes under a root of their own and connects each
// node through one proxy per server.
func zkEnv(t *testing.T, raw, run string) (*backendEnv, error) {
	servers, chroot, err := simbazk.ParseConnectString(raw)
	if err != nil {
		return nil, fmt.Errorf("SIMBA_TEST_ZK_SERVERS: %w", err)
	}
	base := "/simbafeat-" + run
	direct, events, err := zk.Connect(servers, 5*time.Second, zk.WithLogger(nopZKLogger{}))
	if err != nil {
		return nil, err
	}
	go func() {
		for range events { // drained until direct.Close closes it
		}
	}()
	return &backendEnv{
		name:       backendZK,
		broadcasts: true,
		idForm:     hex64,
		t:          t,
		prefix:     chroot + base,
		zk:         direct,
		servers:    servers,
		connect: func(_ context.Context, _ *world) (nodeBackend, error) {
			ps, err := proxyAll(servers, zkSessions.note)
			if err != nil {
				return nodeBackend{}, err
			}
			addrs := make([]string, len(ps))
			for i, p := range ps {
				addrs[i] = p.Addr()
			}
			b, err := simbazk.New(addrs, simbazk.Options{Root: chroot + base, Logger: quiet})
			if err != nil {
				ps.Close()
				return nodeBackend{}, err
			}
			return nodeBackend{backend: b, link: ps, close: func() { _ = b.Close(); ps.Close() }}, nil
		},
		cleanup: func(context.Context) error {
			defer direct.Close()
			return zkDeleteTree(direct, chroot+base)
		},
	}, nil
}

// zkDeleteTree deletes p and everything below it.
func zkDeleteTree(conn *zk.Conn, p string) error {
	children, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := zkDeleteTree(conn, path.Join(p, c)); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

type nopZKLogger struct{}

func (nopZKLogger) Printf(string, ...any) {}

// hostPort adds the default port to host when it has none.
func hostPort(host, port string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(host, port)
}

// createFenceTable creates the table whose rows the SQL fencing recipe
// guards: one row per fenced resource.
func createFenceTable(ctx context.Context, db *sql.DB, prefix string) error {
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+prefix+"fence ("+
		"id VARCHAR(64) PRIMARY KEY, token BIGINT NOT NULL DEFAULT 0, val TEXT)")
	if err != nil {
		return fmt.Errorf("create the fence table: %w", err)
	}
	return nil
}
