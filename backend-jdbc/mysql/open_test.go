package simbamysql

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestURLTranslation(t *testing.T) {
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
			cfg, _, err := config(tt.give, tt.opts)
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
		_, _, err := config(bad, Options{})
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("config(%q): %v, want ErrInvalidOptions", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "secretpw") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

func TestDSN(t *testing.T) {
	custom := &tls.Config{ServerName: "db.internal"}
	cfg, _, err := config("u:p@ss/w:rd@tcp(h:1)/d?timeout=3s", Options{})
	if err != nil || cfg.User != "u" || cfg.Passwd != "p@ss/w:rd" || cfg.Addr != "h:1" || cfg.DBName != "d" || cfg.Timeout != 3*time.Second {
		t.Fatalf("DSN read as %+v, %v", cfg, err)
	}
	cfg, _, err = config("u:old@unix(/run/mysqld.sock)/d?tls=false", Options{Password: "new", TLS: custom})
	if err != nil || cfg.Net != "unix" || cfg.Passwd != "new" || cfg.TLS == nil || cfg.TLS == custom {
		t.Fatalf("DSN with options read as %+v, %v; want the password and a copy of the TLS of Options", cfg, err)
	}
	for _, bad := range []string{
		"u:secretpw@tcp(h:1)/",             // no database
		"u:secretpw@tcp(h:1)/d?tls=nosuch", // unknown TLS config
		"u:secretpw@tcp(h:1/d",             // unterminated address
		"u:secret/pw@tcp(h:1)d",            // no slash before the database
	} {
		_, _, err := config(bad, Options{})
		if !errors.Is(err, ErrInvalidOptions) || !strings.HasPrefix(err.Error(), "simbamysql: dsn: ") {
			t.Errorf("config(%q): %v, want a dsn *OptionsError", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
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
		want string
	}{
		{url: "postgres://u:secretpw@h:1/d", want: `scheme "postgres": want mysql://`},
		{url: "mysql://u:secretpw@h:1/", want: "no database name"},
		{url: "mysql://u:secret@pw@h:1/d?x=@", want: "percent-encode"},
		{url: "mysql://h/d", opts: Options{TablePrefix: "bad-prefix"}, want: "TablePrefix"},
	} {
		b, err := Open(ctx, c.url, c.opts)
		if err == nil {
			_ = b.Close()
			t.Errorf("Open(%q) succeeded", c.url)
			continue
		}
		if !errors.Is(err, ErrInvalidOptions) || !strings.HasPrefix(err.Error(), "simbamysql: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q): %v, want ErrInvalidOptions saying %q", c.url, err, c.want)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): the error shows the password: %v", c.url, err)
		}
	}
	if _, err := New(nil, Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New(nil): %v", err)
	}
}

// TestURLAcceptsPasswordsWithReservedCharacters: a percent-encoded URL,
// the way Open's errors point to, parses to the exact password.
func TestURLAcceptsPasswordsWithReservedCharacters(t *testing.T) {
	for _, pw := range []string{"Qz9#Jx8", "Qz9/Jx8", "Qz9?Jx8", "Qz9@Jx8", "Qz9%41Jx8", "Qz9://Jx8", "Ab1#Cd2/Ef3?Gh4@Ij5%Kl6:Mn7"} {
		raw := "mysql://" + url.UserPassword("simba", pw).String() + "@127.0.0.1:3306/db"
		cfg, _, err := config(raw, Options{})
		if err != nil || cfg.Passwd != pw {
			t.Errorf("password %q: %v, %v", pw, cfg, err)
		}
		if got := dsnPassword("simba:" + pw + "@tcp(h:1)/db?x=1"); got != pw {
			t.Errorf("dsnPassword of a DSN with %q = %q", pw, got)
		}
	}
}

func TestSchema(t *testing.T) {
	s, err := Schema("x_")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"-- Simba tables for MySQL/MariaDB",
		"CREATE TABLE IF NOT EXISTS x_session",
		"CREATE TABLE IF NOT EXISTS x_lease",
		"CREATE TABLE IF NOT EXISTS x_group_member",
		"ENGINE=InnoDB", "COLLATE ascii_bin", "DATETIME(6)",
		"-- Migration 2: session identity. Adds x_session.identity.",
		"table_name = 'x_session' AND column_name = 'identity'",
		"'ALTER TABLE x_session ADD COLUMN identity VARCHAR(256)",
		"PREPARE simba_migrate FROM @simba_migrate;", "EXECUTE simba_migrate;", "DEALLOCATE PREPARE simba_migrate;",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("schema lacks %q", want)
		}
	}
	if _, err := Schema("bad-prefix"); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Schema(bad-prefix): %v, want ErrInvalidOptions", err)
	}
}

func TestFenceRefusesNilHandles(t *testing.T) {
	f, err := NewFence(FenceTable{Table: "t", Key: "k", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Init(t.Context(), nil, "k"); !errors.Is(err, ErrInvalidFence) {
		t.Errorf("Init(nil): %v, want ErrInvalidFence", err)
	}
	if _, err := f.Write(t.Context(), nil, "k", 1); !errors.Is(err, ErrInvalidFence) {
		t.Errorf("Write(nil): %v, want ErrInvalidFence", err)
	}
}
