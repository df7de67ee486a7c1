package topology

import (
	"fmt"
	"net"

	"github.com/simba-go/simba/tools/chaos/internal/proxy"
	"github.com/simba-go/simba/tools/chaos/internal/servers"
)

// writeScript makes dir and writes script into it as the executable file
// name, for the topology to run with tools/testenv/lib.sh, which it finds
// above the working directory.
func writeScript(dir, name string, script []byte) (servers.Script, error) {
	sh, err := servers.WriteScript(dir, name, script)
	if err != nil {
		return servers.Script{}, fmt.Errorf("topology: %w", err)
	}
	return sh, nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports, err := servers.FreePorts(n)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	return ports, nil
}

// listenLinks takes a free loopback port for each of links, the ports of
// a topology's nodes, and starts in links[i] a proxy to ports[i], for the
// replica of that node to connect through. On an error, links holds the
// proxies started so far, for the caller's Down to close.
func listenLinks(links []*proxy.Proxy) (ports []int, err error) {
	ports, err = freePorts(len(links))
	if err != nil {
		return nil, err
	}
	for i, port := range ports {
		if links[i], err = proxy.Listen(fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			return nil, fmt.Errorf("topology: %w", err)
		}
	}
	return ports, nil
}

// linkPort is the port of link's address, as a script takes it.
func linkPort(link *proxy.Proxy) string {
	_, port, _ := net.SplitHostPort(link.Addr())
	return port
}
