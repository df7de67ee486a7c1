package simbasql

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// secretPasswords hold each character that has a meaning in a URL, alone
// and together, and passwords whose start reads as a port number, so that
// a URL holding them unencoded is misread rather than refused by url.Parse.
var secretPasswords = []string{
	"Qz9#Jx8Wv7",
	"Qz9/Jx8Wv7",
	"Qz9?Jx8Wv7",
	"Qz9@Jx8Wv7",
	"Qz9%Jx8Wv7",
	"Qz9%41Jx8Wv7",
	"Qz9:Jx8Wv7",
	"Qz9://Jx8Wv7",
	"6380/Qz9Jx8",
	"6380#Qz9Jx8",
	"6380?Qz9Jx8",
	"Ab1#Cd2/Ef3?Gh4@Ij5%Kl6:Mn7",
}

// leakedPart returns the longest part of secret (3 bytes or more, with a
// letter in it) that text contains, or "" when there is none.
func leakedPart(text, secret string) string {
	for n := len(secret); n >= 3; n-- {
		for i := 0; i+n <= len(secret); i++ {
			part := secret[i : i+n]
			if !strings.ContainsFunc(part, unicode.IsLetter) {
				continue
			}
			if strings.Contains(text, part) {
				return part
			}
		}
	}
	return ""
}

// TestOpenErrorsHidePasswordsWithReservedCharacters: whatever the password
// holds and however it is given (raw or percent-encoded in a URL, in a
// MySQL DSN, or in Options.Password), no error of Open shows any part of
// it, nor wraps a driver value that keeps it: not for a URL that cannot be
// used, a server that cannot be reached, or credentials the server refuses.
func TestOpenErrorsHidePasswordsWithReservedCharacters(t *testing.T) {
	type server struct {
		schemes []string
		host    string // of the real server
		db      string
		invalid string // a query that makes the URL unusable
	}
	servers := map[Dialect]func(t *testing.T) server{
		Postgres: func(t *testing.T) server {
			u, err := url.Parse(serverEnv(t, "SIMBA_TEST_POSTGRES_URL"))
			if err != nil {
				t.Fatal(err)
			}
			return server{schemes: []string{"postgres", "postgresql"}, host: u.Host, db: "/postgres?sslmode=disable", invalid: "?sslmode=bogus"}
		},
		MySQL: func(t *testing.T) server {
			cfg, err := mysql.ParseDSN(serverEnv(t, "SIMBA_TEST_MYSQL_URL"))
			if err != nil {
				t.Fatal(err)
			}
			return server{schemes: []string{"mysql"}, host: cfg.Addr, db: "/" + cfg.DBName, invalid: "?tls=nosuch"}
		},
	}
	forms := []struct {
		name string
		url  func(scheme, pw, host, rest string) string
		pass bool // the password is in Options.Password
	}{
		{name: "raw in URL", url: func(scheme, pw, host, rest string) string {
			return scheme + "://simba_no_such_user:" + pw + "@" + host + rest
		}},
		{name: "encoded in URL", url: func(scheme, pw, host, rest string) string {
			return scheme + "://" + url.UserPassword("simba_no_such_user", pw).String() + "@" + host + rest
		}},
		{name: "in Options", url: func(scheme, _, host, rest string) string {
			return scheme + "://simba_no_such_user@" + host + rest
		}, pass: true},
		{name: "MySQL DSN", url: func(scheme, pw, host, rest string) string {
			return "simba_no_such_user:" + pw + "@tcp(" + host + ")" + rest
		}},
	}
	check := func(t *testing.T, pw string, err error) {
		t.Helper()
		if part := leakedPart(err.Error(), pw); part != "" {
			t.Errorf("the error shows %q of the password %q: %v", part, pw, err)
		}
		var ce *pgconn.ConnectError
		var pe *pgconn.ParseConfigError
		if errors.As(err, &ce) || errors.As(err, &pe) {
			t.Errorf("the error wraps a %T, which holds the password: %v", err, err)
		}
	}
	for _, d := range []Dialect{Postgres, MySQL} {
		t.Run(string(d), func(t *testing.T) {
			srv := servers[d](t)
			paths := []struct {
				name, host, rest string
				want             func(error) bool // for a usable URL
			}{
				{name: "invalid URL", host: srv.host, rest: srv.db + strings.Replace(srv.invalid, "?", "&", 1),
					want: func(err error) bool { return errors.Is(err, ErrInvalidOptions) }},
				{name: "unreachable", host: "127.0.0.1:1", rest: srv.db,
					want: func(err error) bool { return strings.HasPrefix(err.Error(), "simbasql: connect: ") }},
				{name: "wrong credentials", host: srv.host, rest: srv.db,
					want: func(err error) bool { return strings.HasPrefix(err.Error(), "simbasql: connect: ") }},
			}
			if !strings.Contains(srv.db, "?") {
				paths[0].rest = srv.db + srv.invalid
			}
			for _, scheme := range srv.schemes {
				for _, p := range paths {
					for _, f := range forms {
						if f.name == "MySQL DSN" && d != MySQL {
							continue
						}
						t.Run(scheme+"/"+p.name+"/"+f.name, func(t *testing.T) {
							for _, pw := range secretPasswords {
								var opts Options
								if f.pass {
									opts.Password = pw
								}
								ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
								b, err := Open(ctx, f.url(scheme, pw, p.host, p.rest), opts)
								cancel()
								if err == nil {
									b.Close()
									t.Errorf("password %q: Open succeeded", pw)
									continue
								}
								check(t, pw, err)
								switch f.name {
								case "MySQL DSN":
									if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "NewMySQL") {
										t.Errorf("password %q: %v, want ErrInvalidOptions pointing to NewMySQL", pw, err)
									}
								case "raw in URL":
									// Refused as a URL, or for ':' and '@' the
									// path's own error: nothing more to check.
								default:
									if !p.want(err) {
										t.Errorf("password %q: unexpected error %v", pw, err)
									}
								}
							}
						})
					}
				}
			}
		})
	}
}

// TestOpenAcceptsPasswordsWithReservedCharacters: a percent-encoded URL,
// the way Open's errors point to, still parses to the exact password.
func TestOpenAcceptsPasswordsWithReservedCharacters(t *testing.T) {
	for _, pw := range secretPasswords {
		raw := "mysql://" + url.UserPassword("simba", pw).String() + "@127.0.0.1:3306/db"
		cfg, err := mysqlConfigOf(raw, Options{})
		if err != nil || cfg.Passwd != pw {
			t.Errorf("password %q: %v, %v", pw, cfg, err)
		}
	}
}
