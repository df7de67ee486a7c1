package backendkit

import "strings"

// scheme is a URL scheme of one of this project's backends.
type scheme struct {
	pkg  string // the import path of the package that registers it
	form string // the form of its URLs, for messages
}

// schemes are the URL schemes of this project's backends: what an error
// names for a scheme nobody registered, or a URL without "//".
var schemes = map[string]scheme{
	"memory":          {"github.com/simba-go/simba/core/memory", "memory://[NAME]"},
	"redis":           {redisPkg, "redis://[USER:PASSWORD@]HOST[:PORT][/DB]"},
	"rediss":          {redisPkg, "rediss://[USER:PASSWORD@]HOST[:PORT][/DB]"},
	"redis+sentinel":  {redisPkg, "redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]"},
	"rediss+sentinel": {redisPkg, "rediss+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]"},
	"redis+cluster":   {redisPkg, "redis+cluster://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]"},
	"rediss+cluster":  {redisPkg, "rediss+cluster://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]"},
	"postgres":        {pgPkg, "postgres://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]...]/DB"},
	"postgresql":      {pgPkg, "postgresql://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]...]/DB"},
	"mysql":           {"github.com/simba-go/simba/backend-jdbc/mysql", "mysql://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]...]/DB"},
	"zk":              {"github.com/simba-go/simba/backend-zk", "zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/CHROOT]"},
}

const (
	redisPkg = "github.com/simba-go/simba/backend-redis"
	pgPkg    = "github.com/simba-go/simba/backend-jdbc/postgres"
)

// SchemePackage returns the import path of the package of this project
// that registers the URL scheme name (any case) with simba.RegisterBackend,
// or "" when no package of this project does.
func SchemePackage(name string) string { return schemes[strings.ToLower(name)].pkg }

// URLForm returns the form of the URLs of the scheme name (any case), for
// messages: "memory://[NAME]", "zk://[USER:PASSWORD@]HOST:PORT[,...]...";
// "NAME://..." for a scheme of no backend of this project.
func URLForm(name string) string {
	name = strings.ToLower(name)
	if s, ok := schemes[name]; ok {
		return s.form
	}
	return name + "://..."
}
