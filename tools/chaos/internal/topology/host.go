package topology

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/simba-go/simba/tools/chaos/internal/proxy"
	"github.com/simba-go/simba/tools/chaos/internal/servers"
)

// writeScript makes dir and writes script into it as the executable file
// name, for the topology to run with tools/testenv/lib.sh, which it finds
// above the working directory. It returns the paths of lib.sh and of the
// script.
func writeScript(dir, name string, script []byte) (lib, sh string, err error) {
	if lib, err = servers.FindLib(); err != nil {
		return "", "", fmt.Errorf("topology: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("topology: %w", err)
	}
	sh = filepath.Join(dir, name)
	if err := os.WriteFile(sh, script, 0o755); err != nil {
		return "", "", fmt.Errorf("topology: %w", err)
	}
	return lib, sh, nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	port, err := servers.FreePort()
	if err != nil {
		return 0, fmt.Errorf("topology: %w", err)
	}
	return port, nil
}

// listenLinks takes a free loopback port for each of links, the ports of
// a topology's nodes, and starts in links[i] a proxy to ports[i], for the
// replica of that node to connect through. On an error, links holds the
// proxies started so far, for the caller's Down to close.
func listenLinks(links []*proxy.Proxy) (ports []int, err error) {
	for i := range links {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if links[i], err = proxy.Listen(fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			return nil, fmt.Errorf("topology: %w", err)
		}
		ports = append(ports, port)
	}
	return ports, nil
}
