package simbapg

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestOpenRefusesBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range []struct {
		url  string
		opts Options
		want string
	}{
		{url: "mysql://u:secretpw@h:1/d", want: `scheme "mysql": want postgres://, postgresql://`},
		{url: "no scheme at all", want: "no scheme"},
		{url: "postgres://u:secretpw@h:1/d?sslmode=bogus", want: "sslmode"},
		{url: "postgres://u:secret@pw@h:1/d", want: "percent-encode"},
		{url: "postgres://h/d", opts: Options{TablePrefix: "bad-prefix"}, want: "TablePrefix"},
	} {
		b, err := Open(ctx, c.url, c.opts)
		if err == nil {
			_ = b.Close()
			t.Errorf("Open(%q) succeeded", c.url)
			continue
		}
		if !errors.Is(err, ErrInvalidOptions) || !strings.HasPrefix(err.Error(), "simbapg: ") || !strings.Contains(err.Error(), c.want) {
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

func TestSchema(t *testing.T) {
	s, err := Schema("")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"-- Simba tables for PostgreSQL",
		"CREATE TABLE IF NOT EXISTS simba_session",
		"CREATE TABLE IF NOT EXISTS simba_lease",
		"CREATE TABLE IF NOT EXISTS simba_group_member",
		"PRIMARY KEY (group_name, session_id)",
		`COLLATE "C"`,
		"-- Migration 1: tables.",
		"-- Migration 2: session identity. Adds simba_session.identity.",
		"ALTER TABLE simba_session ADD COLUMN IF NOT EXISTS identity varchar(256) NOT NULL DEFAULT ''",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("schema lacks %q", want)
		}
	}
	if strings.Contains(s, "{") {
		t.Errorf("schema has an unexpanded placeholder:\n%s", s)
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
	ctx := t.Context()
	for name, err := range map[string]error{
		"Init":     f.Init(ctx, nil, "k"),
		"InitPgx":  f.InitPgx(ctx, nil, "k"),
		"Write":    second(f.Write(ctx, nil, "k", 1)),
		"WritePgx": second(f.WritePgx(ctx, nil, "k", 1)),
	} {
		if !errors.Is(err, ErrInvalidFence) || !strings.Contains(err.Error(), "nil database handle") {
			t.Errorf("%s(nil): %v, want ErrInvalidFence", name, err)
		}
	}
	if _, err := NewFence(FenceTable{Table: "t; DROP", Key: "k", Token: "tok"}); !errors.Is(err, ErrInvalidFence) {
		t.Errorf("NewFence of a bad name: %v, want ErrInvalidFence", err)
	}
}

func second(_ bool, err error) error { return err }

func TestOpenBoundsEachConnect(t *testing.T) {
	for _, c := range []struct {
		url, env string
		want     time.Duration
	}{
		{url: "postgres://h1:1,h2:2/d", want: DefaultConnectTimeout},
		{url: "postgres://h1:1,h2:2/d?connect_timeout=7", want: 7 * time.Second},
		{url: "postgres://h/d?connect_timeout=0", want: 0},
		{url: "postgres://h/d", env: "3", want: 3 * time.Second},
	} {
		t.Run(c.url+" "+c.env, func(t *testing.T) {
			t.Setenv("PGCONNECT_TIMEOUT", c.env)
			u, err := url.Parse(c.url)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := pgxpool.ParseConfig(c.url)
			if err != nil {
				t.Fatal(err)
			}
			boundConnect(&cfg.ConnConfig.Config, u)
			if got := cfg.ConnConfig.ConnectTimeout; got != c.want {
				t.Errorf("connect timeout %v, want %v", got, c.want)
			}
		})
	}
}

// TestOpenMultiHostAllDown opens a multi-host URL whose hosts all refuse:
// the one error names each host and shows no password.
func TestOpenMultiHostAllDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, raw := range []string{
		"postgres://app:s3cr3t-pw@127.0.0.1:1,127.0.0.1:2/app?sslmode=disable&target_session_attrs=read-write",
		"postgres://app@127.0.0.1:1,127.0.0.1:2/app?sslmode=disable&target_session_attrs=read-write&password=s3cr3t-pw",
	} {
		b, err := Open(ctx, raw, Options{})
		if err == nil {
			_ = b.Close()
			t.Fatalf("Open(%q) succeeded", raw)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "simbapg: connect: ") || !strings.Contains(msg, "127.0.0.1:1") || !strings.Contains(msg, "127.0.0.1:2") {
			t.Errorf("Open of two down hosts: %v, want a connect error naming both", err)
		}
		if strings.Contains(msg, "s3cr3t") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
