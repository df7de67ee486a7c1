package simbasql

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestTablePrefixValidation(t *testing.T) {
	tests := []struct {
		give string
		ok   bool
	}{
		{give: "simba_", ok: true},
		{give: "_", ok: true},
		{give: "App1_simba_", ok: true},
		{give: "a" + strings.Repeat("b", 40), ok: true},
		{give: "a" + strings.Repeat("b", 41)},
		{give: "1simba_"},
		{give: "simba-"},
		{give: "simba_; DROP TABLE x; --"},
		{give: `simba"`},
		{give: "simba.x_"},
		{give: "é_"},
	}
	for _, tt := range tests {
		_, err := Options{TablePrefix: tt.give}.resolve()
		if tt.ok != (err == nil) {
			t.Errorf("prefix %q: err = %v, want ok=%v", tt.give, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("prefix %q: %v does not match ErrInvalidOptions", tt.give, err)
		}
		if _, err := Schema(Postgres, tt.give); tt.ok != (err == nil) {
			t.Errorf("Schema(%q): err = %v, want ok=%v", tt.give, err, tt.ok)
		}
	}
	o, err := Options{}.resolve()
	if err != nil || o.TablePrefix != "simba_" || o.CleanupInterval != time.Minute || o.Logger == nil {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
}

func TestSchema(t *testing.T) {
	for _, d := range []Dialect{Postgres, MySQL} {
		s, err := Schema(d, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"CREATE TABLE IF NOT EXISTS simba_session",
			"CREATE TABLE IF NOT EXISTS simba_lease",
			"CREATE TABLE IF NOT EXISTS simba_group_member",
			"PRIMARY KEY (group_name, session_id)",
		} {
			if !strings.Contains(s, want) {
				t.Errorf("%s schema lacks %q", d, want)
			}
		}
		if strings.Contains(s, "{") {
			t.Errorf("%s schema has an unexpanded placeholder:\n%s", d, s)
		}
	}
	my, _ := Schema(MySQL, "x_")
	for _, want := range []string{"ENGINE=InnoDB", "COLLATE ascii_bin", "DATETIME(6)"} {
		if !strings.Contains(my, want) {
			t.Errorf("MySQL schema lacks %q", want)
		}
	}
	if _, err := Schema("oracle", ""); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Schema(oracle): %v, want ErrInvalidOptions", err)
	}
}

// mysqlConfigOf checks and translates a mysql:// URL as Open does.
func mysqlConfigOf(raw string, opts Options) (*mysql.Config, error) {
	u, err := parseDBURL(raw)
	if err != nil {
		return nil, err
	}
	return mysqlConfig(u, opts, nil)
}

func TestMySQLURLTranslation(t *testing.T) {
	custom := &tls.Config{ServerName: "db.internal"}
	tests := []struct {
		name     string
		give     string
		opts     Options
		user     string
		pass     string
		addr     string
		db       string
		tls      bool
		skipVer  bool
		tlsIsOpt bool
		params   map[string]string
		timeout  time.Duration
	}{
		{name: "plain", give: "mysql://root@127.0.0.1:13306/simba_test",
			user: "root", addr: "127.0.0.1:13306", db: "simba_test"},
		{name: "default port", give: "mysql://u:p@db.example/app",
			user: "u", pass: "p", addr: "db.example:3306", db: "app"},
		{name: "escaped password", give: "mysql://u:p%40ss%2Fw%3Ard@h:1/d",
			user: "u", pass: "p@ss/w:rd", addr: "h:1", db: "d"},
		{name: "password option wins", give: "mysql://u:old@h:1/d", opts: Options{Password: "new"},
			user: "u", pass: "new", addr: "h:1", db: "d"},
		{name: "tls=true", give: "mysql://u@h:1/d?tls=true",
			user: "u", addr: "h:1", db: "d", tls: true},
		{name: "tls=skip-verify", give: "mysql://u@h:1/d?tls=skip-verify",
			user: "u", addr: "h:1", db: "d", tls: true, skipVer: true},
		{name: "TLS option wins", give: "mysql://u@h:1/d?tls=false", opts: Options{TLS: custom},
			user: "u", addr: "h:1", db: "d", tls: true, tlsIsOpt: true},
		{name: "driver and server parameters", give: "mysql://u@h:1/d?timeout=3s&sql_mode=%27ANSI%27",
			user: "u", addr: "h:1", db: "d", timeout: 3 * time.Second, params: map[string]string{"sql_mode": "'ANSI'"}},
		{name: "ipv6", give: "mysql://u@[::1]:3307/d",
			user: "u", addr: "[::1]:3307", db: "d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := mysqlConfigOf(tt.give, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.User != tt.user || cfg.Passwd != tt.pass || cfg.Addr != tt.addr || cfg.DBName != tt.db || cfg.Net != "tcp" {
				t.Fatalf("got user=%q pass=%q addr=%q db=%q net=%q", cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName, cfg.Net)
			}
			if !cfg.ParseTime {
				t.Error("parseTime is off")
			}
			if tt.timeout != 0 && cfg.Timeout != tt.timeout {
				t.Errorf("timeout = %v, want %v", cfg.Timeout, tt.timeout)
			}
			for k, v := range tt.params {
				if cfg.Params[k] != v {
					t.Errorf("param %s = %q, want %q", k, cfg.Params[k], v)
				}
			}
			// TLS is resolved by the driver for the real host; check what
			// the connector will use.
			switch {
			case tt.tlsIsOpt:
				if cfg.TLS == nil || cfg.TLS.ServerName != "db.internal" || cfg.TLS == custom {
					t.Errorf("TLS = %+v, want a copy of Options.TLS", cfg.TLS)
				}
			case tt.tls:
				if cfg.TLSConfig == "" || cfg.TLS != nil {
					t.Errorf("TLSConfig = %q, TLS = %v: want the name kept and the config left to the driver", cfg.TLSConfig, cfg.TLS)
				}
			default:
				if cfg.TLS != nil {
					t.Errorf("TLS = %+v, want none", cfg.TLS)
				}
			}
		})
	}

	for _, bad := range []string{
		"mysql://u:secretpw@h:1/",              // no database
		"mysql://u:secretpw@h:1/d?tls=nosuch",  // unknown TLS config
		"mysql://u:secretpw@h:1/d?timeout=xyz", // bad driver parameter
		"mysql://u:secretpw@h:1/d%zz",          // bad escape
	} {
		_, err := mysqlConfigOf(bad, Options{})
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("mysqlConfig(%q): %v, want ErrInvalidOptions", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "secretpw") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

func TestOpenRefusesBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range []struct {
		url  string
		opts Options
	}{
		{url: "sqlite://x.db"},
		{url: "no scheme at all"},
		{url: "postgres://u:secretpw@h:1/d?sslmode=bogus"},
		{url: "postgres://h/d", opts: Options{TablePrefix: "bad-prefix"}},
		{url: "mysql://u:secretpw@h:1/"},
	} {
		b, err := Open(ctx, c.url, c.opts)
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) succeeded", c.url)
			continue
		}
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Open(%q): %v, want ErrInvalidOptions", c.url, err)
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Errorf("Open(%q): the error shows the password: %v", c.url, err)
		}
	}
	if _, err := NewPostgres(nil, Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("NewPostgres(nil): %v", err)
	}
	if _, err := NewMySQL(nil, Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("NewMySQL(nil): %v", err)
	}
}
